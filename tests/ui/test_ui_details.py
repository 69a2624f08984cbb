"""What the detail pane says about compiles and passes (described without an app)."""

from __future__ import annotations

from iket_tui.agent.pass_filter import PassChoice, PassFilter
from iket_tui.model.session import Session
from iket_tui.model.synthetic import LAYOUT_CONFLICT, NVCC_REJECTED, Lowering, live_stream
from iket_tui.protocol import messages as m
from iket_tui.ui.details import describe

MS = 1_000_000


def test_a_failed_pass_shows_the_compile_error_and_full_traceback() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=4, kernel="add_transposed", start_ns=0, fail_in="tl.LayoutInference").messages())
    failing = tree.compiles[0].failing
    assert failing is not None

    details = describe(session, failing, session.last_t_ns)
    fields = dict(details.fields)
    assert details.title == "pass tl.LayoutInference"
    assert fields["status"] == "failed"
    assert fields["phase"] == "pipeline_cuda"
    assert (fields["seq"], fields["depth"], fields["parent"]) == ("23", "0", "none (top level)")
    assert fields["compile"] == "add_transposed (compile 4, context 1)"
    assert fields["duration"] == "26.9 ms"  # from its start to the failure
    assert details.error == LAYOUT_CONFLICT
    assert details.traceback is not None
    assert details.traceback.startswith("Traceback (most recent call last):")
    assert "tvm.error.InternalError: Layout infer conflict" in details.text()


def test_a_nested_pass_names_its_parent_and_start_in_the_compile() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="gemm", start_ns=0).messages())
    let_inline = next(node for node in tree.passes if node.name == "tl.LetInline")

    fields = dict(describe(session, let_inline, session.last_t_ns).fields)
    assert fields["parent"] == "tl.LowerTileOp (seq 25)"
    assert fields["depth"] == "1"
    assert fields["start"].endswith("into the compile")
    assert fields["usual"] == "154 µs (median of 1 runs)"


def test_a_failed_compile_shows_label_target_stage_and_error() -> None:
    session = Session()
    tree = session.tree
    session.apply(
        Lowering(compile=2, kernel="k", start_ns=0, codegen_ns=300 * MS, codegen_error=NVCC_REJECTED).messages()
    )

    details = describe(session, tree.compiles[0], session.last_t_ns)
    fields = dict(details.fields)
    assert fields["status"] == "failed"
    assert fields["label"] == "stage=jit-lower, kernel=k, backend=tvm_ffi"
    assert fields["target"] == "cuda -keys=cuda,gpu -arch=sm_90a"
    assert fields["stage"] == "codegen"
    assert details.error == NVCC_REJECTED


def test_a_failed_codegen_step_shows_the_compiler_error_and_traceback() -> None:
    session = Session()
    tree = session.tree
    session.apply(
        Lowering(compile=2, kernel="k", start_ns=0, codegen_ns=300 * MS, codegen_error=NVCC_REJECTED).messages()
    )
    comp = tree.compiles[0]
    [nvcc] = comp.codegen_steps

    details = describe(session, nvcc, session.last_t_ns)
    fields = dict(details.fields)
    assert details.title == "codegen tilelang_cuda"
    assert (fields["status"], fields["step"], fields["duration"]) == (
        "failed",
        "target.build.tilelang_cuda",
        "300 ms",
    )
    assert fields["compile"] == "k (compile 2)"
    assert details.error == NVCC_REJECTED
    assert details.traceback is not None and details.traceback.startswith("Traceback (most recent call last):")
    compile_fields = dict(describe(session, comp, session.last_t_ns).fields)
    assert compile_fields["failed in"] == "codegen tilelang_cuda"


def failing_in_let_inline() -> list[m.Message]:
    """A lowering failing in ``tl.LetInline`` (seq 26, inside ``tl.LowerTileOp``), with the
    ``compile_failure`` the agent sends just before its ``compile_end``."""
    stream = Lowering(compile=5, kernel="gemm", start_ns=0, fail_in="tl.LetInline").messages()
    failure = m.compile_failure(
        compile=5,
        stage="pass",
        seq=26,
        name="tl.LetInline",
        error=LAYOUT_CONFLICT,
        error_type="tvm.error.InternalError",
        t_ns=stream[-1]["t_ns"] - 1,
        ir_script="# from tvm.script import ir as I",
        ir_json="{}",
    )
    return [*stream[:-1], failure, stream[-1]]


def test_a_compile_failed_in_a_pass_the_filter_left_out_names_it_from_the_failure() -> None:
    session = Session()
    sent = PassFilter(PassChoice(depth=0)).apply(failing_in_let_inline())
    session.apply([item for item in sent if isinstance(item, dict)])
    comp = session.tree.compiles[0]

    fields = dict(describe(session, comp, session.last_t_ns).fields)
    assert fields["failed in"] == "tl.LetInline (seq 26, left out by the filter)"
    assert fields["captured"].startswith("the IR given to tl.LetInline ")
    lower = next(node for node in session.tree.passes if node.name == "tl.LowerTileOp")
    lower_fields = dict(describe(session, lower, session.last_t_ns).fields)
    assert lower_fields["status"] == "incomplete"
    assert "captured" not in lower_fields, "the capture is of the pass left out, not of this one"


def test_a_failing_pass_whose_events_were_lost_is_named_as_lost() -> None:
    session = Session()
    stream = failing_in_let_inline()
    lost = [msg for msg in stream if msg.get("name") == "tl.LetInline" and msg["type"] != m.COMPILE_FAILURE]
    assert [msg["type"] for msg in lost] == [m.PASS_START, m.PASS_INCOMPLETE]
    dropped = {"type": m.DROPPED, "count": 2, "total": 2, "t_ns": stream[-1]["t_ns"]}
    session.apply([msg for msg in stream if msg not in lost] + [dropped])
    comp = session.tree.compiles[0]

    fields = dict(describe(session, comp, session.last_t_ns).fields)
    assert fields["failed in"] == "tl.LetInline (seq 26, not received: events were lost)"


def test_a_compile_failed_in_a_pass_it_shows_names_that_pass() -> None:
    session = Session()
    session.apply(failing_in_let_inline())
    comp = session.tree.compiles[0]

    fields = dict(describe(session, comp, session.last_t_ns).fields)
    assert fields["failed in"] == "tl.LetInline (seq 26)"
    assert comp.failing is not None
    assert dict(describe(session, comp.failing, session.last_t_ns).fields)["captured"].startswith(
        "the IR given to tl.LetInline "
    )


def test_a_compile_accounts_for_the_time_of_every_codegen_step() -> None:
    session = Session()
    tree = session.tree
    session.apply(Lowering(compile=1, kernel="gemm", start_ns=0, codegen_ns=2_900 * MS).messages())
    comp = tree.compiles[0]

    fields = dict(describe(session, comp, session.last_t_ns).fields)
    assert fields["duration"] == "3.10 s"
    assert fields["codegen"] == "2.90 s in 2 steps"
    assert fields["self"] == "3.60 ms outside passes and codegen"


def test_a_stuck_pass_says_how_long_against_its_usual_time() -> None:
    session = Session(stuck_after_ns=30_000 * MS)
    tree = session.tree
    session.apply(live_stream(running_for_ns=45_000 * MS))
    layout = tree.running_passes()[0]

    fields = dict(describe(session, layout, session.last_t_ns).fields)
    assert fields["status"].startswith("STUCK: running 45.0 s, usually ")
    assert fields["duration"] == "45.0 s so far"


def test_the_process_shows_the_loss_counters() -> None:
    session = Session()
    tree = session.tree
    session.apply(live_stream(dropped=12))
    session.apply([{"type": "pass_start"}, {"type": "from_the_future"}])

    fields = dict(describe(session, tree.process, session.last_t_ns).fields)
    assert fields["command"] == "python kernels/demo.py"
    assert (fields["dropped"], fields["malformed messages"], fields["unknown messages"]) == ("12", "1", "1")
    assert fields["observer errors"] == "0"
    assert fields["compiles"] == "6 (1 failed)"


def test_the_process_of_a_traced_gpu_run_shows_its_ring_and_kernel_events() -> None:
    from pathlib import Path

    from iket_tui.sources.reading import read_recording

    messages, _ = read_recording(Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack")
    session = Session()
    tree = session.tree
    session.apply(messages)

    fields = dict(describe(session, tree.process, session.last_t_ns).fields)
    assert fields["kernel ring"] == "on NVIDIA H200, drained at 20 Hz"
    assert fields["traced kernels"] == "traced_gemm_kernel (1 module)"
    assert fields["kernel events read"] == "126,720"
    assert fields["kernel events lost"] == "0 in the ring, 0 torn"
    assert fields["kernel events missed"] == "0"
    assert session.kernels.headline() == "kernels: 126,720 ev"


def test_kernel_tracing_without_a_ring_says_why() -> None:
    session = Session()
    tree = session.tree
    session.apply(live_stream())
    session.apply([{"type": "kernel_tracing", "enabled": True, "device": None, "reason": "no CUDA device", "t_ns": 1}])

    fields = dict(describe(session, tree.process, session.last_t_ns).fields)
    assert fields["kernel ring"] == "none: no CUDA device"
    assert fields["traced kernels"] == "none yet (0 modules)"
    assert session.kernels.headline() == "kernels: no ring (no CUDA device)"
