"""Events per second, connection state and the agent clock, on a clock the test controls."""

from __future__ import annotations

from iket_tui.model.activity import Connection, StreamActivity
from iket_tui.model.clock import AgentClock


def test_rate_counts_events_over_the_last_seconds() -> None:
    activity = StreamActivity()
    for second in range(10):
        activity.record(100.0 + second, events=200, messages=201)

    assert activity.rate(109.0) == 200.0
    assert activity.rate(120.0) == 0.0
    assert activity.received == 2000


def test_the_rate_falls_to_zero_as_time_passes_without_events() -> None:
    activity = StreamActivity()
    activity.record(100.0, events=300, messages=300)

    assert [activity.rate(now) for now in (100.5, 102.0, 103.0, 104.0, 105.0, 200.0)] == [
        300.0,
        150.0,
        100.0,
        75.0,
        0.0,
        0.0,
    ]


def test_the_rate_is_zero_once_the_stream_ended() -> None:
    activity = StreamActivity()
    for second in range(10):
        activity.record(100.0 + second, events=73, messages=74)
    assert activity.rate(109.5) == 73.0

    activity.end()
    assert activity.rate(109.5) == 0.0
    assert activity.received == 730  # what arrived still counts


def test_connection_goes_from_live_to_quiet_to_silent_and_ends() -> None:
    activity = StreamActivity()
    assert activity.connection(0.0) is Connection.CONNECTING
    activity.record(10.0, events=5, messages=5)
    assert activity.connection(11.0) is Connection.LIVE
    activity.record(13.0, events=0, messages=1)  # a heartbeat
    assert activity.connection(14.0) is Connection.QUIET
    assert activity.connection(30.0) is Connection.SILENT
    assert activity.connection(30.0, ended=True) is Connection.ENDED
    assert activity.connection(30.0, failed=True) is Connection.FAILED


def test_agent_clock_runs_from_the_latest_message_and_never_backwards() -> None:
    clock = AgentClock()
    assert clock.now_ns(5.0) == 0
    clock.observe(1_000_000_000, local_s=50.0)
    assert clock.now_ns(50.5) == 1_500_000_000
    assert clock.now_ns(50.5, rate=4.0) == 3_000_000_000
    clock.observe(1_200_000_000, local_s=50.6)  # the message was older than the estimate
    assert clock.now_ns(50.6) == 3_000_000_000
    assert clock.now_ns(60.0, frozen=True) == 3_000_000_000
