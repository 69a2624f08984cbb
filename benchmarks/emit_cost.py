"""The agent's emit path with a stalled client: per-event cost, and exact loss accounting.

A client connects, completes the handshake and then never reads again, so its socket buffer
and its queue fill and every further event is dropped and counted. Each ``emit`` (building
the pass message included, as the TileLang observer does) is timed on its own.
"""

from __future__ import annotations

import socket
import time

from benchmarks.results import Figure, median, percentile
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, encode_message

EVENTS = 300_000


def _stalled_client(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(path)
    sock.sendall(encode_message(m.hello(role="client", pid=0, start_time=0, software_version="bench", capabilities=[])))
    decoder = MessageDecoder()
    while True:
        decoder.feed(sock.recv(65536))
        if any(msg["type"] == m.SYNC for msg in decoder):
            return sock


def run() -> list[Figure]:
    import iket_tui.agent as agent
    from iket_tui.agent.registry import registry

    running = agent.start(queue=10_000, send_buffer=4096)
    client = _stalled_client(str(running.socket_path))
    deadline = time.monotonic() + 10
    while running.clients < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    clock = time.perf_counter_ns
    costs = []
    for seq in range(EVENTS):
        t0 = clock()
        registry.emit(
            m.pass_end(
                compile=1,
                context=1,
                name="tl.LayoutInference",
                seq=seq,
                depth=0,
                parent=None,
                phase="pipeline_cuda",
                t_ns=t0,
                duration_ns=1000,
            )
        )
        costs.append(clock() - t0)
    (stats,) = running.client_stats()
    balanced = stats.produced == stats.delivered + stats.dropped + stats.queued
    client.close()
    agent.stop()
    accounting = (
        f"produced {stats.produced} = delivered {stats.delivered} + dropped {stats.dropped} + queued {stats.queued}"
        f" ({'exact' if balanced else 'MISMATCH'})"
    )
    return [
        Figure("emit p99, stalled client", percentile(costs, 0.99) / 1000, "us", 5.0, accounting),
        Figure("emit median, stalled client", median(costs) / 1000, "us", 5.0, f"{EVENTS} events"),
        Figure("events lost but not counted", 0 if balanced else 1, "", 0, ""),
    ]
