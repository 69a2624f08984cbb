"""``attach node1: node2: node3:``: one view of a job across machines, through a real sshd on loopback.

Each "host" is a port of the test's OpenSSH server whose sessions have a runtime directory of
their own (see :mod:`ssh_server`), so that each sees only its own agents, as the machines of a
cluster do. The ranks are real processes running the real agent, each with ``RANK`` set, that
emit a compile of a few passes as TileLang's observer would and one more on each cue
(``targets/job_rank.py``); rank 3 stays in ``tl.LayoutInference``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ssh_server import NoSshd, Sshd, cli_helpers, free_port, start_sshd

from iket_tui.cli.targets import job_source, job_targets
from iket_tui.model.behind import passes_behind
from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.sources.base import HostState, SourceError
from iket_tui.sources.merged import ProcessStreams
from iket_tui.sources.reading import read_recording

TESTS = Path(__file__).resolve().parents[1]
RANK = TESTS / "e2e" / "targets" / "job_rank.py"
HOSTS = ("node1", "node2", "node3")
RANKS_PER_HOST = 2
SLOW_RANK = 3  # node2's second rank
TIMEOUT_S = 120.0


cli = cli_helpers()


class Cluster:
    """The test's sshd serving :data:`HOSTS`, and :data:`RANKS_PER_HOST` ranks on each."""

    def __init__(self, sshd: Sshd, runtimes: dict[str, Path]) -> None:
        self.sshd = sshd
        self.runtimes = runtimes
        self.ranks: dict[str, list[subprocess.Popen[str]]] = {host: [] for host in runtimes}

    def start_ranks(self) -> None:
        rank = 0
        for host, runtime in self.runtimes.items():
            for _ in range(RANKS_PER_HOST):
                env = {
                    **os.environ,
                    "IKET_TUI": "",
                    "XDG_RUNTIME_DIR": str(runtime),
                    "RANK": str(rank),
                    "IKET_TEST_SLOW_RANK": str(SLOW_RANK),
                }
                process = subprocess.Popen(
                    [sys.executable, str(RANK)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
                )
                self.ranks[host].append(process)
                rank += 1
        for processes in self.ranks.values():
            for process in processes:
                assert process.stdout is not None and process.stdout.readline() == "ready\n"

    def go(self, host: str) -> None:
        """Each rank on ``host`` runs one more compile."""
        for process in self.ranks[host]:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("go\n")
            process.stdin.flush()
            assert process.stdout.readline().startswith("done ")

    def bridge_session(self, host: str) -> int:
        """The pid of the sshd process serving ``host``'s connection (the one bridge's)."""
        for pid in self.sshd.sessions():
            for child in _descendants(pid):
                try:
                    environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
                    command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"--all" in command and f"XDG_RUNTIME_DIR={self.runtimes[host]}".encode() in environ:
                    return pid
        raise AssertionError(f"no bridge serves {host}")

    def stop(self) -> None:
        for processes in self.ranks.values():
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.append(child)
            stack.append(child)
    return found


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    iket_bin = Path(sys.executable).parent
    if not (iket_bin / "iket-tui").exists():
        pytest.skip(f"no iket-tui beside {sys.executable} to put on the remote PATH")
    home = Path(tempfile.mkdtemp(prefix="iks"))
    own = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    runtimes = {host: Path(tempfile.mkdtemp(prefix="ik")) for host in HOSTS}
    try:
        server = start_sshd(home, iket_bin=iket_bin, runtime_dir=own, hosts=runtimes)
    except NoSshd as exc:
        pytest.skip(str(exc))
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(own))
    patch.setenv("IKET_TUI_SSH", f"ssh -F {server.client_config}")
    patch.delenv("IKET_TUI", raising=False)
    patch.delenv("IKET_TUI_REMOTE", raising=False)
    job = Cluster(server, runtimes)
    try:
        job.start_ranks()
        yield job
    finally:
        job.stop()
        server.stop()
        patch.undo()
        for path in (home, own, *runtimes.values()):
            shutil.rmtree(path, ignore_errors=True)


class Watched:
    """A merged stream read on a thread of its own into a session, as the UI would."""

    def __init__(self, source: ProcessStreams) -> None:
        self.source = source
        self.session = Session(by_rank=True)
        self.hosts: list[tuple[HostState, ...]] = []
        self.notes: list[str] = []
        self.error: str | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for batch in self.source.batches():
            with self._lock:
                self.session.apply(batch.messages)
                self.notes += batch.notes
                if batch.hosts is not None:
                    self.hosts.append(batch.hosts)
                if batch.error:
                    self.error = batch.error

    def labels(self) -> list[str]:
        with self._lock:
            tree = self.session.tree
            return sorted(tree.process_label(process) for process in tree.processes)

    def compiles_done(self, host: str) -> int:
        """Compiles that ended well in the ranks of ``host``."""
        with self._lock:
            return sum(
                1
                for process in self.session.tree.processes
                if process.host == host
                for comp in process.compiles
                if comp.status.value == "done"
            )

    def lost(self, host: str) -> bool:
        """Whether the latest state said of ``host`` is lost."""
        with self._lock:
            latest = self.hosts[-1] if self.hosts else ()
        return any(state.host == host and state.lost_at_s is not None for state in latest)

    def behind(self) -> list[str]:
        with self._lock:
            now = self.session.last_t_ns + 60_000_000_000
            return [found.text for found in passes_behind(self.session.tree, now)]

    def close(self) -> None:
        self.source.close_and_wait("done")
        self._thread.join(TIMEOUT_S)


EVERY_RANK = [f"node{1 + rank // RANKS_PER_HOST}/rank {rank}" for rank in range(len(HOSTS) * RANKS_PER_HOST)]


def test_every_rank_of_every_host_in_one_tree_through_one_ssh_connection_per_host(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "job.msgpack"
    watched = Watched(job_source(job_targets(["node[1-3]:"]), record_to=out, filters={}))
    try:
        cli.wait_until(lambda: watched.labels() == EVERY_RANK, timeout=TIMEOUT_S)
        assert len(cluster.sshd.sessions()) == len(HOSTS)  # one login per host, not one per rank
        cli.wait_until(lambda: bool(watched.behind()), timeout=TIMEOUT_S)
        (behind,) = watched.behind()
        assert behind.startswith("node2/rank 3 has been in `tl.LayoutInference` ")
        assert "; the other ranks finished it in " in behind  # the five on every host
    finally:
        watched.close()
    msgs, info = read_recording(out)
    assert info.ended
    processes = {(msg["host"], msg["pid"]) for msg in msgs if msg["type"] == m.PROCESS}
    assert {host for host, _ in processes} == set(HOSTS)
    assert len(processes) == len(HOSTS) * RANKS_PER_HOST  # every process kept apart, by host
    replayed = Session(by_rank=True)
    replayed.apply(msgs)
    assert sorted(replayed.tree.process_label(process) for process in replayed.tree.processes) == EVERY_RANK


def test_a_host_that_drops_is_said_lost_the_others_go_on_and_it_comes_back(cluster: Cluster) -> None:
    watched = Watched(job_source(job_targets(["node1:", "node2:", "node3:"]), record_to=None, filters={}))
    try:
        cli.wait_until(lambda: watched.labels() == EVERY_RANK, timeout=TIMEOUT_S)
        os.kill(cluster.bridge_session("node2"), signal.SIGKILL)  # its connection drops
        cli.wait_until(lambda: watched.lost("node2"), timeout=TIMEOUT_S)
        assert not watched.lost("node1") and not watched.lost("node3")
        before = watched.compiles_done("node1")
        cluster.go("node1")  # the others go on meanwhile
        cli.wait_until(lambda: watched.compiles_done("node1") == before + RANKS_PER_HOST, timeout=TIMEOUT_S)
        cli.wait_until(lambda: not watched.lost("node2"), timeout=TIMEOUT_S)  # logged in again
        done = watched.compiles_done("node2")
        cluster.go("node2")  # and its ranks' streams are taken up again
        cli.wait_until(lambda: watched.compiles_done("node2") == done + RANKS_PER_HOST, timeout=TIMEOUT_S)
        assert watched.error is None
        assert watched.labels() == EVERY_RANK  # the same ranks, not new ones
        assert not [note for note in watched.notes if "hung up" in note]  # said once, for the host, not per rank
    finally:
        watched.close()


def test_the_ui_names_every_rank_compares_them_and_says_a_lost_host_in_its_header(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "ui.msgpack"
    terminal = cli.Terminal("attach", "node[1-3]:", "--stuck-after", "1", "--record", str(out), columns=200, rows=50)
    terminal.wait_for(b"6 processes (6 ranks)")
    terminal.wait_for(b"node2/rank 3 has been in `tl.LayoutInference`")
    os.kill(cluster.bridge_session("node2"), signal.SIGKILL)
    terminal.wait_for(b"node2: lost")  # in full where the width holds it: ", reconnecting (1 s)"
    cluster.go("node1")
    terminal.press(b"q")
    assert terminal.wait_exit() == 0
    cli.assert_no_traceback("\n".join(terminal.lines_after_ui))
    msgs, info = read_recording(out)
    assert info.ended
    assert {msg["host"] for msg in msgs if msg["type"] == m.PROCESS} == set(HOSTS)


def test_attach_where_no_host_can_be_reached_is_one_line_naming_the_first(cluster: Cluster) -> None:
    result = cli.run_iket("attach", "nowhere:", "stranger:")
    cli.assert_one_line_error(result, "nowhere: ssh cannot reach it", "(and 1 more hosts)")
    cli.wait_until(lambda: not cluster.sshd.sessions(), timeout=30)


def test_a_host_reached_with_no_agents_and_one_unreachable_is_one_line_saying_both(cluster: Cluster) -> None:
    cluster.stop()  # no rank runs on node1
    result = cli.run_iket("attach", "node1:", "nowhere:")
    cli.assert_one_line_error(result, "no live iket-tui agents on node1 ", "; and nowhere: ssh cannot reach it")
    cli.wait_until(lambda: not cluster.sshd.sessions(), timeout=30)  # the host reached was let go


class Forwarder:
    """A port of loopback relaying each connection to another port: a host that comes up."""

    def __init__(self, port: int, to: int) -> None:
        self._to = to
        self._server = socket.create_server(("127.0.0.1", port))
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                theirs, _ = self._server.accept()
            except OSError:
                return
            ours = socket.create_connection(("127.0.0.1", self._to))
            self._open += [theirs, ours]
            threading.Thread(target=self._pump, args=(theirs, ours), daemon=True).start()
            threading.Thread(target=self._pump, args=(ours, theirs), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._server.close()
        for sock in self._open:
            sock.close()


def _down(cluster: Cluster, host: str) -> Callable[[], Forwarder]:
    """Point ``host``'s alias at a port of loopback where nothing listens; returns what brings it
    up there (a relay to its sshd's port)."""
    config = cluster.sshd.client_config
    text = config.read_text()
    block = text[text.index(f"Host {host}\n") :]
    found = re.search(r"Port (\d+)", block)
    assert found is not None
    real, port = int(found.group(1)), free_port()
    config.write_text(text.replace(f"Host {host}\n    Port {real}\n", f"Host {host}\n    Port {port}\n"))
    known = config.parent / "known_hosts"
    (key,) = [line for line in known.read_text().splitlines() if line.startswith(f"[127.0.0.1]:{real} ")]
    known.write_text(known.read_text() + key.replace(f":{real} ", f":{port} ", 1) + "\n")
    return lambda: Forwarder(port, real)


def test_a_host_unreachable_as_attach_starts_is_lost_while_the_others_stream_and_joins_once_up(
    cluster: Cluster, tmp_path: Path
) -> None:
    up = _down(cluster, "node3")
    out = tmp_path / "late.msgpack"
    watched = Watched(job_source(job_targets(["node[1-3]:"]), record_to=out, filters={}))
    relay: Forwarder | None = None
    try:
        cli.wait_until(lambda: watched.labels() == EVERY_RANK[:4], timeout=TIMEOUT_S)  # node1's and node2's
        assert watched.lost("node3") and not watched.lost("node1") and not watched.lost("node2")
        (said,) = [note for note in watched.notes if note.startswith("node3: ")]
        assert said.startswith("node3: ssh cannot reach it (") and said.endswith(
            "; logging in again while the others stream"
        )
        before = watched.compiles_done("node1")
        cluster.go("node1")
        cli.wait_until(lambda: watched.compiles_done("node1") == before + RANKS_PER_HOST, timeout=TIMEOUT_S)
        relay = up()
        cli.wait_until(lambda: watched.labels() == EVERY_RANK, timeout=TIMEOUT_S)  # its ranks join the tree
        cli.wait_until(lambda: not watched.lost("node3"), timeout=TIMEOUT_S)
        done = watched.compiles_done("node3")
        cluster.go("node3")
        cli.wait_until(lambda: watched.compiles_done("node3") == done + RANKS_PER_HOST, timeout=TIMEOUT_S)
        assert watched.error is None
    finally:
        watched.close()
        if relay is not None:
            relay.close()
    msgs, info = read_recording(out)
    assert info.ended
    assert {msg["host"] for msg in msgs if msg["type"] == m.PROCESS} == set(HOSTS)


def test_the_header_says_a_host_unreachable_as_attach_starts_lost_until_its_ranks_join(cluster: Cluster) -> None:
    up = _down(cluster, "node2")
    terminal = cli.Terminal("attach", "node1:", "node2:", "node3:", columns=200, rows=50)
    relay: Forwarder | None = None
    try:
        terminal.wait_for(b"4 processes (4 ranks)")
        terminal.wait_for(b"node2: lost")
        relay = up()
        terminal.wait_for(b"6 processes (6 ranks)")
        terminal.press(b"q")
        assert terminal.wait_exit() == 0
    finally:
        if relay is not None:
            relay.close()
    cli.assert_no_traceback("\n".join(terminal.lines_after_ui))


RESTARTING_TARGET = TESTS / "sources" / "restarting_target.py"


def test_an_agent_stopped_and_started_again_on_a_host_is_followed_through_its_one_connection(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Its stream ends on its channel while its process runs on; the bridge carries it again on
    a new channel once it listens, and the stream is taken up with every event once."""
    gate = tmp_path / "gate"
    env = {**os.environ, "IKET_TEST_GATE": str(gate), "XDG_RUNTIME_DIR": str(cluster.runtimes["node1"])}
    target = subprocess.Popen([sys.executable, str(RESTARTING_TARGET)], env=env, stdout=subprocess.PIPE, text=True)
    assert target.stdout is not None
    target.stdout.readline()  # its socket: listening
    source = job_source(job_targets(["node1:"]), record_to=None, filters={})
    got: list[str] = []
    notes: list[str] = []
    whose: int | None = None
    try:
        for batch in source.batches():
            notes += batch.notes
            for msg in batch.messages:
                if type(msg) is not dict:
                    continue
                if msg["type"] == m.PROCESS:
                    whose = msg["pid"]
                elif msg["type"] == m.CALLBACK_MISMATCH and whose == target.pid:
                    got.append(msg["got"])
            if len(got) == 100:
                gate.touch()  # the target stops its agent, and starts it again
            if len(got) == 250:
                gate.with_name("gate.exit").touch()
            if target.poll() is not None:
                break
        assert target.wait(TIMEOUT_S) == 0
    finally:
        source.close_and_wait()
        if target.poll() is None:
            target.kill()
            target.wait()
    assert got == [f"event {n}" for n in range(250)]  # every event once
    assert any(note.startswith(f"node1/pid {target.pid}: its stream taken up again after ") for note in notes), notes


def _ranks_by_host(cluster: Cluster) -> set[tuple[str, int]]:
    return {(host, process.pid) for host, processes in cluster.ranks.items() for process in processes}


def test_ls_lists_every_hosts_agents_in_one_table_and_a_host_unreachable_in_one_line(cluster: Cluster) -> None:
    result = cli.run_iket("ls", "node[1-3]:", "nowhere")
    assert result.returncode == 0, result.stderr
    cli.assert_no_traceback(result.stderr)
    (said,) = result.stderr.splitlines()
    assert said.startswith("iket-tui: nowhere: ssh cannot reach it (")
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["HOST", "PID", "UPTIME", "SOCKET", "COMMAND"]
    assert {(row.split()[0], int(row.split()[1])) for row in rows} == _ranks_by_host(cluster)
    assert all(row.endswith(f"{sys.executable} {RANK}") for row in rows), rows
    as_json = cli.run_iket("ls", "node1", "node3:", "--format", "json")
    assert as_json.returncode == 0 and as_json.stderr == ""
    listed = json.loads(as_json.stdout)
    assert {(agent["host"], agent["pid"]) for agent in listed} == {
        (host, pid) for host, pid in _ranks_by_host(cluster) if host != "node2"
    }
    assert all(agent["argv"] == [sys.executable, str(RANK)] for agent in listed)


def test_ls_where_no_host_answers_says_each_in_one_line_and_exits_2(cluster: Cluster, tmp_path: Path) -> None:
    listed = tmp_path / "hosts.txt"
    listed.write_text("nowhere\nstranger\n")
    result = cli.run_iket("ls", "--hosts", str(listed))
    assert result.returncode == 2 and result.stdout == ""
    cli.assert_no_traceback(result.stderr)
    nowhere, stranger = result.stderr.splitlines()
    assert nowhere.startswith("iket-tui: nowhere: ssh cannot reach it (")
    assert stranger.startswith("iket-tui: stranger: ssh could not log in (")


def test_record_keeps_every_process_of_every_host_apart_for_replay_dump_and_export(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "job.msgpack"
    listed = tmp_path / "hosts.txt"
    listed.write_text("node1\nnode2\n")
    log = tmp_path / "record.log"

    def processes() -> set[tuple[str, int]]:
        """The processes the recording names so far, once as many hellos (which name their
        ranks) are in it: a process is named when its messages first follow another's, which
        may be before its hello was written."""
        try:
            msgs, _ = read_recording(out)
        except SourceError:
            return set()
        named = {(msg["host"], msg["pid"]) for msg in msgs if msg["type"] == m.PROCESS}
        hellos = sum(1 for msg in msgs if msg["type"] == m.HELLO and msg.get("role", "agent") == "agent")
        return named if hellos >= len(named) else set()

    with log.open("w") as said:
        record = subprocess.Popen(
            cli.iket_command("record", "node3:", "nowhere:", "--hosts", str(listed), "-o", str(out)),
            stdout=said,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        cli.wait_until(lambda: processes() == _ranks_by_host(cluster), timeout=TIMEOUT_S)
        assert len(cluster.sshd.sessions()) == len(HOSTS)  # one login per host reached
        record.send_signal(signal.SIGINT)
        assert record.wait(TIMEOUT_S) == 128 + signal.SIGINT
    finally:
        if record.poll() is None:
            record.kill()
            record.wait()
    text = log.read_text()
    cli.assert_no_traceback(text)
    lines = text.splitlines()
    assert any(
        line.startswith("iket-tui: nowhere: ssh cannot reach it (")
        and line.endswith("; logging in again while the others stream")
        for line in lines
    ), text
    assert lines[-1].startswith("recorded ") and "from 4 hosts: node1, node2, node3 and 1 more" in lines[-1]
    assert lines[-1].endswith("(interrupted)")
    msgs, info = read_recording(out)
    assert info.ended
    replayed = Session(by_rank=True)
    replayed.apply(msgs)
    assert sorted(replayed.tree.process_label(process) for process in replayed.tree.processes) == EVERY_RANK
    dumped = cli.run_iket("dump", str(out))
    assert dumped.returncode == 0, dumped.stderr
    for host, pid in _ranks_by_host(cluster):  # each run of a process's messages under its process line
        assert re.search(rf"^ +process +pid={pid} start_time=\d+ host={host}$", dumped.stdout, re.MULTILINE)
    trace = tmp_path / "job.json"
    exported = cli.run_iket("export", str(out), "-o", str(trace))
    assert exported.returncode == 0, exported.stderr
    names = {
        event["args"]["name"]
        for event in json.loads(trace.read_text())["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    for host, pid in _ranks_by_host(cluster):
        assert any(name.startswith(f"{host}/pid {pid} rank ") for name in names), names


def test_serve_attach_of_a_host_range_records_every_rank_and_serves_the_one_view(
    cluster: Cluster, tmp_path: Path
) -> None:
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    out = tmp_path / "served.msgpack"
    log = tmp_path / "serve.log"
    served = {(host, pid) for host, pid in _ranks_by_host(cluster) if host != "node3"}

    def processes() -> set[tuple[str, int]]:
        try:
            msgs, _ = read_recording(out)
        except SourceError:
            return set()
        return {(msg["host"], msg["pid"]) for msg in msgs if msg["type"] == m.PROCESS}

    port = free_port()

    async def tab_until_both_hosts_have_its_login_too() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"http://127.0.0.1:{port}/ws?width=120&height=40") as websocket,
        ):
            deadline = time.monotonic() + TIMEOUT_S
            while len(cluster.sshd.sessions()) < 4:  # the tab's attach logs in to each host too
                assert time.monotonic() < deadline, "the tab never attached to both hosts"
                with contextlib.suppress(TimeoutError):
                    await websocket.receive(timeout=0.1)
            await websocket.close()

    with log.open("w") as said:
        serve = subprocess.Popen(
            cli.iket_command("serve", "--port", str(port), "--record", str(out), "attach", "node[1-2]:"),
            stdout=said,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        cli.wait_until(lambda: "Ctrl-C stops" in log.read_text() or serve.poll() is not None, timeout=TIMEOUT_S)
        assert serve.poll() is None, log.read_text()
        cli.wait_until(lambda: processes() == served, timeout=TIMEOUT_S)
        assert len(cluster.sshd.sessions()) == 2  # serve's own: one per host
        asyncio.run(tab_until_both_hosts_have_its_login_too())
        serve.send_signal(signal.SIGINT)
        assert serve.wait(TIMEOUT_S) == 0, log.read_text()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    text = log.read_text()
    cli.assert_no_traceback(text)
    assert "each browser tab attaches to 2 hosts: node1, node2" in text
    msgs, info = read_recording(out)
    assert info.ended
    replayed = Session(by_rank=True)
    replayed.apply(msgs)
    assert sorted(replayed.tree.process_label(process) for process in replayed.tree.processes) == EVERY_RANK[:4]


def test_record_says_a_host_that_drops_on_stderr_and_goes_on_recording_it_once_back(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "dropped.msgpack"
    log = tmp_path / "record.log"

    def done_on(host: str) -> int:
        try:
            msgs, _ = read_recording(out)
        except SourceError:
            return 0
        whose: str | None = None
        count = 0
        for msg in msgs:
            if msg["type"] == m.PROCESS:
                whose = msg.get("host")
            elif msg["type"] == m.COMPILE_END and msg["ok"] and whose == host:
                count += 1
        return count

    with log.open("w") as said:
        record = subprocess.Popen(
            cli.iket_command("record", "node1:", "node2:", "-o", str(out)),
            stdout=said,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        cli.wait_until(lambda: done_on("node1") > 0 and done_on("node2") > 0, timeout=TIMEOUT_S)
        os.kill(cluster.bridge_session("node2"), signal.SIGKILL)
        cli.wait_until(lambda: "iket-tui: node2: lost (" in log.read_text(), timeout=TIMEOUT_S)
        cli.wait_until(lambda: "iket-tui: node2: back" in log.read_text(), timeout=TIMEOUT_S)
        before = done_on("node2")
        cluster.go("node2")
        cli.wait_until(lambda: done_on("node2") == before + RANKS_PER_HOST, timeout=TIMEOUT_S)
        record.send_signal(signal.SIGTERM)
        assert record.wait(TIMEOUT_S) == 128 + signal.SIGTERM
    finally:
        if record.poll() is None:
            record.kill()
            record.wait()
    text = log.read_text()
    cli.assert_no_traceback(text)
    assert text.count("node2: lost") == 1 and "node1: lost" not in text, text
    assert text.splitlines()[-1].endswith("(terminated)")
    _, info = read_recording(out)
    assert info.ended
