"""One real target compiling real TileLang kernels under IKET_TUI=1, watched by two clients.

The target (``targets/compiles.py``) lowers an elementwise add whose layout inference is held
at a gate, a good GEMM, a kernel that fails in ``tl.LayoutInference``, an add whose lowering
fails in a pass outside TileLang's pass pipeline, and compiles an add whose generated CUDA
nvcc rejects. A first client attaches before anything happens; a second
attaches while the held pass runs, with a backlog of a single event.

What the agent captures of a failure for a reproducer must fit in a message a reader accepts:
that is checked here too, on a source too long for one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_wire import WireClient, events, of_type, socket_of, spawn_target

from iket_tui.agent import capture
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import MessageDecoder, encode_message
from iket_tui.protocol.messages import Message

pytestmark = pytest.mark.tilelang

SLOW_PASS = "iket_test.SlowLayoutInference"


@dataclass
class Scenario:
    first: list[Message]
    late: list[Message]
    late_catch_up: list[Message]
    late_sync: Message
    held_start: Message
    beat_while_held: Message
    gate_opened_at: int
    returncode: int
    stdout: str
    socket_path: Path


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    gate = tmp_path_factory.mktemp("gate") / "open"
    proc = spawn_target(
        "compiles.py",
        env={"IKET_TUI_WAIT_CLIENT": "120", "IKET_TEST_GATE": str(gate), "IKET_TUI_BACKLOG": "1"},
    )
    try:
        path = socket_of(proc)
        first = WireClient(path)
        first.catch_up()
        held = first.read_until(lambda msg: msg["type"] == m.PASS_START and msg["name"] == SLOW_PASS)
        # The held pass runs the real layout inference inside it, then waits at the gate.
        first.read_until(lambda msg: msg["type"] == m.PASS_END and msg["parent"] == held["seq"])
        beat = first.read_until(lambda msg: msg["type"] == m.HEARTBEAT)
        late = WireClient(path)
        late_catch_up, late_sync = late.catch_up()
        opened_at = len(first.received)
        gate.touch()
        first.read_to_end()
        late.read_to_end()
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Scenario(
        first=first.received,
        late=late.received,
        late_catch_up=late_catch_up,
        late_sync=late_sync,
        held_start=held,
        beat_while_held=beat,
        gate_opened_at=opened_at,
        returncode=proc.returncode,
        stdout=stdout,
        socket_path=path,
    )


HELD, GEMM, CONFLICT, REFUSED, NVCC = range(5)


def compiles(msgs: list[Message]) -> list[list[Message]]:
    """Each compile's events, in the order the compiles began."""
    by_compile: dict[int, list[Message]] = defaultdict(list)
    for msg in events(msgs):
        by_compile[msg["compile"]].append(msg)
    return [by_compile[begin["compile"]] for begin in of_type(msgs, m.COMPILE_BEGIN)]


def test_every_compile_is_seen_with_its_kernel_label_and_target(scenario: Scenario) -> None:
    begins = of_type(scenario.first, m.COMPILE_BEGIN)
    assert [(b["kernel"], b["label"], b["target"]) for b in begins] == [
        ("add", "lower", "cuda sm_90a"),
        ("gemm", "lower", "cuda sm_90a"),
        ("layout_conflict", "lower", "cuda sm_90a"),
        ("add", "lower", "cuda sm_90a"),
        ("add", "stage=jit-lower, kernel=add, backend=tvm_ffi", "cuda sm_90a"),
    ]
    assert [e["ok"] for e in of_type(scenario.first, m.COMPILE_END)] == [True, True, False, False, False]
    assert scenario.returncode == 0
    assert "compiles done" in scenario.stdout


def test_passes_nest_by_parent_and_depth_and_finish_innermost_first(scenario: Scenario) -> None:
    stacks: dict[tuple[int, int], list[Message]] = defaultdict(list)
    last_seq: dict[int, int] = {}
    for msg in events(scenario.first):
        if msg["type"] not in m.PASS_EVENTS:
            continue
        stack = stacks[(msg["compile"], msg["context"])]
        if msg["type"] == m.PASS_START:
            assert msg["seq"] > last_seq.get(msg["compile"], -1), "sequence numbers grow within a compile"
            last_seq[msg["compile"]] = msg["seq"]
            assert msg["depth"] == len(stack)
            assert msg["parent"] == (stack[-1]["seq"] if stack else None)
            stack.append(msg)
        else:
            assert stack, f"{msg['name']} ended without having started"
            opened = stack.pop()
            assert (opened["seq"], opened["name"], opened["depth"]) == (msg["seq"], msg["name"], msg["depth"])
    assert not any(stacks.values()), "every pass that started ended, or was reported incomplete"
    phases = {msg["phase"] for msg in of_type(scenario.first, m.PASS_START)}
    assert "pipeline_cuda" in phases


def test_a_good_kernel_runs_every_pass_to_its_end(scenario: Scenario) -> None:
    gemm = compiles(scenario.first)[GEMM]
    starts = of_type(gemm, m.PASS_START)
    ends = of_type(gemm, m.PASS_END)
    assert 60 <= len(starts) <= 130
    assert sorted(s["seq"] for s in starts) == sorted(e["seq"] for e in ends)
    assert not of_type(gemm, m.PASS_INCOMPLETE)
    assert all(e["duration_ns"] >= 0 for e in ends)
    assert len({s["name"] for s in starts}) >= 40
    assert "tl.LayoutInference" in {s["name"] for s in starts}
    codegen = of_type(gemm, m.CODEGEN_END)
    assert [c["ok"] for c in codegen] == [True]
    assert gemm[0]["type"] == m.COMPILE_BEGIN and gemm[1]["type"] == m.PASS_CONTEXT_ENTER
    assert [msg["type"] for msg in gemm[-2:]] == [m.PASS_CONTEXT_EXIT, m.COMPILE_END]


def test_failing_pass_is_incomplete_with_the_compilers_error(scenario: Scenario) -> None:
    failing = compiles(scenario.first)[CONFLICT]
    incomplete = of_type(failing, m.PASS_INCOMPLETE)
    assert [p["name"] for p in incomplete] == ["tl.LayoutInference"]
    assert incomplete[0]["error"].startswith("InternalError: Layout infer conflict")
    assert not of_type(failing, m.PASS_END, seq=incomplete[0]["seq"])
    end = failing[-1]
    assert end["type"] == m.COMPILE_END
    assert end["ok"] is False
    assert end["stage"] == "pass"
    assert end["error_type"] == "tvm.error.InternalError"
    assert end["error"] == incomplete[0]["error"]
    assert end["traceback"].startswith("Traceback (most recent call last):")
    assert "Layout infer conflict" in end["traceback"]
    assert "compiles.py" in end["traceback"], "the traceback shows the program line that started the compile"


def test_pass_failing_outside_the_pipeline_is_told_its_error_before_its_context_exits(scenario: Scenario) -> None:
    refused = compiles(scenario.first)[REFUSED]
    kinds = [m.PASS_INCOMPLETE, m.PASS_CONTEXT_EXIT, m.COMPILE_FAILURE, m.COMPILE_END]
    assert [msg["type"] for msg in refused[-4:]] == kinds
    incomplete, _, captured, end = refused[-4:]
    assert incomplete["name"] == "iket_test.RefusingLowerIntrin"
    # The agent kept the module the user's pass was given; repro says it cannot rebuild such a pass.
    assert (captured["name"], captured["seq"]) == (incomplete["name"], incomplete["seq"])
    assert captured["ir_script"].startswith("# from tvm.script import ir as I") and captured["ir_json"]
    assert incomplete["error"] == "ValueError: iket test: this pass refuses the module"
    assert of_type(refused, m.PASS_START, seq=incomplete["seq"])
    assert (end["ok"], end["stage"], end["error_type"], end["error"]) == (
        False,
        "pass",
        "ValueError",
        incomplete["error"],
    )
    assert not of_type(refused, m.CODEGEN_BEGIN)


def test_codegen_failure_carries_nvccs_diagnostics(scenario: Scenario) -> None:
    jit = compiles(scenario.first)[NVCC]
    codegen = of_type(jit, m.CODEGEN_END)
    assert [(c["name"], c["ok"]) for c in codegen] == [("target.build.tilelang_cuda", False)]
    assert "this is not cuda" in codegen[0]["error"]
    assert "error" in codegen[0]["error"].split("Compilation error:", 1)[1]
    assert 'extern "C" __global__' not in codegen[0]["error"], "the echoed source is left out"
    end = jit[-1]
    assert (end["ok"], end["stage"], end["error_type"]) == (False, "codegen", "RuntimeError")
    assert end["error"].startswith("RuntimeError: Compilation error:")
    assert len(of_type(jit, m.PASS_START)) == len(of_type(jit, m.PASS_END)) >= 60


def test_codegen_failure_captures_the_source_nvcc_was_given_and_what_it_said(scenario: Scenario) -> None:
    from tilelang import env

    jit = compiles(scenario.first)[NVCC]
    (codegen,) = of_type(jit, m.CODEGEN_END)
    failure, end = jit[-2:]
    assert (failure["type"], end["type"]) == (m.COMPILE_FAILURE, m.COMPILE_END)
    assert (failure["stage"], failure["seq"], failure["name"]) == ("codegen", None, "target.build.tilelang_cuda")
    assert (failure["error"], failure["error_type"]) == (end["error"], end["error_type"])
    # The source as nvcc got it: after the post-processing callback that spoiled it.
    assert 'extern "C" __global__' in failure["source"]
    assert failure["source"].endswith("\nthis is not cuda;\n")
    assert failure["source_missing"] is None
    output = failure["compiler_output"]
    assert "this is not cuda" in output and "error" in output
    assert 'extern "C" __global__' not in output and "Command: " not in output
    assert f"Compilation error:\n{output}\nCommand: " in codegen["error"]
    assert (failure["nvcc_format"], failure["nvcc_arch"]) == ("cubin", ["-arch=sm_90a"])
    assert failure["nvcc_options"][:3] == [
        "-std=c++20",
        f"-I{env.TILELANG_TEMPLATE_PATH}",
        f"-I{env.CUTLASS_INCLUDE_DIR}",
    ]
    assert failure["tilelang_paths"] == {
        "TILELANG_TEMPLATE_PATH": env.TILELANG_TEMPLATE_PATH,
        "CUTLASS_INCLUDE_DIR": env.CUTLASS_INCLUDE_DIR,
    }
    command = failure["nvcc_command"].split()
    assert command[0].endswith("nvcc") and "--cubin" in command and command[-1].endswith(".cu")
    assert '"arch":"sm_90a"' in failure["target"]


def test_a_source_too_long_for_a_message_is_cut_to_the_lines_that_fit() -> None:
    lines = 300_000
    source = "".join(f"// line {index:07d} \u00fc\n" for index in range(lines))
    assert len(source.encode()) > capture.MAX_TEXT_BYTES
    run = capture.NvccRun(
        code=source,
        target_format="cubin",
        arch=["-arch=sm_90a"],
        options=["-std=c++20"],
        output="kernel.cu(1): error: too long",
        command=None,
        tilelang_paths={},
    )
    fields = capture.failed_codegen(run)
    kept = fields["source"]
    assert source.startswith(kept) and kept.endswith("\n")
    assert capture.MAX_TEXT_BYTES - 20 < len(kept.encode()) <= capture.MAX_TEXT_BYTES
    assert fields["source_missing"] == (
        f"the source is {len(source.encode()):,} bytes, over {capture.MAX_TEXT_BYTES:,}: "
        f"only its first {kept.count(chr(10)):,} of {lines:,} lines are kept"
    )
    msg = m.compile_failure(
        compile=1,
        stage="codegen",
        seq=None,
        name="target.build.tilelang_cuda",
        error=None,
        error_type=None,
        t_ns=1,
        **fields,
    )
    decoder = MessageDecoder()
    decoder.feed(encode_message(msg))
    assert list(decoder) == [msg]


def test_held_pass_is_seen_running_before_it_finishes(scenario: Scenario) -> None:
    first = scenario.first
    held = scenario.held_start
    started_at = first.index(held)
    end = of_type(first, m.PASS_END, compile=held["compile"], seq=held["seq"])
    assert len(end) == 1
    assert started_at < scenario.gate_opened_at <= first.index(end[0])
    assert scenario.beat_while_held["open_passes"] >= 1
    inner = of_type(first, m.PASS_END, compile=held["compile"], name="tl.LayoutInference")
    assert [(p["depth"], p["parent"]) for p in inner] == [(1, held["seq"])]
    assert end[0]["duration_ns"] > inner[0]["duration_ns"]


def test_late_client_first_gets_the_open_passes_then_the_backlog_then_sync(scenario: Scenario) -> None:
    held = scenario.held_start
    begin = of_type(scenario.first, m.COMPILE_BEGIN)[0]
    enter = of_type(scenario.first, m.PASS_CONTEXT_ENTER)[0]
    inner_end = of_type(scenario.first, m.PASS_END, compile=held["compile"], name="tl.LayoutInference")[0]
    assert scenario.late_catch_up == [begin, enter, held, inner_end]
    produced_before = len(events(scenario.first[: scenario.gate_opened_at]))
    assert scenario.late_sync["backlog"] == 1
    assert scenario.late_sync["backlog_lost"] == produced_before - 1


def test_two_clients_receive_the_same_live_stream(scenario: Scenario) -> None:
    late_live = events(scenario.late[scenario.late.index(scenario.late_sync) :])
    first_live = events(scenario.first[scenario.gate_opened_at :])
    assert len(late_live) > 200
    assert late_live == first_live


def test_target_exit_says_bye_with_exact_totals_and_removes_the_socket(scenario: Scenario) -> None:
    for stream in (scenario.first, scenario.late):
        bye = stream[-1]
        assert bye["type"] == m.BYE
        assert bye["reason"] == "exit"
        assert bye["dropped"] == 0
        assert not of_type(stream, m.DROPPED)
    assert scenario.first[-1]["produced"] == len(events(scenario.first))
    assert scenario.late[-1]["produced"] == scenario.first[-1]["produced"]
    assert not scenario.socket_path.exists()
