"""SVG snapshots of a session of several processes: a launcher and four ranks, one failed, one
stuck in a pass the others got through, the header counting them and the detail pane comparing
the stuck pass across ranks (a frozen clock keeps them exact)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from ui_driving import wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp

Compare = Callable[..., bool]
LAUNCHER = 4000
SLOW = "tl.LayoutInference"


def hello(pid: int, ppid: int, rank: int | None) -> dict[str, Any]:
    msg = agent_hello(pid=pid, argv=("python", "train.py") if rank is not None else ("torchrun", "train.py"))
    msg["ppid"] = ppid
    if rank is not None:
        msg["rank"] = rank
    return msg


def four_ranks() -> list[dict[str, Any]]:
    """The launcher, then ranks 0 and 1 done, rank 2 failed in ``SLOW``, rank 3 in it for 41 s."""
    out: list[dict[str, Any]] = [m.process(pid=LAUNCHER, start_time=1), hello(LAUNCHER, 1, None)]
    for rank in range(4):
        pid = LAUNCHER + 1 + rank
        if rank == 2:
            messages = Lowering(1, "gemm", 1_000_000, fail_in=SLOW).messages()
        elif rank == 3:
            messages = Lowering(1, "gemm", 1_000_000, slow={SLOW: 10**12}).messages(until_ns=41_000_000_000)
            messages.append(m.heartbeat(t_ns=41_000_000_000, produced=60, dropped=0, open_passes=1))
        else:
            messages = Lowering(1, "gemm", 1_000_000).messages()
        out += [m.process(pid=pid, start_time=1), hello(pid, LAUNCHER, rank), *messages]
    return out


def test_four_ranks_under_their_launcher_one_stuck_behind_the_others(snap_compare: Compare) -> None:
    source = FakeSource([batch(four_ranks(), state=SourceState.LIVE)], description="pid 4000: torchrun", stay_open=True)
    app = IketApp(source, clock=FrozenClock(), stuck_after_s=1.0, follow=False, by_rank=True)

    async def select_the_stuck_pass(pilot: Pilot[int]) -> None:
        await wait_for_batches(pilot, app, 1)
        (stuck,) = app.pass_tree.stuck_passes(app.now_ns())
        app.rows.reveal(stuck)
        app.view.sync()
        line = app.rows.index_of(stuck)
        assert line is not None
        await pilot.press("home", *["down"] * line)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 48), run_before=select_the_stuck_pass)
