"""Between two passes the compiler's thread only takes notes; a pass that runs long is still
seen while it runs, through the registry's held notes as each client's sender collects them."""

from __future__ import annotations

import threading
import time

import pytest

from iket_tui.agent.client_session import QUIET_NS
from iket_tui.agent.registry import Registry
from iket_tui.protocol import messages as m

pytestmark = pytest.mark.tilelang
pytest.importorskip("tilelang")

from iket_tui.agent import pass_notes, tilelang_tool  # noqa: E402
from iket_tui.demo import kernels  # noqa: E402

SLOW_S = 3.0


def test_a_long_pass_is_collected_while_it_runs_and_finishes_in_order() -> None:
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    tilelang_tool.register(registry)
    compiling = threading.Thread(target=kernels.lower, args=("slow_gemm",), kwargs={"slow_seconds": SLOW_S})
    try:
        compiling.start()
        seen: list[m.Message] = []
        running: m.Message | None = None
        deadline = time.monotonic() + 120
        while running is None and compiling.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
            registry.held_notes.collect(QUIET_NS)
            seen += [m.as_message(item) for item in client.take(100_000)]
            running = next(
                (msg for msg in seen if msg["type"] == m.PASS_START and msg["name"] == kernels.SLOWED_PASS), None
            )
        assert running is not None, "the slowed pass was collected while it ran"
        assert compiling.is_alive(), "and it was still running"
        ended = {msg["seq"] for msg in seen if msg["type"] == m.PASS_END}
        assert running["seq"] not in ended
        assert registry.open_passes >= 1
        compiling.join(timeout=120)
    finally:
        tilelang_tool.unregister()
    assert not registry.held_notes.waiting, "a finished compile holds nothing back"
    seen += [m.as_message(item) for item in client.take(100_000)]
    passes = [msg for msg in seen if msg["type"] in (m.PASS_START, m.PASS_END)]
    assert [msg["seq"] for msg in passes if msg["type"] == m.PASS_START] == sorted({msg["seq"] for msg in passes}), (
        "every pass started once, in order"
    )
    slow_end = next(msg for msg in passes if msg["type"] == m.PASS_END and msg["seq"] == running["seq"])
    assert slow_end["duration_ns"] >= SLOW_S * 1e9 * 0.9
    assert slow_end["t_ns"] - running["t_ns"] == slow_end["duration_ns"], "times are those of the callbacks"
    assert [msg["type"] for msg in seen][-1] == m.COMPILE_END
    assert registry.open_passes == 0 and registry.observer_errors == 0


def test_a_sender_leaves_a_busy_compile_its_notes_and_takes_those_of_a_quiet_one() -> None:
    import tvm

    from iket_tui.agent.tilelang_tool import CompileWatcher

    registry = Registry()
    client, _ = registry.attach(limit=1000)
    watcher = CompileWatcher(registry)
    instrument = watcher.create_pass_instrument()
    assert instrument is not None
    instrument.enter_pass_ctx()
    instrument.run_before_pass(None, tvm.transform.PassInfo(0, "tl.LayoutInference", []))

    def sent_types() -> list[str]:
        return [m.as_message(item)["type"] for item in client.take(1000)]

    assert sent_types() == [m.COMPILE_BEGIN, m.PASS_CONTEXT_ENTER], "the pass is noted, not yet an event"
    registry.held_notes.collect(quiet_ns=60 * 10**9)
    assert sent_types() == [], "its compiler was quiet for less than a minute"
    time.sleep(0.01)
    registry.held_notes.collect(quiet_ns=5 * 10**6)
    assert sent_types() == [m.PASS_START], "quiet for 5 ms: collected"
    instrument.exit_pass_ctx()
    watcher.finish(None)
    assert sent_types() == [m.PASS_INCOMPLETE, m.PASS_CONTEXT_EXIT, m.COMPILE_END]
    assert not registry.held_notes.waiting


def test_a_context_with_many_notes_turns_them_into_events_without_a_collect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pass_notes, "DRAIN_AT", 8)
    registry = Registry()
    client, _ = registry.attach(limit=100_000)
    tilelang_tool.register(registry)
    compiling = threading.Thread(target=kernels.lower, args=("slow_gemm",), kwargs={"slow_seconds": SLOW_S})
    try:
        compiling.start()
        seen: list[m.Message] = []
        ended: list[m.Message] = []
        deadline = time.monotonic() + 120
        while len(ended) < 8 and compiling.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
            seen += [m.as_message(item) for item in client.take(100_000)]
            ended = [msg for msg in seen if msg["type"] == m.PASS_END]
        assert len(ended) >= 8, "the compiler's thread made events of every 8 notes"
        assert kernels.SLOWED_PASS not in {msg["name"] for msg in ended}, "while the slowed pass still ran"
        compiling.join(timeout=120)
    finally:
        tilelang_tool.unregister()
    assert registry.observer_errors == 0
