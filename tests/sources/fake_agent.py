"""A stand-in agent in its own process, speaking the real protocol (or breaking it on purpose).

Run as a script: ``python fake_agent.py MODE [--socket PATH] [--uid N] [--sent FILE]
[--exit-code N] [--as-pid PID] [--claim-pid PID]``. It listens on PATH (default: this
process's socket in the runtime directory, as the real agent does; with ``--as-pid``, the
socket of that other process, as an impostor would), prints ``ready PATH`` and serves one
client after another. ``--claim-pid`` makes its hello name that process (its pid and start
time) rather than its own.

- ``normal``: hello, sync, one compile with its passes in one ``batch`` frame, a heartbeat, bye, then exits.
- ``unknown``: like ``normal`` with messages of a future type in between.
- ``endless``: hello, sync, then a pass every few milliseconds until killed or the client leaves.
- ``quiet``: hello, sync, a compile begins, then nothing more.
- ``nobye``: hello, sync, a few passes, then hangs up without a bye and exits.
- ``vanish``: hello, sync, a few passes, half a frame, then the process dies.
- ``corrupt``: hello, sync, a few passes, then a good frame and a damaged one in one write.
- ``garbage``: answers with an HTTP response instead of a hello.
- ``major``: a hello of protocol version 2.0.
- ``silent``: reads the client's hello, prints ``greeted`` and never says anything.
- ``hangup``: an agent that can resume (``resume`` among its capabilities). The first client
  gets hello, sync, three passes (six events) (and to a client that sent a filter, a heartbeat
  saying that its filter left out four events more), then, once it sent something (a request,
  left unanswered) or after 5 s, a hang-up without bye while the process stays up; the next gets
  hello, a sync, a ``compile_begin`` labelled ``resumed from N`` with the ``resume`` its hello
  named, three more passes and bye, and the process exits.

``--sent FILE`` appends every byte sent to FILE, so a test can compare a recording with
exactly what went over the wire. Imported, the module offers :class:`FakeAgent`, which
starts one and waits for it to listen.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import msgpack

SCRIPT = Path(__file__).resolve()
READY_TIMEOUT_S = 60.0


def _serve(args: argparse.Namespace) -> int:
    from iket_tui.endpoints import ensure_runtime_dir, process_start_time, socket_path_for
    from iket_tui.protocol import messages as m
    from iket_tui.protocol.codec import MessageDecoder, check_hello, encode_batch, encode_message

    if args.uid is not None:
        os.setgid(args.uid)
        os.setuid(args.uid)
    pid = os.getpid()
    start = process_start_time(pid) or 0
    if args.socket:
        path = Path(args.socket)
    else:
        ensure_runtime_dir()
        listen_as = args.as_pid if args.as_pid is not None else pid
        path = socket_path_for(listen_as, process_start_time(listen_as) or 0)
    if args.claim_pid is not None:
        pid, start = args.claim_pid, process_start_time(args.claim_pid) or 0
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    print(f"ready {path}", flush=True)
    sent = open(args.sent, "ab") if args.sent else None  # noqa: SIM115

    def send(conn: socket.socket, data: bytes) -> None:
        if sent is not None:
            sent.write(data)
            sent.flush()
        conn.sendall(data)

    def msg(conn: socket.socket, message: m.Message) -> None:
        send(conn, encode_message(message))

    def passes(conn: socket.socket, compile_id: int, first: int, count: int, *, batched: bool = False) -> None:
        events = []
        for seq in range(first, first + count):
            t = time.monotonic_ns()
            common: dict[str, Any] = {"compile": compile_id, "context": 0, "seq": seq, "depth": 0, "parent": None}
            events.append(m.pass_start(name=f"tl.Pass{seq}", phase="pipeline_cuda", t_ns=t, **common))
            events.append(
                m.pass_end(name=f"tl.Pass{seq}", phase="pipeline_cuda", t_ns=t + 1000, duration_ns=1000, **common)
            )
        if batched:
            send(conn, encode_batch(events))
            return
        for event in events:
            msg(conn, event)

    hello = m.hello(
        role="agent", pid=pid, start_time=start, software_version="fake", capabilities=[m.CAP_PASSES], argv=sys.argv
    )
    if args.mode == "major":
        hello["proto"] = [2, 0]
    if args.mode == "hangup":
        hello["caps"] = [m.CAP_PASSES, "resume"]
    served = 0
    try:
        while True:
            conn, _ = server.accept()
            decoder = MessageDecoder()
            client_hello: m.Message = {}
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                decoder.feed(data)
                got = list(decoder)
                if got:
                    check_hello(got[0], expect_role="client")
                    client_hello = got[0]
                    break
            if args.mode == "silent":
                print("greeted", flush=True)
                time.sleep(3600)
            if args.mode == "garbage":
                send(conn, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                conn.close()
                continue
            msg(conn, hello)
            if args.mode == "major":
                conn.close()
                continue
            if args.mode == "hangup" and served == 0:
                served += 1
                filtering = bool(client_hello.get("filter"))
                sync = {**m.sync(t_ns=time.monotonic_ns(), backlog=0, backlog_lost=0), "produced": 0}
                msg(conn, {**sync, "filtered": 0, "filtered_passes": 0} if filtering else sync)
                passes(conn, 1, 0, 3)
                if filtering:  # as if the client's filter had left out two passes after those
                    beat = m.heartbeat(t_ns=time.monotonic_ns(), produced=10, dropped=0, open_passes=0)
                    msg(conn, {**beat, "filtered": 4, "filtered_passes": 2})
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)  # whatever the client asks is left unanswered
                conn.close()
                continue
            if args.mode == "hangup":
                sync = m.sync(t_ns=time.monotonic_ns(), backlog=0, backlog_lost=0)
                msg(conn, {**sync, "produced": 6, "resumed": client_hello.get("resume")})
                label = f"resumed from {client_hello.get('resume')}"
                msg(
                    conn, m.compile_begin(compile=2, label=label, kernel="add", target="cuda", t_ns=time.monotonic_ns())
                )
                passes(conn, 2, 0, 3)
                msg(conn, m.bye(t_ns=time.monotonic_ns(), produced=13, dropped=0, reason="exit"))
                conn.close()
                return int(args.exit_code)
            msg(conn, m.sync(t_ns=time.monotonic_ns(), backlog=0, backlog_lost=0))
            msg(
                conn,
                m.compile_begin(compile=1, label="stage=jit-lower, kernel=add", kernel="add", target="cuda", t_ns=1),
            )
            if args.mode == "quiet":
                time.sleep(3600)
            if args.mode == "endless":
                seq = 0
                try:
                    while True:
                        passes(conn, 1, seq, 1)
                        msg(conn, m.heartbeat(t_ns=time.monotonic_ns(), produced=seq, dropped=0, open_passes=0))
                        seq += 1
                        time.sleep(0.005)
                except (BrokenPipeError, ConnectionResetError):
                    conn.close()
                    continue
            passes(conn, 1, 0, 3, batched=args.mode in ("normal", "unknown"))
            if args.mode == "unknown":
                send(conn, _frame({"type": "kernel_flame_v9", "t_ns": time.monotonic_ns(), "blob": b"\x00\x01"}))
                passes(conn, 1, 3, 1)
            if args.mode == "corrupt":
                good = encode_message(m.codegen_begin(compile=1, t_ns=time.monotonic_ns()))
                bad = bytearray(
                    encode_message(m.codegen_end(compile=1, t_ns=time.monotonic_ns(), duration_ns=1, ok=True))
                )
                bad[-1] ^= 0xFF
                send(conn, good + bytes(bad))
                time.sleep(3600)
            if args.mode == "vanish":
                frame = encode_message(m.codegen_begin(compile=1, t_ns=time.monotonic_ns()))
                send(conn, frame[: len(frame) // 2])
                os._exit(9)
            if args.mode == "nobye":
                conn.close()
                return int(args.exit_code)
            end = time.monotonic_ns()
            msg(
                conn, m.compile_end(compile=1, label="stage=jit-lower, kernel=add", t_ns=end, duration_ns=5000, ok=True)
            )
            msg(conn, m.heartbeat(t_ns=end, produced=10, dropped=0, open_passes=0))
            msg(conn, m.bye(t_ns=end, produced=10, dropped=0, reason="exit"))
            conn.close()
            return int(args.exit_code)
    finally:
        if not args.socket:
            path.unlink(missing_ok=True)


def _frame(obj: dict[str, object]) -> bytes:
    from iket_tui.protocol.frames import encode_frame

    return encode_frame(msgpack.packb(obj, use_bin_type=True))


def socket_of(proc: subprocess.Popen[str]) -> Path:
    """The socket the real agent of ``proc`` serves, once it does."""
    from iket_tui import endpoints

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        start = endpoints.process_start_time(proc.pid)
        if start is not None and endpoints.socket_path_for(proc.pid, start).exists():
            return endpoints.socket_path_for(proc.pid, start)
        time.sleep(0.02)
    raise AssertionError(f"no agent socket for pid {proc.pid}")


class FakeAgent:
    """A fake agent process, started and listening inside the ``with`` block."""

    def __init__(
        self,
        mode: str,
        *,
        socket_path: Path | None = None,
        uid: int | None = None,
        sent: Path | None = None,
        exit_code: int = 0,
        as_pid: int | None = None,
        claim_pid: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = [sys.executable, str(SCRIPT), mode, "--exit-code", str(exit_code)]
        if socket_path is not None:
            self.argv += ["--socket", str(socket_path)]
        if uid is not None:
            self.argv += ["--uid", str(uid)]
        if sent is not None:
            self.argv += ["--sent", str(sent)]
        if as_pid is not None:
            self.argv += ["--as-pid", str(as_pid)]
        if claim_pid is not None:
            self.argv += ["--claim-pid", str(claim_pid)]
        self.env = env or {}
        self.path = Path()
        self.process: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> FakeAgent:
        env = {**os.environ, **self.env}
        env.pop("IKET_TUI", None)
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], READY_TIMEOUT_S)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("ready "):
            self.process.kill()
            raise RuntimeError(f"fake agent did not start: {line!r}")
        self.path = Path(line.removeprefix("ready ").strip())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--socket")
    parser.add_argument("--uid", type=int)
    parser.add_argument("--sent")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--as-pid", type=int)
    parser.add_argument("--claim-pid", type=int)
    sys.exit(_serve(parser.parse_args()))
