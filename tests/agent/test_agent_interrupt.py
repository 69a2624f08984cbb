"""The agent's signal on the main thread (pytest runs tests there): installed for the compile's
time on the highest real-time signal the program has not claimed, it interrupts a wait of the
main thread with its handler's exception, and the handler it replaced is back afterwards, also
when a signal sent was never delivered (the default disposition would end the process)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from iket_tui.agent.interrupt import MainThreadInterrupt


class Interrupted(Exception):
    pass


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum))


@pytest.fixture
def program_claims_sigrtmax() -> Iterator[list[int]]:
    seen: list[int] = []
    previous = signal.signal(signal.SIGRTMAX, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGRTMAX, previous)


def test_a_wait_of_the_main_thread_is_interrupted_and_the_handlers_are_as_before(
    program_claims_sigrtmax: list[int],
) -> None:
    interrupt = MainThreadInterrupt()
    chosen = signal.SIGRTMAX - 1
    before = signal.getsignal(chosen)
    assert before == signal.SIG_DFL
    assert interrupt.enter(_raise) and interrupt.signum == chosen, "SIGRTMAX is the program's"
    assert interrupt.enter(_raise) and interrupt.signum == chosen, "a nested compile changes nothing"
    threading.Timer(0.2, interrupt.interrupt).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        threading.Event().wait(30)
    assert time.monotonic() - started < 10
    interrupt.leave()
    assert signal.getsignal(chosen) is _raise, "the outer compile still runs"
    interrupt.leave()
    assert signal.getsignal(chosen) == before and interrupt.signum is None
    assert not interrupt.interrupt(), "nothing to interrupt outside compiles"
    signal.raise_signal(signal.SIGRTMAX)
    assert program_claims_sigrtmax == [signal.SIGRTMAX], "the program's own handler still runs"


def test_a_signal_sent_but_not_delivered_does_not_outlive_the_compile() -> None:
    interrupt = MainThreadInterrupt()
    assert interrupt.enter(_raise)
    signum = interrupt.signum
    assert signum is not None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signum})  # the main thread blocks it meanwhile
    try:
        assert interrupt.interrupt()
        assert signum in signal.sigpending()
        interrupt.leave()
        assert signum not in signal.sigpending()
        assert signal.getsignal(signum) == signal.SIG_DFL
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # were it still pending, this would end the tests


def test_a_thread_that_is_not_the_main_one_installs_nothing() -> None:
    interrupt = MainThreadInterrupt()
    entered: list[bool] = []
    thread = threading.Thread(target=lambda: entered.append(interrupt.enter(_raise)))
    thread.start()
    thread.join()
    assert entered == [False] and interrupt.signum is None
