"""``dump`` as text shows a time on the device's clock (a drain's ``device_now_ns``, an event's
``gpu_t_ns``) as an offset from the first such time shown, never as a duration of the absolute
clock, which reads ``498882h29m`` for every one of them."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_iket

from iket_tui.sources.reading import read_recording

WAITING = Path(__file__).resolve().parents[2] / "examples" / "h200-demo-waiting.msgpack"


def test_a_drains_device_time_is_an_offset_from_the_first_one_shown() -> None:
    messages, _ = read_recording(WAITING)
    nows = [msg["device_now_ns"] for msg in messages if type(msg.get("device_now_ns")) is int]
    assert len(nows) == 2
    text = run_iket("dump", str(WAITING))
    assert text.returncode == 0, text.stderr
    shown = [
        line.split(" device_now=", 1)[1].split(" ", 1)[0] for line in text.stdout.splitlines() if " device_now=" in line
    ]
    apart = nows[1] - nows[0]
    assert shown == ["+0.000000ms", f"+{apart // 1_000_000}.{apart % 1_000_000:06d}ms"]
