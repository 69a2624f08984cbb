"""The IR screen on a module of 40,000 lines: real TVMScript (every module the demo GEMM's
lowering for sm_90a passes through, printed by TVM, repeated to 40,000 lines), shown, searched
and stepped through as a user does, in a 160x48 terminal:

- show: the IR view takes the text and paints every line on screen from a cold cache;
- search: ``/`` + Enter for a frequent name (``mbarrier``), every occurrence found, the first
  one scrolled to and the screen painted;
- next: ``n``, the screen painted;
- the baseline is what the screen did before: one ``rich`` ``Syntax`` of the whole text,
  rendered whole, as a ``Static`` in a scroll container does on every update.
"""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

from benchmarks.results import Figure, median

LINES = 40_000
TERM = "mbarrier"


def gemm_scripts() -> list[str]:
    """The TVMScript of every module that the demo GEMM's lowering passes through."""
    import tilelang
    from tilelang import tvm

    from iket_tui.demo import kernels

    scripts: list[str] = []

    @tvm.instrument.pass_instrument
    class Capture:
        def run_after_pass(self, mod: Any, info: Any) -> None:
            scripts.append(mod.script())

    tilelang.disable_cache()
    target = tvm.target.Target(dict(kernels.TARGET))
    with tvm.transform.PassContext(opt_level=3, instruments=[Capture()]), target:
        tilelang.lower(kernels.build("gemm"), target=target, enable_device_compile=False)
    return scripts


def big_module(lines: int = LINES) -> str:
    real = "\n".join(gemm_scripts()).splitlines()
    return "\n".join((real * (lines // len(real) + 1))[:lines]) + "\n"


def _paint(widget: Any) -> None:
    for y in range(widget.size.height):
        widget.render_line(y)


async def _measure(text: str, rounds: int = 5) -> dict[str, float]:
    from textual.app import App

    from iket_tui.ui.ir_text import IRText

    class Host(App[None]):
        def compose(self) -> Any:
            yield IRText()

    app = Host()
    figures: dict[str, list[float]] = {"show": [], "search": [], "next": []}
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.1)
        view = app.query_one(IRText)
        for _ in range(rounds):
            t0 = time.perf_counter()
            view.show(text, "python")
            _paint(view)
            figures["show"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            view.search(TERM)
            _paint(view)
            figures["search"].append(time.perf_counter() - t0)
            for _ in range(10):
                t0 = time.perf_counter()
                view.next_match()
                _paint(view)
                figures["next"].append(time.perf_counter() - t0)
        matches = len(view.matches or ())
    return {name: median(values) * 1000 for name, values in figures.items()} | {"matches": matches}


def whole_syntax_ms(text: str) -> float:
    from rich.console import Console
    from rich.syntax import Syntax

    console = Console(file=io.StringIO(), width=160)
    t0 = time.perf_counter()
    console.render_lines(Syntax(text, "python", line_numbers=True), console.options)
    return (time.perf_counter() - t0) * 1000


def run() -> list[Figure]:
    text = big_module()
    measured = asyncio.run(_measure(text))
    baseline = whole_syntax_ms(text)
    size = f"{LINES:,} lines, {len(text) / 1e6:.1f} MB of real TVMScript"
    return [
        Figure(
            "IR view: show a 40,000-line module",
            measured["show"],
            "ms",
            100.0,
            f"{size}, 160x48, every line on screen painted from a cold cache; the whole text as one "
            f"rich Syntax (the screen before): {baseline / 1000:.1f} s",
        ),
        Figure(
            "IR view: search it",
            measured["search"],
            "ms",
            100.0,
            f"{TERM!r}: {measured['matches']:,.0f} occurrences found, the first scrolled to, the screen painted",
        ),
        Figure("IR view: next match (n)", measured["next"], "ms", 16.0, "scrolled to and painted"),
    ]
