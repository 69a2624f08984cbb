"""Replaying the recording of a real H200 run whose header frame is damaged: the UI shows the
run as the intact recording does, and its header says what the damage took."""

from __future__ import annotations

from pathlib import Path

from ui_driving import app_test, wait_until

from iket_tui.protocol.frames import HEADER
from iket_tui.protocol.recording import MAGIC
from iket_tui.sources.base import SourceState
from iket_tui.sources.replay import RecordingSource
from iket_tui.ui.app import IketApp

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
WIDE = (200, 48)


@app_test
async def test_the_header_says_the_recordings_header_was_damaged(tmp_path: Path) -> None:
    data = bytearray(EXAMPLE.read_bytes())
    header_frame = HEADER.size + HEADER.unpack_from(data, len(MAGIC))[0]
    data[len(MAGIC) + HEADER.size + 3] ^= 1
    path = tmp_path / "damaged.msgpack"
    path.write_bytes(bytes(data))
    app = IketApp(RecordingSource(path, speed=0.0))
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.source_state is SourceState.ENDED, "the replay to end")
        text = app.header.text()
        assert f"the recording's header was damaged: {header_frame} bytes skipped" in text
        assert "kernels: 126,720 ev" in text
        assert app.source_error is None and app.notes == [
            f"the recording's header was damaged: {header_frame} bytes skipped"
        ]
