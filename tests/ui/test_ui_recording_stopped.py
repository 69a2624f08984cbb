"""A recording that stops while the UI watches (the disk filled up): the header says so and
why, and the live stream goes on. Once over a real agent process and a real full disk, once
over prepared batches for what the header shows next to other messages."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from full_disk import small_filesystem
from ui_driving import app_test, wait_for_batches, wait_until
from ui_fakes import FakeSource, FrozenClock

from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.sources.socket import SocketSource
from iket_tui.ui.app import IketApp
from iket_tui.ui.header_bar import HeaderBar

FAKE_AGENT = Path(__file__).resolve().parents[1] / "sources" / "fake_agent.py"
STOPPED = "recording stopped, the disk is full: /disk/run.msgpack was cut at byte 65470, after 603 messages"


def _fake_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ui_fake_agent", FAKE_AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory for an agent socket (their paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ik"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def header(app: IketApp) -> str:
    return app.query_one(HeaderBar).text()


@app_test
async def test_the_header_says_the_recording_stopped_and_the_stream_goes_on(tmp_path: Path, socket_dir: Path) -> None:
    with (
        small_filesystem(tmp_path) as disk,
        _fake_agent().FakeAgent("endless", socket_path=socket_dir / "a.sock") as agent,
    ):
        source = SocketSource(agent.path, record_to=disk / "live.msgpack")
        app = IketApp(source)
        async with app.run_test(size=(200, 40)) as pilot:
            await wait_until(pilot, lambda: "recording stopped" in header(app), "recording to stop", timeout=60)
            assert f"recording stopped, the disk is full: {disk / 'live.msgpack'} was cut at byte " in header(app)
            assert app.query_one("#header-message").has_class("-error")
            events = app.session.counters.events
            await wait_until(
                pilot, lambda: app.session.counters.events > events + 100, "events after the recording stopped"
            )
            assert app.source_state is SourceState.LIVE and app.source_error is None
            assert header(app).startswith("live  ") and "recording stopped, the disk is full" in header(app)
            app.close_source()  # what is still in flight is dropped by the app as it closes


@app_test
async def test_a_stopped_recording_stays_in_the_header_beside_later_notes_and_errors() -> None:
    hello = m.hello(role="agent", pid=4242, start_time=1, software_version="x", capabilities=[], t_ns=1)
    source = FakeSource([SourceBatch(messages=(hello,), state=SourceState.LIVE)], stay_open=True)
    app = IketApp(source, clock=FrozenClock())
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for_batches(pilot, app, 1)
        assert "recording stopped" not in header(app)
        source.feed(SourceBatch(recording_stopped=STOPPED))
        await wait_for_batches(pilot, app, 2)
        assert header(app).endswith(STOPPED)
        assert app.query_one("#header-message").has_class("-error")
        source.feed(SourceBatch(notes=("skipped 3 messages of types this iket-tui does not know (a newer agent?)",)))
        await wait_for_batches(pilot, app, 3)
        assert header(app).endswith(STOPPED)
        source.feed(SourceBatch(state=SourceState.FAILED, error="connection reset by the target"))
        source.finish()
        await wait_until(pilot, lambda: app.session.ended is not None, "the end of the stream")
        assert header(app).endswith(f"connection reset by the target  ·  {STOPPED}")
