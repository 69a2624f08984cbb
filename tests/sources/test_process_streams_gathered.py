"""The merged stream gathers what its processes sent within :data:`MERGE_EVERY_S` into one
batch, so that 64 ranks' heartbeats cost the UI ten batches a second rather than 64, each
process's messages still behind a ``process`` message naming it (and its host), in order; and it
says each change of its hosts' state at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from iket_tui.protocol import messages as m
from iket_tui.sources.base import HostState, SourceBatch
from iket_tui.sources.merged import FramesTo, ProcessStreams
from iket_tui.sources.socket import SocketSource

PROCESSES = 16
HEARTBEATS = 5


class Heartbeats:
    """A process's source sending :data:`HEARTBEATS` batches of one heartbeat each, at once."""

    def __init__(self, path: Path, pid: int, host: str | None) -> None:
        self.path = path
        self.host = host
        self.pid = pid
        self.agent_hello: m.Message | None = None
        self.end_reason: str | None = None
        self._closed = threading.Event()

    def connect(self) -> m.Message:
        self.agent_hello = m.hello(role="agent", pid=self.pid, start_time=7, software_version="t", capabilities=[])
        return self.agent_hello

    def batches(self) -> Iterator[SourceBatch]:
        for n in range(HEARTBEATS):
            yield SourceBatch(messages=(m.heartbeat(t_ns=n, produced=n, dropped=0, open_passes=0),))
        self._closed.wait(30)

    def close(self, reason: str = "closed") -> None:
        self._closed.set()

    def close_and_wait(self, reason: str = "closed", *, timeout_s: float = 5.0) -> None:
        self.close(reason)


def test_batches_of_many_processes_come_gathered_each_process_named_with_its_host() -> None:
    hosts = [HostState("node1"), HostState("node2")]

    def reader_of(path: Path, frames_to: FramesTo | None) -> SocketSource:
        number = int(path.name)
        return Heartbeats(path, 100 + number // 2, f"node{1 + number % 2}")  # type: ignore[return-value]

    streams = ProcessStreams(
        [Path(str(n)) for n in range(PROCESSES)],
        reader_of=reader_of,
        hosts=lambda: tuple(hosts),
        following=lambda: True,
    )
    out: list[SourceBatch] = []
    reading = threading.Thread(target=lambda: out.extend(streams.batches()), daemon=True)
    reading.start()
    deadline = time.monotonic() + 30
    while sum(1 for b in list(out) for msg in b.messages if msg["type"] == m.HEARTBEAT) < PROCESSES * HEARTBEATS:
        assert time.monotonic() < deadline, "not every heartbeat came"
        time.sleep(0.01)
    hosts[1] = HostState("node2", lost_at_s=time.monotonic(), why="Connection reset")
    while not any(b.hosts is not None and b.hosts[1].lost_at_s is not None for b in list(out)):
        assert time.monotonic() < deadline, "the lost host was never said"
        time.sleep(0.01)
    streams.close_and_wait()
    reading.join(10)
    with_messages = [batch for batch in out if batch.messages]
    assert len(with_messages) <= 4, len(with_messages)  # 80 of the processes' batches, gathered
    seen: dict[tuple[str, int], list[int]] = {}
    who: tuple[str, int] | None = None
    for msg in (msg for batch in with_messages for msg in batch.messages):
        if msg["type"] == m.PROCESS:
            who = (msg["host"], msg["pid"])
        elif msg["type"] == m.HEARTBEAT:
            assert who is not None
            seen.setdefault(who, []).append(msg["t_ns"])
    pids = range(100, 100 + PROCESSES // 2)
    assert set(seen) == {(host, pid) for host in ("node1", "node2") for pid in pids}  # the same pids, kept apart
    assert all(times == list(range(HEARTBEATS)) for times in seen.values())
    said = [batch.hosts for batch in out if batch.hosts is not None]
    assert said[0] == (HostState("node1"), HostState("node2"))  # said as the stream begins
    assert len(said) == 2  # and again only once it changed
