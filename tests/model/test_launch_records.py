"""A launch's record count is its events, however the drains cut its warps: the row that says a
warp ended, where the end came in a later drain than the warp's last event, is not an event
(it once made the same launch count one record more or less from run to run)."""

from __future__ import annotations

import numpy as np

from iket_tui.model.launches import Launch
from iket_tui.ring.layout import EVENT_DTYPE, EVENT_WARP_END, EVENT_WARP_ROW, KIND_MARK


def _events(times: list[int], *, warp_row: bool = False, ends: bool = False) -> np.ndarray:
    events = np.zeros(len(times), dtype=EVENT_DTYPE)
    events["t_ns"] = times
    events["event"] = 0 if warp_row else 1
    events["kind"] = KIND_MARK | (EVENT_WARP_ROW if warp_row else 0) | (EVENT_WARP_END if ends else 0)
    events["sm"] = 2
    return events


def test_the_row_of_a_warp_end_in_a_later_drain_is_not_counted_as_a_record() -> None:
    in_one = Launch((1, 1, 0, 0), "k", None, order=0)
    last = _events([10, 20, 30])
    last["kind"][-1] |= EVENT_WARP_END
    in_one.add(last)

    in_two = Launch((1, 1, 0, 0), "k", None, order=1)
    in_two.add(_events([10, 20, 30]))
    in_two.add(_events([40], warp_row=True, ends=True))

    assert in_one.records == in_two.records == 3
    assert not in_one.running and not in_two.running
    assert in_two.rows == 4  # the row is kept (it ends the warp), only not counted as an event
