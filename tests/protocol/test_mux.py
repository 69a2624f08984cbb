"""The wire of ``bridge --all``: records of several agents' streams on channels of one stream."""

from __future__ import annotations

import pytest

from iket_tui.protocol import mux


def test_records_come_out_whole_and_in_order_however_the_bytes_are_cut() -> None:
    wire = (
        mux.encode_control(mux.AGENT, channel=1, pid=41, start_time=7)
        + mux.encode_record(1, b"hello from 41")
        + mux.encode_record(2, b"")
        + mux.encode_control(mux.AGENT_END, channel=1, code=0, reason="exited")
    )
    decoder = mux.MuxDecoder()
    records: list[tuple[int, bytes]] = []
    for i in range(len(wire)):  # one byte at a time
        decoder.feed(wire[i : i + 1])
        records.extend(decoder)
    assert [channel for channel, _ in records] == [mux.CONTROL, 1, 2, mux.CONTROL]
    assert mux.decode_control(records[0][1]) == {"type": mux.AGENT, "channel": 1, "pid": 41, "start_time": 7}
    assert records[1][1] == b"hello from 41"
    assert mux.decode_control(records[3][1])["reason"] == "exited"


def test_a_length_past_the_limit_or_a_control_record_that_is_no_message_is_refused() -> None:
    decoder = mux.MuxDecoder()
    decoder.feed(mux.RECORD.pack(3, mux.MAX_RECORD + 1))
    with pytest.raises(mux.MuxError, match="exceeds"):
        next(decoder)
    with pytest.raises(mux.MuxError, match="not a control message"):
        mux.decode_control(b"\x01\x02")
    with pytest.raises(mux.MuxError, match="exceeds"):
        mux.encode_record(1, bytes(mux.MAX_RECORD + 1))
