"""Compiles in TileLang's thread pools, watched by the agent: ``tilelang.par_compile`` and the autotuner.

The target (``targets/pools.py``) compiles four kernels for sm_90a at once on real TileLang and
nvcc, one of which fails; a client attached from its start sees four compiles, each with its own
passes, the failing one marked, and asks the agent for the IR of each compile while the program
waits: each answer is the module of that compile's own kernel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from agent_wire import TARGETS, WAIT_S, WireClient, events, of_type, socket_of

from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.messages import Message

pytestmark = pytest.mark.tilelang


@dataclass
class Pooled:
    """What a client saw of one run of the target, and the IR it was given for each compile."""

    received: list[Message]
    stdout: str
    directory: Path
    ir: dict[int, Message] = field(default_factory=dict)  # compile -> the answer for its first pass, before

    def compiles(self) -> dict[int, list[Message]]:
        """Each compile's events, by compile id, in the order the compiles began."""
        by_compile: dict[int, list[Message]] = defaultdict(list)
        for msg in events(self.received):
            if "compile" in msg:
                by_compile[msg["compile"]].append(msg)
        return {begin["compile"]: by_compile[begin["compile"]] for begin in of_type(self.received, m.COMPILE_BEGIN)}

    def result(self) -> dict[str, object]:
        line = next(line for line in self.stdout.splitlines() if line.startswith("{"))
        found: dict[str, object] = json.loads(line)
        return found


def run_pools(mode: str, directory: Path) -> Pooled:
    """``pools.py MODE`` with the agent and a client from its start, in ``directory`` (the autotuner
    writes its log file where it runs); the IR of every compile is asked for before it ends."""
    gate = directory / "gate"
    env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    env.update(
        {
            "IKET_TUI": "1",
            "IKET_TUI_WAIT_CLIENT": str(WAIT_S),
            "IKET_TEST_GATE": str(gate),
            "PYTHONPATH": str(TARGETS),
            "TILELANG_AUTO_TUNING_CPU_COUNTS": "4",  # as many compile workers as there are cores, up to 4
        }
    )
    proc = subprocess.Popen(
        [sys.executable, str(TARGETS / "pools.py"), mode],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = WireClient(socket_of(proc))
        ended: list[Message] = []
        while len(ended) < 4:
            ended.append(client.read_until(lambda msg: msg["type"] == m.COMPILE_END))
        answers = {}
        for end in ended:
            ask = m.request(id=end["compile"], what=m.WHAT_IR, compile=end["compile"], seq=0, which="before")
            client.sock.sendall(encode_message(ask))
            answers[end["compile"]] = client.read_until(lambda msg: msg["type"] == m.RESPONSE)
        gate.touch()
        received = client.read_to_end()
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    assert received[-1]["type"] == m.BYE and received[-1]["dropped"] == 0
    return Pooled(received, stdout, directory, answers)


def check_own_passes(compile_events: list[Message]) -> list[Message]:
    """Assert that one compile's passes are its own, whole and nested: numbered 0, 1, 2, ... in
    start order, each parent a pass of this compile still running, each pass ended or left
    incomplete once; returns its pass starts."""
    starts = of_type(compile_events, m.PASS_START)
    assert [msg["seq"] for msg in starts] == list(range(len(starts)))
    running: list[int] = []
    closed = set()
    for msg in compile_events:
        if msg["type"] == m.PASS_START:
            assert msg["parent"] == (running[-1] if running else None)
            assert msg["depth"] == len(running)
            running.append(msg["seq"])
        elif msg["type"] in (m.PASS_END, m.PASS_INCOMPLETE):
            assert msg["seq"] == running.pop(), "the innermost running pass ends first"
            closed.add(msg["seq"])
    assert not running
    assert closed == set(range(len(starts)))
    return starts


def overlapping(compiles: dict[int, list[Message]]) -> int:
    """How many pairs of compiles ran at the same time."""
    spans = [(msgs[0]["t_ns"], of_type(msgs, m.COMPILE_END)[0]["t_ns"]) for msgs in compiles.values()]
    return sum(1 for i, a in enumerate(spans) for b in spans[i + 1 :] if a[0] < b[1] and b[0] < a[1])


# tilelang.par_compile


@pytest.fixture(scope="module")
def par_compiled(tmp_path_factory: pytest.TempPathFactory) -> Pooled:
    return run_pools("par_compile", tmp_path_factory.mktemp("par"))


def test_par_compile_shows_four_compiles_each_with_its_own_passes(par_compiled: Pooled) -> None:
    compiles = par_compiled.compiles()
    assert len(compiles) == 4
    kernels = sorted(msgs[0]["kernel"] for msgs in compiles.values())
    assert kernels == ["add", "add", "add", "layout_conflict"]
    for msgs in compiles.values():
        assert msgs[0]["label"] == f"stage=jit-lower, kernel={msgs[0]['kernel']}, backend=tvm_ffi"
        check_own_passes(msgs)
    assert overlapping(compiles) >= 1, "the pool's workers compiled at the same time"
    assert par_compiled.result() == {"compiled": [True, True, False, True]}


def test_par_compile_marks_the_failing_compile_and_only_it(par_compiled: Pooled) -> None:
    for msgs in par_compiled.compiles().values():
        (end,) = of_type(msgs, m.COMPILE_END)
        if msgs[0]["kernel"] != "layout_conflict":
            assert (end["ok"], end["error"]) == (True, None)
            assert [c["ok"] for c in of_type(msgs, m.CODEGEN_END)] == [True, True]
            assert not of_type(msgs, m.PASS_INCOMPLETE) and not of_type(msgs, m.COMPILE_FAILURE)
            continue
        assert (end["ok"], end["stage"]) == (False, "pass")
        assert end["error"].startswith("InternalError: Layout infer conflict")
        (failure,) = of_type(msgs, m.COMPILE_FAILURE)
        (incomplete,) = of_type(msgs, m.PASS_INCOMPLETE)
        assert failure["name"] == incomplete["name"] == "tl.LayoutInference"
        assert failure["seq"] == incomplete["seq"] == check_own_passes(msgs)[-1]["seq"]
        assert "layout_conflict" in failure["ir_script"]


def test_par_compile_gives_each_compiles_own_ir_on_request(par_compiled: Pooled) -> None:
    sizes = {}
    for compile_id, msgs in par_compiled.compiles().items():
        answer = par_compiled.ir[compile_id]
        assert answer["ok"], answer["error"]
        first = of_type(msgs, m.PASS_START)[0]
        assert (answer["compile"], answer["seq"], answer["name"]) == (compile_id, 0, first["name"])
        text = answer["text"]
        assert f"def {msgs[0]['kernel']}(" in text
        if msgs[0]["kernel"] == "add":
            (size,) = set(re.findall(r"T\.match_buffer\(\w+, \((\d+),\)", text))
            sizes[compile_id] = int(size)
    assert sorted(sizes.values()) == [1024, 2048, 4096], "each add compile answers with its own module"


# The autotuner


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Pooled:
    return run_pools("autotune", tmp_path_factory.mktemp("tune"))


def tile_of(ir: str) -> dict[str, int]:
    """The tile a GEMM module was elaborated with, from its accumulator fragment's shape."""
    (found,) = re.findall(r"C_l = T\.\w+\(\((\d+), (\d+)\), scope=\"local\.fragment\"", ir)
    return {"block_M": int(found[0]), "block_N": int(found[1])}


def test_the_autotuner_shows_one_compile_per_candidate_each_with_its_own_passes(tuned: Pooled) -> None:
    compiles = tuned.compiles()
    assert len(compiles) == 4
    for msgs in compiles.values():
        assert msgs[0]["label"] == "stage=jit-lower, kernel=gemm, backend=tvm_ffi"
        check_own_passes(msgs)
    assert tuned.result() == {"best": {"block_M": 64, "block_N": 64}}, "the shortest source of the three that compiled"
    assert (tuned.directory / "autotuner.log").exists()


def test_the_autotuner_s_ir_names_each_candidate_and_the_failing_one_is_marked(tuned: Pooled) -> None:
    tiles = {}
    for compile_id, msgs in tuned.compiles().items():
        answer = tuned.ir[compile_id]
        assert answer["ok"], answer["error"]
        tile = tile_of(answer["text"])
        tiles[compile_id] = tile
        (end,) = of_type(msgs, m.COMPILE_END)
        if tile != {"block_M": 16, "block_N": 16}:
            assert end["ok"]
            continue
        assert (end["ok"], end["stage"]) == (False, "pass")
        (failure,) = of_type(msgs, m.COMPILE_FAILURE)
        assert "No valid warp partition for T.gemm: M=16, N=16" in failure["error"]
        assert failure["seq"] == check_own_passes(msgs)[-1]["seq"]
        assert tile_of(failure["ir_script"]) == tile, "the failure's module is that candidate's"
    assert sorted(tiles.values(), key=lambda t: (t["block_M"], t["block_N"])) == [
        {"block_M": 16, "block_N": 16},
        {"block_M": 64, "block_N": 64},
        {"block_M": 64, "block_N": 128},
        {"block_M": 128, "block_N": 64},
    ]
