"""Jumping in a replay: the tree and the kernels a jump lands on are those a replay from the
start shows at that time, forwards, backwards and after the end, over real recordings (the
bundled H200 demo's: TileLang compiles, a failed one, traced kernel launches)."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from iket_tui.model.session import Session
from iket_tui.model.visible_rows import VisibleRows
from iket_tui.protocol import messages as m
from iket_tui.sources.base import SourceBatch, SourceState
from iket_tui.sources.checkpoints import ReplayCheckpoints
from iket_tui.sources.reading import RecordingReader
from iket_tui.sources.replay import RecordingSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = EXAMPLES / "h200-demo.msgpack"
WAITING = EXAMPLES / "h200-demo-waiting.msgpack"
WAIT_S = 60.0
_LEFT_OUT = frozenset({"version", "shape", "order", "parent", "context", "compile", "process", "children"})
"""Node fields that are links or counters of how often something changed, not what is shown."""


def _plain(node: object) -> tuple[Any, ...]:
    names = getattr(node, "__slots__", ()) or tuple(vars(node))
    fields = []
    for name in sorted(names):
        if name in _LEFT_OUT or not hasattr(node, name):
            continue
        value = getattr(node, name)
        if value is None or isinstance(value, (str, int, float, bool)):
            fields.append((name, value))
    return (type(node).__name__, *fields)


def _state(session: Session) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What the tree would show, every row expanded, and the kernel launches."""
    rows = VisibleRows(session.tree)
    rows.expand_all()
    rows.refresh()
    shown = []
    for index in range(len(rows)):
        row = rows.row(index)
        assert row is not None
        shown.append((row.level, row.expandable, *_plain(row.node)))
    launches = [_plain(launch) for launch in session.kernels.launches.values()]
    return shown, launches


def _t0(path: Path) -> int:
    return next(t for t in map(m.t_ns_of, RecordingReader(path, rows=True)) if t is not None and t > 0)


def _from_start(path: Path, t_ns: int) -> Session:
    """The model a replay from the start has built when its clock reaches ``t_ns``."""
    session = Session()
    items = []
    for item in RecordingReader(path, rows=True):
        t = m.t_ns_of(item)
        if t is not None and t > 0 and t > t_ns:
            break
        items.append(item)
    session.apply(items)
    return session


class _Replay:
    """A paused, seekable replay read on a worker thread as the UI reads it, its batches applied
    to a model that is built anew when a batch says the stream restarts."""

    def __init__(self, path: Path, checkpoints: ReplayCheckpoints | None = None) -> None:
        self.source = RecordingSource(path, start_paused=True, seekable=True)
        self.checkpoints = checkpoints
        self.resumed = 0
        self.session = Session()
        self.notes: list[str] = []
        self._batches: queue.Queue[SourceBatch] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for batch in self.source.batches():
            self._batches.put(batch)

    def jump(self, t_ns: int) -> None:
        here = self.source.position_t_ns
        self.source.seek(t_ns, None if self.checkpoints is None else self.checkpoints.start_for(t_ns, here))
        while True:
            batch = self._batches.get(timeout=WAIT_S)
            if batch.restart:
                self.session = Session() if batch.resumed_from is None else batch.resumed_from.session()
                self.resumed += batch.resumed_from is not None
                self.notes = []
            self.session.apply(batch.messages)
            self.notes += batch.notes
            if batch.jumped_to == t_ns:
                return

    def close(self) -> None:
        self.source.close()
        self._thread.join(WAIT_S)


@pytest.mark.parametrize("path", [DEMO, WAITING], ids=["demo", "waiting-kernel"])
def test_every_jump_lands_on_what_a_replay_from_the_start_shows_there(path: Path) -> None:
    t0 = _t0(path)
    replay = _Replay(path)
    try:
        # forwards, back into a compile, forwards past a failure, back to the start, past the end, back
        for seconds in (27.7, 5.4, 18.8, 0.5, 40.0, 10.1):
            t_ns = t0 + int(seconds * 1e9)
            replay.jump(t_ns)
            assert _state(replay.session) == _state(_from_start(path, t_ns)), seconds
    finally:
        replay.close()


@pytest.mark.parametrize("path", [DEMO, WAITING], ids=["demo", "waiting-kernel"])
def test_every_jump_from_a_checkpoint_lands_on_what_a_replay_from_the_start_shows_there(path: Path) -> None:
    checkpoints = ReplayCheckpoints(path, Session, every=40, chunk_size=4096)
    checkpoints.build()
    assert checkpoints.done and checkpoints.error is None and checkpoints.count > 5
    t0 = _t0(path)
    replay = _Replay(path, checkpoints)
    try:
        for seconds in (27.7, 5.4, 18.8, 19.0, 0.5, 40.0, 10.1, 29.4, 2.0):
            t_ns = t0 + int(seconds * 1e9)
            replay.jump(t_ns)
            assert _state(replay.session) == _state(_from_start(path, t_ns)), seconds
        assert replay.resumed >= 5  # most jumps read on from a checkpoint
    finally:
        replay.close()


def test_a_checkpoint_is_never_taken_for_a_time_before_what_it_holds() -> None:
    checkpoints = ReplayCheckpoints(DEMO, Session, every=40, chunk_size=4096)
    checkpoints.build()
    t0 = _t0(DEMO)
    assert checkpoints.before(t0 - 1) is None
    taken = 0
    for seconds in (0.5, 1.0, 9.0, 21.5, 40.0):
        point = checkpoints.before(t0 + int(seconds * 1e9))
        assert point is None or point.t_ns <= t0 + seconds * 1e9
        taken += point is not None
    assert taken >= 3
    point = checkpoints.before(t0 + 40 * 10**9)
    assert point is not None
    # a jump forwards short of the next checkpoint goes on from where the replay stands
    assert checkpoints.start_for(point.t_ns + 1, here=point.t_ns) is None
    assert checkpoints.start_for(point.t_ns + 1, here=t0) is point
    assert checkpoints.start_for(t0 + 1, here=point.t_ns) in (None, checkpoints.before(t0 + 1))


def test_checkpoints_past_their_memory_keep_the_latest_and_every_other(tmp_path: Path) -> None:
    checkpoints = ReplayCheckpoints(DEMO, Session, every=20, max_bytes=1, chunk_size=4096)
    checkpoints.build()
    assert checkpoints.done and 1 <= checkpoints.count <= 2
    whole = Session()
    whole.apply(list(RecordingReader(DEMO, rows=True)))
    last = checkpoints.before(1 << 62)
    assert last is not None and last.t_ns <= whole.last_t_ns


def test_a_recording_cut_short_is_kept_at_points_up_to_where_it_was_cut(tmp_path: Path) -> None:
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(DEMO.read_bytes()[: DEMO.stat().st_size * 2 // 3])
    checkpoints = ReplayCheckpoints(cut, Session, every=40, chunk_size=4096)
    checkpoints.build()
    assert checkpoints.done and checkpoints.error is None and checkpoints.count > 2
    t0 = _t0(cut)
    replay = _Replay(cut, checkpoints)
    try:
        for seconds in (18.0, 3.0, 40.0):
            t_ns = t0 + int(seconds * 1e9)
            replay.jump(t_ns)
            assert _state(replay.session) == _state(_from_start(cut, t_ns)), seconds
    finally:
        replay.close()


def test_a_file_that_is_not_a_recording_gives_no_checkpoint_and_says_why(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.msgpack"
    foreign.write_bytes(b"not a recording at all")
    checkpoints = ReplayCheckpoints(foreign, Session)
    checkpoints.build()
    assert checkpoints.done and checkpoints.count == 0
    assert checkpoints.error is not None and "not an iket-tui recording" in checkpoints.error


def test_a_jump_lands_on_the_failure_and_the_kernels_a_user_looks_for() -> None:
    t0 = _t0(DEMO)
    replay = _Replay(DEMO)
    try:
        replay.jump(t0 + int(18.8e9))  # just after layout_conflict failed in tl.LayoutInference
        failed = [comp for comp in replay.session.tree.compiles if str(comp.status) == "failed"]
        assert [comp.kernel for comp in failed] == ["layout_conflict"]
        assert not replay.session.kernels.launches
        replay.jump(t0 + int(29.0e9))  # after the traced GEMM's three launches were drained
        assert len(replay.session.kernels.launches) == 3
        replay.jump(t0 + int(5.0e9))  # back: before the first compile
        assert replay.session.tree.compiles == [] and not replay.session.kernels.launches
    finally:
        replay.close()


def test_a_jump_after_the_end_and_back_plays_on_from_there() -> None:
    t0 = _t0(DEMO)
    replay = _Replay(DEMO)
    try:
        replay.jump(t0 + int(100e9))
        assert len(replay.session.tree.compiles) == 9
        replay.source.set_speed(0)
        replay.source.set_paused(False)
        replay.jump(t0 + int(20e9))
        assert len(replay.session.tree.compiles) == 6
        ended = replay._batches.get(timeout=WAIT_S)
        while ended.state is not SourceState.ENDED:
            replay.session.apply(ended.messages)
            ended = replay._batches.get(timeout=WAIT_S)
        replay.session.apply(ended.messages)
        assert len(replay.session.tree.compiles) == 9  # it played on to the end again
    finally:
        replay.close()


def test_a_jump_over_damaged_bytes_says_what_it_skipped_and_shows_what_a_replay_from_the_start_shows(
    tmp_path: Path,
) -> None:
    data = DEMO.read_bytes()
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(data[: len(data) // 2] + b"\x00garbage\xff" * 500 + data[len(data) // 2 :])
    t0 = _t0(damaged)
    replay = _Replay(damaged)
    try:
        t_ns = t0 + int(29e9)
        replay.jump(t_ns)
        reader = RecordingReader(damaged)
        for _ in reader:
            pass
        skipped = reader.info.skipped_bytes  # the garbage, and the frame it was put in
        assert skipped >= 5000
        assert replay.notes == [f"the jump passed over {skipped} damaged bytes: what they held is not shown"]
        assert _state(replay.session) == _state(_from_start(damaged, t_ns))
    finally:
        replay.close()


def test_a_jump_into_the_damage_lands_on_the_last_complete_message_before_it_and_says_so(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(data[: len(data) // 2] + b"\x00garbage\xff" * 500 + data[len(data) // 2 :])
    t0 = _t0(DEMO)
    lost = next(msg for msg in RecordingReader(DEMO) if msg["type"] == m.KERNEL_RECORDS)  # in the damaged frame
    replay = _Replay(damaged)
    try:
        replay.jump(lost["t_ns"])
        assert replay.notes and replay.notes[0].startswith("the jump passed over ")
        assert not replay.session.kernels.launches  # the drain was in the damage
        assert replay.source.position_t_ns is not None and replay.source.position_t_ns < lost["t_ns"]
        assert _state(replay.session) == _state(_from_start(damaged, lost["t_ns"]))
        assert t0 < replay.source.position_t_ns
    finally:
        replay.close()


def test_a_jump_from_a_checkpoint_over_damage_says_what_a_jump_from_the_start_says(tmp_path: Path) -> None:
    data = bytearray(DEMO.read_bytes())
    at = len(data) * 9 // 10
    data[at : at + 40] = b"\xc1" * 40
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(bytes(data))
    checkpoints = ReplayCheckpoints(damaged, Session, every=40, chunk_size=4096)
    checkpoints.build()
    target = max(t for t in map(m.t_ns_of, RecordingReader(damaged, rows=True)) if t is not None) - 1
    notes = []
    for with_checkpoints in (False, True):
        replay = _Replay(damaged, checkpoints if with_checkpoints else None)
        try:
            replay.jump(target)
            notes.append(replay.notes)
        finally:
            replay.close()
    assert notes[0] == notes[1] and "damaged bytes" in notes[0][0]
