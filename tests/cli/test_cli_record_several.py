"""``iket-tui record PID PID``: several processes of this machine in one recording, each kept
apart, as ``attach PID PID`` records them; a target without one is one line."""

from __future__ import annotations

import re
from pathlib import Path

from cli_helpers import FakeAgent, assert_one_line_error, run_iket

from iket_tui.protocol import messages as m
from iket_tui.sources.reading import read_recording


def test_record_of_two_pids_keeps_each_process_apart_until_both_exit(tmp_path: Path) -> None:
    out = tmp_path / "two.msgpack"
    with FakeAgent("normal") as first, FakeAgent("normal") as second:
        result = run_iket("record", str(first.pid), str(second.pid), "-o", str(out))
    assert result.returncode == 0, result.stderr
    said = re.fullmatch(rf"recorded (\d+) messages from pids {first.pid}, {second.pid} to {out} in .*\n", result.stdout)
    assert said is not None, result.stdout
    assert result.stdout.rstrip().endswith("(every target exited)")
    msgs, info = read_recording(out)
    assert info.ended
    hellos = [msg["pid"] for msg in msgs if msg["type"] == m.HELLO]
    assert sorted(hellos) == sorted([first.pid, second.pid])
    assert int(said.group(1)) == len([msg for msg in msgs if msg["type"] not in (m.RECORDING, m.CHECKPOINT, m.END)])
    ended = {msg["pid"] for msg in msgs if msg["type"] == m.PROCESS and msg.get("state") == m.PROCESS_ENDED}
    assert ended == {first.pid, second.pid}  # each process's end said apart


def test_record_without_a_target_or_with_one_named_twice_is_one_line(tmp_path: Path) -> None:
    out = str(tmp_path / "none.msgpack")
    assert_one_line_error(run_iket("record", "-o", out), "record needs a TARGET")
    with FakeAgent("endless") as agent:
        assert_one_line_error(run_iket("record", str(agent.pid), str(agent.pid), "-o", out), "named twice")
