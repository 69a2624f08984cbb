"""The header of a session of several processes: how many, live, ended and failed, and the pass
one of them is furthest behind the others in, with how many more are behind."""

from __future__ import annotations

from typing import Any

from ui_driving import app_test, wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp

LAUNCHER = 7000
SLOW = "tl.LayoutInference"


def ranks_two_behind() -> list[dict[str, Any]]:
    """Ranks 0 and 1 done; ranks 2 and 3 in ``SLOW``, rank 3 since 10 s earlier; the last
    message at 41 s."""
    out: list[dict[str, Any]] = [m.process(pid=LAUNCHER, start_time=1), agent_hello(pid=LAUNCHER)]
    for rank in range(4):
        pid = LAUNCHER + 1 + rank
        hello = {**agent_hello(pid=pid), "ppid": LAUNCHER, "rank": rank}
        start = {2: 10_001_000_000, 3: 1_000_000}.get(rank, 1_000_000)
        slow = {SLOW: 10**12} if rank >= 2 else None
        lowering = Lowering(1, "gemm", start, slow=slow)
        messages = lowering.messages(until_ns=41_000_000_000) if slow else lowering.messages()
        out += [m.process(pid=pid, start_time=1), hello, *messages]
    out.append(m.heartbeat(t_ns=41_000_000_000, produced=1, dropped=0, open_passes=1))
    return out


@app_test
async def test_the_header_names_the_rank_furthest_behind_and_counts_the_others() -> None:
    source = FakeSource([batch(ranks_two_behind(), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock(), stuck_after_s=1.0, by_rank=True)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for_batches(pilot, app, 1)
        app.refresh_views()
        header = app.header.text()
        assert "5 processes (4 ranks): 5 live" in header, header
        assert f"rank 3 has been in `{SLOW}` 41.0 s; 2 of the other 3 ranks finished it in" in header, header
        assert header.endswith("1 more behind"), header
