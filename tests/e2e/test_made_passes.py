"""A hang in a pass made the way programs make their passes, reproduced with real TileLang: one
program (targets/made_passes.py) lowers the demo's GEMM on eight threads, each stuck in a pass
made another way (a factory function, as TileLang's own; a factory in a module it imports; a
factory method; a factory over its arguments; a class decorated with ``module_pass``;
``module_pass(fn, ...)`` over a closure; a factory over a ``threading.Event``; a factory made by
a function). ``iket-tui repro
PID --stuck --compile N`` writes each one's reproducer, whose ``repro.py`` calls the factory again
with the arguments the program gave it, without running the program, and hangs the same way
(exit 3). Where an argument has no literal form, the reproducer says which, and how to give it;
where the factory is itself a function's local, it says that it cannot call it again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from live_target import WAIT_S, socket_of

from iket_tui.protocol import messages as m
from iket_tui.sources.requests import ask
from iket_tui.sources.socket import SocketSource

TARGETS = Path(__file__).parent / "targets"
PROGRAM = TARGETS / "made_passes.py"
ELSEWHERE = TARGETS / "made_elsewhere.py"
PASSES = 8
TIMEOUT_S = 3


@dataclass
class Program:
    pid: str
    compiles: dict[str, int]
    """The compile stuck in each pass, by the pass's name."""
    env: dict[str, str]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Program]:
    runtime = Path(tempfile.mkdtemp(prefix="ik"))  # short: socket paths are limited to 107 bytes
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))
    gate = tmp_path_factory.mktemp("made") / "gate"
    env = {**os.environ, "IKET_TUI": "1", "IKET_TEST_GATE": str(gate)}
    started = subprocess.Popen([sys.executable, PROGRAM.name], cwd=TARGETS, env=env, stdout=subprocess.PIPE, text=True)
    try:
        path = socket_of(started)  # type: ignore[arg-type]
        deadline = time.monotonic() + WAIT_S
        compiles: dict[str, int] = {}
        while len(compiles) < PASSES:
            assert time.monotonic() < deadline, f"the program's compiles never all hung: {compiles}"
            compiles = _stuck_passes(path)
            time.sleep(0.5)
        yield Program(str(started.pid), compiles, {**env, "IKET_TUI": ""})
    finally:
        started.kill()
        started.wait()
        patch.undo()
        shutil.rmtree(runtime, ignore_errors=True)


def _stuck_passes(path: Path) -> dict[str, int]:
    """The compiles whose running pass is one of the program's own, by the pass's name."""
    found: dict[str, int] = {}
    for compile_id in range(1, PASSES + 1):
        source = SocketSource(path)
        try:
            source.connect()
            answer = ask(source, m.WHAT_STUCK, compile=compile_id)
        finally:
            source.close_and_wait("done")
        if answer.get("ok") and str(answer["name"]).startswith("made."):
            found[answer["name"]] = compile_id
    return found


def _iket(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iket_tui", *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )


def _reproducer(program: Program, name: str, out: Path) -> str:
    """``iket-tui repro PID --stuck`` for the compile stuck in ``name``: what it said."""
    written = _iket(
        "repro", program.pid, "--stuck", "--compile", str(program.compiles[name]), "-o", str(out), env=program.env
    )
    assert written.stdout == "" and len(written.stderr.splitlines()) == 1, written.stderr
    assert written.returncode == (2 if name == "made.Event" else 0), written.stderr
    return written.stderr


def _repro_py(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python repro.py --timeout 3`` in a fresh process, elsewhere, without the agent."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    return subprocess.run(
        [sys.executable, str(out / "repro.py"), "--timeout", str(TIMEOUT_S), *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=out,
        env=env,
    )


def _line(path: Path, comment: str) -> str:
    """The start of a traceback's line for the line of ``path`` that ends with ``comment``."""
    number = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.endswith(comment))
    return f'  File "{path}", line {number}, in '


SHAPES = {
    "made.Factory": ("stuck()", PROGRAM, "# the factory's pass waits forever", "p"),
    "made.Elsewhere": (
        "sleeper(seconds=600.0)",
        ELSEWHERE,
        "# the imported factory's pass sleeps as told",
        "sleep_elsewhere",
    ),
    "made.Method": (
        "Passes.sleeper(self=Passes(seconds=600.0, label='mine'), extra=0.5)",
        PROGRAM,
        "# the method's pass sleeps as its object says",
        "method_pass",
    ),
    "made.Closure": (
        "sleep_for(seconds=600.0, tag='a') (unread left to its default)",
        PROGRAM,
        "# the closure's pass sleeps as told",
        "sleeping",
    ),
    "made.Class": (
        "SleepingClass(seconds=600.0)",
        PROGRAM,
        "# the class's pass sleeps as it was made to",
        "transform_module",
    ),
    "made.Call": ("called(seconds=600.0)", PROGRAM, "# the called module_pass sleeps as told", "body"),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_pass_made_by_a_factory_is_made_again_and_hangs_again(program: Program, name: str, tmp_path: Path) -> None:
    call, path, comment, function = SHAPES[name]
    out = tmp_path / "repro"
    said = _reproducer(program, name, out)
    assert said.rstrip("\n").endswith(f"; it makes the pass as the program did, by {call}"), said

    ran = _repro_py(out)
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == f"still running after {TIMEOUT_S} s: reproduced", ran.stdout[:2000]
    assert f"{_line(path, comment)}{function}" in lines, ran.stdout[-2000:]
    assert "the program runs" not in ran.stdout + ran.stderr


def test_an_argument_without_a_literal_form_is_named_and_given_on_the_command_line(
    program: Program, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    said = _reproducer(program, "made.Event", out)
    assert said.rstrip("\n").endswith(
        "; it makes the pass as the program did, by waiting_on(event=?), but event could not be captured "
        "(event: a threading.Event has no literal form): it needs --arg event=EXPR"
    ), said

    ran = _repro_py(out)
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        "repro: waiting_on(event=?) made the pass, and event was not captured (event: a threading.Event has no "
        "literal form): give it with --arg event=EXPR, EXPR a Python expression among the names of made_passes.py\n"
    )

    ran = _repro_py(out, "--arg", "event=threading.Event()")
    assert ran.returncode == 3, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == f"still running after {TIMEOUT_S} s: reproduced"
    assert f"{_line(PROGRAM, '# waits for an event nobody sets')}wait_for_event" in lines

    bad = _repro_py(out, "--arg", "event")
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1] == (
        "repro.py: error: --arg takes NAME=EXPR, a Python expression, not 'event'"
    )


def test_a_factory_made_inside_a_function_is_said_to_be_out_of_reach(program: Program, tmp_path: Path) -> None:
    out = tmp_path / "repro"
    said = _reproducer(program, "made.Nested", out)
    assert said.rstrip("\n").endswith(
        "; it may not make the pass again as the program did: it is made inside outer.<locals>.inner, which is "
        "itself a function's local"
    ), said
    ran = _repro_py(out)
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        f"repro: {PROGRAM} defines no pass named made.Nested, and outer.<locals>.inner.<locals>.nested, which runs "
        "it, cannot be made again: it is made inside outer.<locals>.inner, which is itself a function's local\n"
    )
