"""The processes a codegen step runs, from ``compile_process`` messages: rows below the step,
each under the process that started it, with CPU time and elapsed time, stuck as a pass is."""

from __future__ import annotations

from typing import Any

from iket_tui.model import timing
from iket_tui.model.nodes import DONE, FAILED, INCOMPLETE, RUNNING, CompilerProcessNode
from iket_tui.model.session import Session
from iket_tui.model.synthetic import agent_hello
from iket_tui.model.visible_rows import VisibleRows, ancestors, parent_of
from iket_tui.protocol import messages as m

S = 1_000_000_000
STEP = "target.build.tilelang_cuda"
NVCC = ["/usr/local/cuda/bin/nvcc", "--cubin", "-arch=sm_90a", "-o", "k.cubin", "k.cu"]
PTXAS = ["ptxas", "-arch=sm_90a", "-O3", "k.ptx"]


def seen(pid: int, ppid: int, name: str, argv: list[str], *, t: int, running: int, cpu: int, **more: Any) -> m.Message:
    fields: dict[str, Any] = {"state": m.COMPILER_RUNNING, "exit": None, **more}
    return m.compile_process(
        compile=1, step=STEP, pid=pid, ppid=ppid, name=name, argv=argv, running_ns=running, cpu_ns=cpu, t_ns=t, **fields
    )


def in_codegen(t0: int = 10 * S) -> list[m.Message]:
    return [
        agent_hello(),
        m.compile_begin(compile=1, label="stage=jit-lower, kernel=add", kernel="add", target="cuda sm_90a", t_ns=t0),
        m.codegen_begin(compile=1, t_ns=t0 + S, name=STEP),
    ]


def spinning(t0: int = 10 * S) -> list[m.Message]:
    """nvcc started 1.5 s into codegen; ptxas below it spins on the CPU."""
    return [
        *in_codegen(t0),
        seen(4240, 4200, "nvcc", NVCC, t=t0 + 2 * S, running=S // 2, cpu=10_000_000),
        seen(4243, 4240, "ptxas", PTXAS, t=t0 + 3 * S, running=S // 2, cpu=S // 2),
        seen(4243, 4240, "ptxas", PTXAS, t=t0 + 63 * S, running=60 * S + S // 2, cpu=60 * S),
    ]


def processes(session: Session) -> list[CompilerProcessNode]:
    (step,) = session.tree.compiles[0].codegen_steps
    return list(step.by_pid.values())


def test_the_processes_of_a_codegen_step_hang_below_it_each_under_its_parent() -> None:
    session = Session()
    session.apply(spinning())
    nvcc, ptxas = processes(session)
    step = session.tree.compiles[0].codegen_steps[0]
    assert step.process_roots == [nvcc] and nvcc.children == [ptxas]
    assert (ptxas.pid, ptxas.ppid, ptxas.name, ptxas.command) == (4243, 4240, "ptxas", "ptxas -arch=sm_90a -O3 k.ptx")
    assert ptxas.cpu_ns == 60 * S  # the latest CPU time told
    assert ptxas.start_ns == 12 * S + S // 2  # from its first event: seen at 13 s, running for 0.5 s
    assert timing.inclusive_ns(ptxas, 80 * S) == 80 * S - ptxas.start_ns  # elapsed, live
    assert [parent_of(ptxas, session.tree), parent_of(nvcc, session.tree)] == [nvcc, step]
    assert ancestors(ptxas) == [session.tree.compiles[0], step, nvcc]
    assert session.counters.malformed == session.counters.unknown == 0


def test_the_rows_show_them_below_the_step_and_collapse_with_it() -> None:
    session = Session()
    session.apply(spinning())
    rows = VisibleRows(session.tree)
    comp = session.tree.compiles[0]
    rows.set_expanded(comp, True)
    rows.refresh()
    shown = [(type(row.node).__name__, row.level, row.expandable) for row in (rows.row(i) for i in range(len(rows)))]
    assert shown[1:] == [
        ("CompileNode", 1, True),
        ("CodegenNode", 2, True),
        ("CompilerProcessNode", 3, True),
        ("CompilerProcessNode", 4, False),
    ]
    rows.set_expanded(comp.codegen_steps[0], False)
    rows.refresh()
    assert len(rows) == 3


def test_a_process_running_past_the_threshold_is_stuck_and_one_that_ended_is_not() -> None:
    session = Session(stuck_after_ns=30 * S)
    session.apply(spinning())
    tree = session.tree
    nvcc, ptxas = processes(session)
    now = 73 * S
    assert tree.stuck_processes(now) == [nvcc, ptxas]
    assert not tree.is_process_stuck(ptxas, ptxas.start_ns + 30 * S)  # at the threshold, not past it
    session.apply([seen(4243, 4240, "ptxas", PTXAS, t=74 * S, running=61 * S, cpu=61 * S, state=m.COMPILER_ENDED)])
    assert ptxas.status is DONE and ptxas.end_ns == 74 * S
    assert tree.stuck_processes(now + S) == [nvcc]


def test_a_process_that_usually_ends_quickly_is_not_stuck_before_the_threshold_and_is_after() -> None:
    session = Session(stuck_after_ns=5 * S)
    session.apply(in_codegen())
    session.apply([seen(7, 1, "ptxas", PTXAS, t=12 * S, running=S // 10, cpu=S // 10, state=m.COMPILER_ENDED)])
    session.apply([seen(8, 1, "ptxas", PTXAS, t=13 * S, running=S // 10, cpu=S // 10)])
    (_first, second) = processes(session)
    assert session.tree.process_typical.median("ptxas") == S // 10
    assert not session.tree.is_process_stuck(second, second.start_ns + 4 * S)
    assert session.tree.is_process_stuck(second, second.start_ns + 6 * S)


def test_how_a_process_ended_exit_status_left_running_or_cut_by_the_compile() -> None:
    session = Session()
    session.apply(in_codegen())
    session.apply(
        [
            seen(5, 1, "cicc", ["cicc"], t=12 * S, running=S, cpu=S, state=m.COMPILER_ENDED, exit=-9),
            seen(6, 1, "gcc", ["gcc"], t=12 * S, running=S, cpu=S, state=m.COMPILER_LEFT),
            seen(7, 1, "ptxas", PTXAS, t=12 * S, running=S, cpu=S),
        ]
    )
    cicc, gcc, ptxas = processes(session)
    assert (cicc.status, cicc.exit) == (FAILED, -9)
    assert gcc.status is INCOMPLETE and "no longer watched" in gcc.note
    assert ptxas.status is RUNNING
    session.apply([m.compile_end(compile=1, label="", t_ns=20 * S, duration_ns=10 * S, ok=False, stage="codegen")])
    assert ptxas.status is INCOMPLETE and ptxas.end_ns == 20 * S
    assert session.tree.running_processes() == []


def test_a_process_told_again_in_a_catch_up_is_one_row_and_a_reused_pid_is_another() -> None:
    session = Session()
    ended = seen(7, 1, "ptxas", PTXAS, t=12 * S, running=S, cpu=S, state=m.COMPILER_ENDED)
    session.apply([*in_codegen(), ended, ended])
    assert len(processes(session)) == 1
    session.apply([seen(7, 1, "ptxas", PTXAS, t=14 * S, running=S, cpu=S)])
    step = session.tree.compiles[0].codegen_steps[0]
    assert [node.status for node in step.process_roots] == [DONE, RUNNING]


def test_a_malformed_process_event_is_counted_and_changes_nothing() -> None:
    session = Session()
    session.apply(in_codegen())
    good = seen(7, 1, "ptxas", PTXAS, t=12 * S, running=S, cpu=S)
    bad = [
        {**good, "pid": "7"},
        {**good, "argv": "ptxas -O3"},
        {**good, "argv": ["ptxas", 3]},
        {**good, "state": "spinning"},
        {**good, "cpu_ns": -1},
        {**good, "exit": "9"},
        {key: value for key, value in good.items() if key != "running_ns"},
    ]
    session.apply(bad)
    assert session.counters.malformed == len(bad)
    assert processes(session) == []
