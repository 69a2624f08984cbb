"""A recording of a job across machines, where every host's rank has the same pid: the recorder
counts each process's drops apart, and dump's closing lines name the process by host, so the
rank behind is compared with the ranks of every other host."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_iket

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.merged import process_message
from iket_tui.sources.reading import read_recording
from iket_tui.sources.recorder import RecordingWriter

PID = 4242
SLOW = "tl.LayoutInference"


def write_job(path: Path) -> None:
    """Ranks 0 to 2 on node1 to node3, each pid 4242; rank 1 stays in ``SLOW``; each agent says
    it dropped 3 events, node1's later 5 in all."""
    writer = RecordingWriter(path, source="attach node[1-3]:")
    for rank, host in enumerate(("node1", "node2", "node3")):
        writer.write(process_message(pid=PID, start_time=1, host=host))
        writer.write({**agent_hello(pid=PID), "rank": rank})
        lowering = Lowering(1, "gemm", 1_000_000, slow={SLOW: 10**12} if rank == 1 else None)
        for msg in lowering.messages(until_ns=50_000_000_000) if rank == 1 else lowering.messages():
            writer.write(msg)
        writer.write(m.heartbeat(t_ns=2_000_000_000, produced=100, dropped=3, open_passes=0))
    writer.write(process_message(pid=PID, start_time=1, host="node1"))
    writer.write(m.heartbeat(t_ns=41_000_000_000, produced=200, dropped=5, open_passes=0))
    writer.close("done")


def test_each_hosts_process_is_kept_apart_in_the_recording_and_in_dump(tmp_path: Path) -> None:
    path = tmp_path / "job.msgpack"
    write_job(path)
    messages, info = read_recording(path)
    assert info.ended
    (end,) = [msg for msg in messages if msg["type"] == m.END]
    assert end["dropped"] == 5 + 3 + 3  # each process's running total, not one pid's
    result = run_iket("dump", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (incomplete,) = [line for line in lines if " pass_incomplete " in line]
    assert SLOW in incomplete and f"pid={PID} host=node2" in incomplete
    (behind,) = [line for line in lines if " pass_behind " in line]
    assert f'summary="node2/rank 1 has been in `{SLOW}` 41.0 s; the other ranks finished it in ' in behind
