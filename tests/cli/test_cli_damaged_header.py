"""Every command that reads a recording agrees on one whose header frame is damaged: ``dump``
(each format, with ``--records``), ``export`` (each format), ``repro`` and ``serve replay``'s
check read everything else and say once, on stderr, how many bytes the header took with it;
a file where nothing decodes is one line that says how many bytes were skipped."""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, failed_compile_recording, run_iket

from iket_tui.protocol.frames import HEADER
from iket_tui.protocol.recording import MAGIC

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
needs_textual_serve = pytest.mark.skipif(
    importlib.util.find_spec("textual_serve") is None,
    reason="needs textual-serve: pip install -e '.[test]'",
)


def _header_frame(data: bytes) -> int:
    """The bytes of a recording's first frame (its header): length and checksum, then body."""
    (length, _crc) = HEADER.unpack_from(data, len(MAGIC))
    return HEADER.size + length


def _flip_header(recording: Path, out: Path) -> int:
    """``recording`` with one bit flipped inside its header frame's body, written to ``out``;
    the header frame's size."""
    data = bytearray(recording.read_bytes())
    data[len(MAGIC) + HEADER.size + 3] ^= 1
    out.write_bytes(bytes(data))
    return _header_frame(bytes(data))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The bundled H200 recording (a real one: passes, kernel batches) with its header damaged."""
    path = tmp_path_factory.mktemp("damaged") / "h200-demo.msgpack"
    return path, _flip_header(EXAMPLE, path)


def _note(size: int) -> str:
    return f"the recording's header was damaged: {size} bytes skipped"


@pytest.mark.parametrize("args", [(), ("--format", "jsonl"), ("--records",)], ids=["text", "jsonl", "records"])
def test_dump_reads_everything_but_the_header_and_says_so_once(
    damaged: tuple[Path, int], args: tuple[str, ...]
) -> None:
    path, size = damaged
    intact = run_iket("dump", str(EXAMPLE), *args)
    result = run_iket("dump", str(path), *args)
    assert result.returncode == 0, result.stderr
    lines, intact_lines = result.stdout.splitlines(), intact.stdout.splitlines()
    assert "recording" in intact_lines[0] and lines == intact_lines[1:]
    assert result.stderr.splitlines() == [f"iket-tui: {path}: {_note(size)}"] + [
        line.replace(str(EXAMPLE), str(path)) for line in intact.stderr.splitlines()
    ]
    if args == ("--format", "jsonl"):
        assert json.loads(lines[0])["type"] == "hello"


@pytest.mark.parametrize("fmt", ["chrome", "perfetto", "speedscope"])
def test_export_writes_what_the_intact_recording_gives(damaged: tuple[Path, int], fmt: str, tmp_path: Path) -> None:
    path, size = damaged
    ours, theirs = tmp_path / "damaged.out", tmp_path / "intact.out"
    intact = run_iket("export", str(EXAMPLE), "--format", fmt, "-o", str(theirs))
    result = run_iket("export", str(path), "--format", fmt, "-o", str(ours))
    assert result.returncode == 0, result.stderr
    [wrote] = intact.stderr.splitlines()
    assert result.stderr.splitlines() == [f"iket-tui: {path}: {_note(size)}", wrote.replace(str(theirs), str(ours))]
    assert ours.read_bytes() == theirs.read_bytes()  # both files are named h200-demo.msgpack


def test_repro_reads_past_a_damaged_header(tmp_path: Path) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    path = tmp_path / "damaged.msgpack"
    _flip_header(recording, path)
    result = run_iket("repro", str(path), "-o", str(tmp_path / "repro"))
    assert result.returncode == 0, result.stderr
    said, wrote = result.stderr.splitlines()  # the damage first, as dump and export say it
    assert said.startswith(f"iket-tui: {path}: the recording's header was damaged: ")
    assert f"wrote a reproducer of compile 2 (tl.LayoutInference) to {tmp_path / 'repro'}" in wrote
    assert (tmp_path / "repro" / "before.py").read_text() == "# from tvm.script import tir as T\n"


@needs_textual_serve
def test_serve_replays_check_accepts_a_damaged_header(damaged: tuple[Path, int]) -> None:
    """The check runs before serve listens: a port already taken is the error it gets to."""
    path, _ = damaged
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_iket("serve", "replay", str(path), "--port", str(port))
    assert_one_line_error(result, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize(
    "args",
    [
        ("dump",),
        ("dump", "--format", "jsonl"),
        ("dump", "--records"),
        ("export", "--format", "chrome", "-o", "-"),
        ("export", "--format", "perfetto", "-o", "-"),
        ("export", "--format", "speedscope", "-o", "-"),
        ("repro", "-o", "repro"),
        pytest.param(("serve", "replay"), marks=needs_textual_serve),
    ],
    ids=["dump", "jsonl", "records", "chrome", "perfetto", "speedscope", "repro", "serve"],
)
def test_a_recording_with_nothing_intact_says_how_many_bytes_it_skipped(tmp_path: Path, args: tuple[str, ...]) -> None:
    recording = failed_compile_recording(tmp_path / "failed.msgpack")
    data = bytearray(recording.read_bytes())
    pos = len(MAGIC)
    while pos < len(data):
        length = HEADER.unpack_from(data, pos)[0]
        data[pos + HEADER.size + 1] ^= 1
        pos += HEADER.size + length
    path = tmp_path / "ruined.msgpack"
    path.write_bytes(bytes(data))
    command, *options = args
    argv = (command, str(path), *options) if command != "serve" else ("serve", "replay", str(path))
    result = run_iket(*argv)
    assert_one_line_error(result, f"{path}: no intact frame in this recording: ", " damaged bytes skipped")
    assert result.stdout == ""
