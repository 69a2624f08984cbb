"""The header of a job across machines: a host whose ssh connection dropped is said first among
what is wrong, with how long it has been reconnecting, and goes from the header once it is back;
the tree names every rank by host and rank."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static
from ui_driving import app_test, tree_text, wait_for_batches
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.synthetic import Lowering, agent_hello
from iket_tui.sources.base import HostState, SourceBatch, SourceState
from iket_tui.sources.merged import process_message
from iket_tui.ui.app import IketApp

PID = 4242  # every host's rank has the same pid


def ranks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rank, host in enumerate(("node1", "node2", "node3")):
        hello = {**agent_hello(pid=PID), "rank": rank}
        out += [process_message(pid=PID, start_time=1, host=host), hello, *Lowering(1, "gemm", 1_000_000).messages()]
    return out


@app_test
async def test_a_lost_host_is_said_with_how_long_it_has_been_reconnecting_until_it_is_back() -> None:
    clock = FrozenClock()
    up = tuple(HostState(host) for host in ("node1", "node2", "node3"))
    lost = (up[0], up[1], HostState("node3", lost_at_s=clock.now - 2.0, why="Connection reset"))
    source = FakeSource([batch(ranks(), state=SourceState.LIVE), SourceBatch(hosts=lost)], stay_open=True)
    app = IketApp(source, clock=clock, by_rank=True)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for_batches(pilot, app, 2)
        app.refresh_views()
        header = app.header.shown_text()  # what the status line shows at its width
        assert "node3: lost, reconnecting (2 s)" in header, header
        assert header.index("node3: lost") < header.index("live"), header  # what is wrong comes first
        item = app.query_one("#header-hosts", Static)
        assert item.display and str(item.render()) == "node3: lost, reconnecting (2 s)"
        for rank, host in enumerate(("node1", "node2", "node3")):
            assert f"{host}/rank {rank}" in tree_text(app)
        clock.advance(5.0)
        app.refresh_views()
        assert "node3: lost, reconnecting (7 s)" in app.header.shown_text()
        source.feed(SourceBatch(hosts=up))
        await wait_for_batches(pilot, app, 3)
        app.refresh_views()
        assert "lost" not in app.header.shown_text(), app.header.shown_text()
        assert not app.query_one("#header-hosts", Static).display
