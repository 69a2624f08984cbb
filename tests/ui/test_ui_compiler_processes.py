"""A compile stuck in its compiler, on screen: the codegen step's processes as rows below it
(pid, CPU time, how long each runs), the one running past the threshold marked stuck in its
row and in the header, what the detail pane says of it, and the stacks pane naming them."""

from __future__ import annotations

from ui_driving import app_test, screen_lines, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.nodes import CompilerProcessNode
from iket_tui.model.synthetic import agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.base import Answer, SourceBatch, SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.detail_pane import DetailPane
from iket_tui.ui.header_bar import HeaderBar
from iket_tui.ui.stacks_screen import StacksScreen

S = 1_000_000_000
STEP = "target.build.tilelang_cuda"


def process(pid: int, ppid: int, name: str, *, t: int, running: int, cpu: int) -> m.Message:
    return m.compile_process(
        compile=1,
        step=STEP,
        pid=pid,
        ppid=ppid,
        name=name,
        argv=[f"/usr/local/cuda/bin/{name}", "-arch=sm_90a", f"/tmp/k.{name}"],
        state=m.COMPILER_RUNNING,
        running_ns=running,
        cpu_ns=cpu,
        exit=None,
        t_ns=t,
    )


def stuck_in_ptxas() -> list[m.Message]:
    return [
        agent_hello(),
        m.compile_begin(compile=1, label="stage=jit-lower, kernel=add", kernel="add", target="cuda sm_90a", t_ns=S),
        m.codegen_begin(compile=1, t_ns=2 * S, name=STEP),
        process(4240, 4200, "nvcc", t=3 * S, running=S // 2, cpu=20_000_000),
        process(4243, 4240, "ptxas", t=64 * S, running=61 * S, cpu=60_200_000_000),
    ]


@app_test
async def test_the_processes_of_a_codegen_step_are_rows_below_it_and_the_spinning_one_is_stuck() -> None:
    source = FakeSource([batch(stuck_in_ptxas(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock(), stuck_after_s=30)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for_batches(pilot, app, 1)
        lines = screen_lines(app)
        step = next(line for line in lines if "codegen tilelang_cuda" in line)
        nvcc = next(line for line in lines if " nvcc " in line)
        ptxas = next(line for line in lines if " ptxas " in line)
        assert step.lstrip().startswith("▼ ● codegen tilelang_cuda")
        assert nvcc.index("nvcc") > step.index("codegen")  # below the step, and ptxas below nvcc
        assert ptxas.index("ptxas") > nvcc.index("nvcc")
        assert "! ptxas pid 4243  cpu 1m 00s" in ptxas and ptxas.split()[-3:] == ["stuck", "1m", "01s"]
        assert "! nvcc pid 4240  cpu 20.0 ms" in nvcc and "stuck" in nvcc  # it too runs past 30 s

        header = app.query_one(HeaderBar).text()  # nvcc is stuck as long, waiting on ptxas: ptxas is named
        assert "2 stuck, longest ptxas pid 4243 1m 01s" in header

        ptxas_node = next(node for node in app.pass_tree.running_processes() if node.name == "ptxas")
        assert isinstance(ptxas_node, CompilerProcessNode)
        app.following = False
        app.view.select(ptxas_node, by_user=True)
        pane = app.query_one(DetailPane)
        await wait_until(pilot, lambda: pane.details is not None and "ptxas" in pane.details.title, "its details")
        shown = pane.details
        assert shown is not None
        text = shown.text()
        assert text.startswith("process ptxas (pid 4243)\nstatus: STUCK: running 1m 01s, longer than 30.0 s")
        assert "command: /usr/local/cuda/bin/ptxas -arch=sm_90a /tmp/k.ptxas" in text
        assert "started by: nvcc (pid 4240)" in text
        assert "cpu: 1m 00s (as of +1m 01s)" in text
        assert shown.alarming


class AskableSource(FakeSource):
    """A live fake source whose compile sits in ptxas; it takes requests, answered as the test feeds."""

    def __init__(self) -> None:
        super().__init__([batch(stuck_in_ptxas(), state=SourceState.LIVE)], stay_open=True)

    def request(self, what: str, *, timeout_s: float, **fields: object) -> int:
        return 1


@app_test
async def test_the_stacks_pane_names_the_compiler_processes_above_the_threads() -> None:
    source = AskableSource()
    app = IketApp(source, clock=FrozenClock())  # type: ignore[arg-type]
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for_batches(pilot, app, 1)
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks pane")
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        running = [
            {"compile": 1, "step": STEP, "pid": 4240, "ppid": 4200, "name": "nvcc", "argv": ["nvcc", "-arch=sm_90a"]},
            {"compile": 1, "step": STEP, "pid": 4243, "ppid": 4240, "name": "ptxas", "argv": ["ptxas", "k.ptx"]},
        ]
        for process, cpu in zip(running, (20_000_000, 61 * S), strict=True):
            process.update(cpu_ns=cpu, running_ns=62 * S)
        thread = {"id": 1, "name": "MainThread", "main": True, "daemon": False, "agent": False, "cut": 0}
        frame = {"file": "subprocess.py", "line": 2100, "function": "_communicate", "code": "ready = selector.select()"}
        response = m.response(id=1, what=m.WHAT_STACKS, t_ns=0, ok=True, threads=[{**thread, "frames": [frame]}])
        response["processes"] = running
        source.feed(SourceBatch(messages=(response,), answers=(Answer(1, response=response),)))
        await wait_until(pilot, lambda: "ptxas" in screen.body_text(), "the answer")
        assert screen.body_text().splitlines()[:4] == [
            "Compiler processes of running codegen steps:",
            "  compile 1, codegen tilelang_cuda:",
            "    pid 4240  nvcc  (cpu 20.0 ms, running 1m 02s)  nvcc -arch=sm_90a",
            "      pid 4243  ptxas  (cpu 1m 01s, running 1m 02s)  ptxas k.ptx",
        ]
        assert "Thread MainThread (1, main):" in screen.body_text()
