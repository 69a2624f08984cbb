"""The kernels screen over several processes whose rings and modules share ids: a row per
launch naming its process, a title saying which processes trace kernels and what each read,
the stuck launch's summary beginning with its pid and rank, and each process's detail pane
with its own ring; the same from a recording."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernel_processes import ALL, HELD, two_processes
from textual.pilot import Pilot
from textual.widgets import DataTable
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock, batch

from iket_tui.model.session import Session
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import encode_message
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import SourceState
from iket_tui.ui.app import IketApp
from iket_tui.ui.details import describe
from iket_tui.ui.flame_view import FlameView
from iket_tui.ui.kernels_screen import KernelsScreen
from iket_tui.ui.running_warps import RunningWarps

WIDE = (160, 48)
SUMMARY = "pid 102 (rank 1): 1 of 64 blocks not finished: block (3,0), warps 4-7 last at `mma` (k_step 17), "


def two_process_app(clock: FrozenClock, *, both_wait: bool = False) -> IketApp:
    messages = two_processes(both_wait=both_wait)
    source = FakeSource([batch(messages, state=SourceState.LIVE)], stay_open=True, description="pids 101, 102")
    return IketApp(source, clock=clock, tick_s=0.05)


async def open_kernels(pilot: Pilot[int], app: IketApp) -> KernelsScreen:
    await pilot.press("K")
    await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), "the kernels screen")
    screen = app.screen
    assert isinstance(screen, KernelsScreen)
    return screen


def rows(screen: KernelsScreen) -> list[list[str]]:
    table = screen.query_one("#launches", DataTable)
    return [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]


def title(screen: KernelsScreen) -> str:
    return str(screen.query_one("#kernels-title").render())


@app_test
async def test_each_launch_row_names_its_process_and_the_stuck_one_is_named_with_its_pid() -> None:
    clock = FrozenClock()
    app = two_process_app(clock)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await open_kernels(pilot, app)
        columns = [str(column.label) for column in screen.query_one("#launches", DataTable).columns.values()]
        assert columns[:2] == ["process", "kernel"]
        found = rows(screen)
        assert [(row[0], row[1], row[6]) for row in found] == [
            ("pid 102 (rank 1)", "traced_gemm_kernel", f"{HELD:,}"),
            ("pid 101 (rank 0)", "traced_gemm_kernel", f"{ALL:,}"),
        ]
        assert found[0][4].startswith("running") and not found[1][4].startswith("running")
        # 160 columns hold the title up to its losses: what follows them, whole, is left out (the
        # running launch's cell says it is quiet).
        assert title(screen) == (
            "kernels of 2 processes, each with its ring on NVIDIA H200"
            f" · pid 101 (rank 0): 1 launch, {ALL:,} events · pid 102 (rank 1): 1 launch, {HELD:,} events"
            " · 0 lost"
        )
        clock.advance(12.0)
        running = screen.query_one(RunningWarps)
        await wait_until(pilot, lambda: bool(running.summary), "the unfinished warps")
        assert running.summary.startswith(SUMMARY)
        assert f"kernels of 2 processes: {ALL + HELD:,} ev, 1 launch with a warp quiet " in app.header.text()


@app_test
async def test_the_flame_view_follows_the_row_chosen_among_launches_alike_of_two_processes() -> None:
    app = two_process_app(FrozenClock(), both_wait=True)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for_batches(pilot, app, 1)
        screen = await open_kernels(pilot, app)
        flame = screen.query_one(FlameView)
        shown = flame.launch
        assert shown is not None and shown.process is not None and shown.process.pid == 102
        screen.query_one("#launches", DataTable).focus()
        await pilot.press("down")  # pid 101's launch: the same ids, records and version
        await pilot.pause()
        chosen = screen.selected
        assert chosen is not None and chosen.process is not None and chosen.process.pid == 101
        assert (chosen.key, chosen.version) == (shown.key, shown.version)
        assert flame.launch is chosen


@app_test
async def test_a_recording_of_two_processes_replays_with_their_launches_apart(tmp_path: Path) -> None:
    from iket_tui.sources.replay import RecordingSource

    header = m.recording(created_unix=0.0, software_version="test", source="pids 101, 102")
    path = tmp_path / "two.msgpack"
    path.write_bytes(MAGIC + b"".join(encode_message(msg) for msg in (header, *two_processes())))
    app = IketApp(RecordingSource(path, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.session.ended is not None, "the replay to end")
        screen = await open_kernels(pilot, app)
        await wait_until(pilot, lambda: len(rows(screen)) == 2, "both launches")
        assert [(row[0], row[6]) for row in rows(screen)] == [
            ("pid 102 (rank 1)", f"{HELD:,}"),
            ("pid 101 (rank 0)", f"{ALL:,}"),
        ]


def test_kernels_screen_of_two_processes(snap_compare: Callable[..., bool]) -> None:
    clock = FrozenClock()
    app = two_process_app(clock)

    async def quiet_for_a_while(pilot: Pilot[int]) -> None:
        await wait_for_batches(pilot, app, 1)
        screen = await open_kernels(pilot, app)
        clock.advance(12.35)
        running = screen.query_one(RunningWarps)
        await wait_until(pilot, lambda: bool(running.summary), "the unfinished warps")
        await pilot.pause()

    assert snap_compare(app, terminal_size=WIDE, run_before=quiet_for_a_while)


def test_the_detail_pane_of_each_process_says_what_its_own_ring_read() -> None:
    session = Session()
    session.apply(two_processes())
    first, second = session.tree.processes
    assert dict(describe(session, first, 0).fields)["kernel events read"] == f"{ALL:,}"
    assert dict(describe(session, second, 0).fields)["kernel events read"] == f"{HELD:,}"
    assert dict(describe(session, second, 0).fields)["kernel ring"] == "on NVIDIA H200"
