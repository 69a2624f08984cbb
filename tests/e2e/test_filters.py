"""``--passes GLOB`` and ``--depth N`` from the command line to a real agent and back.

The flags parse into the filter a client sends in its hello (:mod:`iket_tui.cli.filters`); a
:class:`SocketSource` with that filter, recording, and another without one attach to the same
real target lowering TileLang kernels: the first is sent only the passes it asked for and told
how many it was left without, in its stream and in its recording; the second gets every pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from iket_tui import endpoints
from iket_tui.cli.filters import add_filter_arguments, filters_of
from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.sources.reading import read_recording
from iket_tui.sources.socket import SocketSource

TARGET = Path(__file__).parent / "targets" / "lowered_twice.py"
WAIT_S = 120.0


def parser() -> argparse.ArgumentParser:
    """The three commands that read a live agent, each with the filter flags."""
    parser = argparse.ArgumentParser(prog="iket-tui")
    commands = parser.add_subparsers(dest="command")
    for name in ("run", "attach", "record"):
        add_filter_arguments(commands.add_parser(name))
    return parser


@pytest.mark.parametrize("command", ["run", "attach", "record"])
def test_the_flags_become_the_filter_a_client_sends(command: str) -> None:
    args = parser().parse_args(
        [command, "--passes", "tl.*", "--depth", "0", "--passes", "*Simplify", "--passes", "tl.*"]
    )
    assert filters_of(args) == {"passes": ["tl.*", "*Simplify"], "depth": 0}
    assert filters_of(parser().parse_args([command])) == {}, "no flags: every pass, and no filter sent"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--depth", "-1"], "argument --depth: the depth must be 0 or more: '-1'"),
        (["--depth", "one"], "argument --depth: not a whole number: 'one'"),
        (["--passes", ""], "argument --passes: an empty glob matches no pass"),
        ([arg for n in range(65) for arg in ("--passes", f"p{n}")], "at most 64 different --passes globs"),
    ],
)
def test_a_bad_filter_is_a_one_line_usage_error(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["attach", *argv])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"iket-tui attach: error: {error}"


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv("IKET_TUI", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def read_until(
    batches: Iterator[SourceBatch], into: list[Message], done: Callable[[list[Message]], bool] | None = None
) -> None:
    """Take a source's ``batches`` into ``into`` (pass rows as maps) until ``done`` says so or,
    without ``done``, until the stream ends."""
    deadline = time.monotonic() + WAIT_S
    for batch in batches:
        into.extend(m.as_message(item) for item in batch.messages)
        assert batch.state is not SourceState.FAILED, batch.error
        if (done is not None and done(into)) or batch.state is SourceState.ENDED:
            return
        assert time.monotonic() < deadline, "the stream never got there"


def two_compiles_ended(msgs: list[Message]) -> bool:
    return len([msg for msg in msgs if msg["type"] == m.COMPILE_END]) == 2


@pytest.mark.tilelang
def test_a_filtered_client_gets_the_passes_it_asked_for_and_counts_the_rest(runtime_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": str(WAIT_S), "IKET_TEST_GATE": str(gate)}
    proc = subprocess.Popen([sys.executable, str(TARGET)], env=env, stdout=subprocess.PIPE, text=True)
    args = parser().parse_args(["record", "--passes", "tl.*", "--passes", "*Simplify", "--depth", "0"])
    recording = tmp_path / "filtered.msgpack"
    try:
        deadline = time.monotonic() + WAIT_S
        while (start := endpoints.process_start_time(proc.pid)) is None or not (
            path := endpoints.socket_path_for(proc.pid, start)
        ).exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the target never served"
            time.sleep(0.02)
        filtered = SocketSource(path, record_to=recording, filters=filters_of(args)).batches()
        everything = SocketSource(path).batches()
        seen: list[Message] = []
        read_until(filtered, seen, two_compiles_ended)
        seen_all: list[Message] = []
        read_until(everything, seen_all, two_compiles_ended)
        gate.touch()
        read_until(filtered, seen)
        read_until(everything, seen_all)
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def starts(msgs: list[Message]) -> list[Message]:
        return [msg for msg in msgs if msg["type"] == m.PASS_START]

    kept = [
        msg
        for msg in starts(seen_all)
        if msg["depth"] == 0 and (fnmatchcase(msg["name"], "tl.*") or fnmatchcase(msg["name"], "*Simplify"))
    ]
    assert 0 < len(kept) < len(starts(seen_all))
    assert [(msg["compile"], msg["seq"]) for msg in starts(seen)] == [(msg["compile"], msg["seq"]) for msg in kept]
    assert [msg for msg in seen if msg["type"] == m.COMPILE_BEGIN] == [
        msg for msg in seen_all if msg["type"] == m.COMPILE_BEGIN
    ]
    (bye,) = [msg for msg in seen if msg["type"] == m.BYE]
    assert bye["filtered_passes"] == len(starts(seen_all)) - len(kept)
    assert bye["filtered"] == 2 * bye["filtered_passes"], "every pass left out, its start and its end"
    assert all("filtered" not in msg for msg in seen_all if msg["type"] in (m.SYNC, m.HEARTBEAT, m.BYE)), (
        "the client that asked for every pass is told of no filter"
    )
    beats = [msg for msg in seen if msg["type"] == m.HEARTBEAT]
    assert all("filtered_passes" in beat for beat in beats)

    recorded, _info = read_recording(recording)
    flat = [m.as_message(item) for item in recorded]
    (hello,) = [msg for msg in flat if msg["type"] == m.HELLO]
    assert hello["role"] == "agent"
    assert starts(flat) == starts(seen), "the recording holds the filtered stream"
    assert [msg for msg in flat if msg["type"] == m.BYE][-1]["filtered_passes"] == bye["filtered_passes"]


@pytest.mark.tilelang
def test_record_takes_the_flags_from_the_command_line(runtime_dir: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, "IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": str(WAIT_S), "IKET_TEST_GATE": str(gate)}
    proc = subprocess.Popen([sys.executable, str(TARGET)], env=env, stdout=subprocess.PIPE, text=True)
    recording = tmp_path / "filtered.msgpack"
    try:
        deadline = time.monotonic() + WAIT_S
        while (start := endpoints.process_start_time(proc.pid)) is None or not (
            endpoints.socket_path_for(proc.pid, start)
        ).exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the target never served"
            time.sleep(0.02)
        recorder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iket_tui",
                "record",
                str(proc.pid),
                "--passes",
                "tl.*",
                "--depth",
                "0",
                "-o",
                str(recording),
            ],
            env={k: v for k, v in env.items() if k != "IKET_TUI"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not recording.exists() or not two_compiles_ended(read_recording(recording)[0]):
            assert time.monotonic() < deadline and recorder.poll() is None, "the recorder never saw both compiles"
            time.sleep(0.1)
        gate.touch()
        assert proc.wait(WAIT_S) == 0
        _out, err = recorder.communicate(timeout=WAIT_S)
        assert recorder.returncode == 0, err
    finally:
        for child in (proc,):
            if child.poll() is None:
                child.kill()
                child.wait()
    recorded, _info = read_recording(recording)
    starts = [msg for msg in recorded if msg["type"] == m.PASS_START]
    assert starts and all(msg["depth"] == 0 and msg["name"].startswith("tl.") for msg in starts)
    (bye,) = [msg for msg in recorded if msg["type"] == m.BYE]
    assert bye["filtered_passes"] > 0
