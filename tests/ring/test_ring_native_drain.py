"""The native drain pass against the numpy drain: the same inputs, pass after pass, give the
same chunks (byte for byte), the same counters and the same positions and carried warps.

Each example is a script of random rings: warps written by the CPU producer's writer (events
of random ids, payloads and gaps, some seconds apart; warps that lap their segment; warps that
stop mid-way and never end; partial and diverged ends), records torn or stale (a stamp naming
another position, a word of no record type), records overwritten between the copy and the
second read of the stamps, and generation resets. Both drains read the same snapshot through a
source of their own: the stamps before, the copied records (or, as a GPU ring's mirror, the
stamps of the copy itself) and the stamps after.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iket_tui.ring import native_drain
from iket_tui.ring.buffer import RingView
from iket_tui.ring.cpu_producer import WarpWriter, flood
from iket_tui.ring.drain import RingDrain, record_words
from iket_tui.ring.layout import END_DIVERGED, RECORD_END, RingGeometry

NATIVE, WHY_NOT = native_drain.load(announce=False)
needs_native = pytest.mark.skipif(NATIVE is None, reason=f"no native drain pass here: {WHY_NOT}")
Array = np.ndarray[Any, Any]


class Snapshot:
    """A drain's source reading one fixed snapshot: stamps before, records, stamps after."""

    def __init__(self, before: Array, records: Array, after: Array, *, mirror: bool) -> None:
        self.before, self.records, self.after, self.mirror = before, records, after, mirror

    def refresh(self) -> bool:
        return True

    def stamps(self) -> Array:
        if self.mirror:  # a GPU ring's mirror: the stamps are the copied records' own
            stamps: Array = self.records["stamp"]
            return stamps
        return self.before

    def rows(self, segments: Array) -> Array:
        return record_words(self.records, segments, copy=not self.mirror)

    def stamps_after(self, segments: Array) -> Array:
        return self.after if len(segments) == len(self.after) else self.after[segments]

    def device_now_ns(self) -> int | None:
        return None


class Script:
    """Random writers of one ring, driven step by step."""

    def __init__(self, ring: RingView, rng: random.Random) -> None:
        self.ring, self.rng = ring, rng
        self.writers: dict[int, WarpWriter] = {}
        self.t = 1 << 40
        self.launch = 0

    def tick(self) -> int:
        roll = self.rng.random()
        self.t += 1 << 33 if roll < 0.002 else self.rng.choice([64, 1000, 1 << 20]) if roll < 0.05 else 32
        return self.t

    def write(self, segment: int, records: int) -> None:
        """About ``records`` records into ``segment``: a warp's events, its end, a new warp."""
        rng = self.rng
        for _ in range(records):
            writer = self.writers.get(segment)
            if writer is None:
                self.launch += 1
                writer = WarpWriter(
                    self.ring,
                    segment=segment,
                    module=rng.randrange(1, 4),
                    kernel=rng.randrange(3),
                    launch=self.launch,
                    block=(rng.randrange(5), rng.randrange(3), rng.randrange(2)),
                    warp=rng.randrange(8),
                    id_bits=rng.randrange(5, 9),
                    start_ns=self.tick(),
                )
                self.writers[segment] = writer
                continue
            roll = rng.random()
            if roll < 0.04:  # the warp ends (partial, or its lanes diverged)
                writer.close(self.tick(), partial=rng.random() < 0.3)
                if rng.random() < 0.3:
                    words = self.ring.records.view("<u4").reshape(*self.ring.records.shape, 4)
                    words[segment, (writer.pos - 1) % self.ring.geometry.records_per_segment, 0] |= END_DIVERGED << 12
                del self.writers[segment]
            elif roll < 0.05:  # the warp stops mid-way: the next one starts from the counters
                del self.writers[segment]
            else:
                payload = rng.getrandbits(32) if rng.random() < 0.5 else None
                writer.event(rng.randrange(1, writer.id_mask + 1), payload, self.tick())

    def damage(self, words: Array, count: int) -> None:
        """Tear or stale ``count`` records of ``words`` (shape (segments, cap, 4))."""
        rng = self.rng
        segments, cap = words.shape[0], words.shape[1]
        for _ in range(count):
            s, slot = rng.randrange(segments), rng.randrange(cap)
            kind = rng.randrange(4)
            if kind == 0:
                words[s, slot, 3] = rng.getrandbits(32)
            elif kind == 1:
                words[s, slot, 3] = (int(words[s, slot, 3]) - rng.choice([1, cap, 2 * cap])) & 0xFFFFFFFF
            elif kind == 2:  # a word of no record type there is, or an own record out of place
                words[s, slot, 0] = rng.randrange(16) << 8 | rng.getrandbits(16) << 16
            else:
                words[s, slot, 0] = RECORD_END << 8


def _drains(ring: RingView) -> tuple[RingDrain, RingDrain]:
    reference = RingDrain(ring, native=False)
    native = RingDrain(ring)
    native.drain()  # loads the native pass; nothing is written yet
    reference.drain()
    assert native.engine.startswith("native"), native.engine
    return reference, native


def _same(reference: RingDrain, native: RingDrain, mirror: bool, before: Array, records: Array, after: Array) -> None:
    batches = []
    for drain in (reference, native):
        drain.source = Snapshot(before.copy(), records.copy(), after.copy(), mirror=mirror)
        batches.append(drain.drain())
    a, b = batches
    assert a.chunks.tobytes() == b.chunks.tobytes()
    assert a.counters == b.counters
    assert a.generation_changed == b.generation_changed
    assert (reference._next == native._next).all()
    assert (reference._events_end == native._events_end).all()
    for name, values in reference._warp.items():
        assert (values == native._warp[name]).all(), name
    assert reference.caught_up == native.caught_up
    counters = a.counters
    assert counters.chunks_written == counters.chunks_read + counters.chunks_lost
    assert counters.events_written == counters.events_read + counters.events_lost


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 6),
    cap_log=st.integers(4, 10),
    passes=st.integers(1, 6),
    mirror=st.booleans(),
)
def test_native_drain_matches_numpy_on_random_rings(
    seed: int, segments: int, cap_log: int, passes: int, mirror: bool
) -> None:
    rng = random.Random(seed)
    cap = 1 << cap_log
    geometry = RingGeometry(segments, cap)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    script = Script(ring, rng)
    reference, native = _drains(ring)
    for _ in range(passes):
        if rng.random() < 0.15:  # the owner resets the ring between passes
            script.writers.clear()
            ring.begin_generation()
        for segment in range(segments):
            if rng.random() < 0.8:
                script.write(segment, rng.choice([0, 1, 3, 5, cap // 2, cap - 1, cap, cap + 7, 3 * cap]))
        records = np.array(ring.records)
        words = records.view("<u4").reshape(segments, cap, 4)
        if rng.random() < 0.5:
            script.damage(words, rng.randrange(1, 8))
        before = np.array(records["stamp"])
        if not mirror and rng.random() < 0.3:  # the copy saw records the stamps before did not
            before[rng.randrange(segments), rng.randrange(cap)] ^= 1
        # writers go on between the copy and the second read of the stamps
        for segment in range(segments):
            if rng.random() < 0.3:
                script.write(segment, rng.choice([1, 2, cap // 3, cap]))
        after = np.array(ring.records["stamp"])
        _same(reference, native, mirror, before, records, after)


@needs_native
@pytest.mark.parametrize("cap", [16, 64, 1024])
def test_native_drain_matches_numpy_on_a_flood_read_in_parts(cap: int) -> None:
    """Many segments, warps longer than their segment (lapped), read as they are written."""
    geometry = RingGeometry(130, cap)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    reference, native = _drains(ring)
    for step, records in enumerate([cap, cap // 2, 2 * cap + 5, 7, cap]):
        segments = None if step % 2 == 0 else np.arange(0, 130, 3)
        flood(ring, records_per_segment=max(records, 4), segments=segments)
        records_copy = np.array(ring.records)
        stamps = np.array(records_copy["stamp"])
        _same(reference, native, step % 2 == 1, stamps, records_copy, stamps.copy())


@needs_native
def test_native_scan_room_for_every_own_record() -> None:
    """A copy whose every record reads as a warp's own record (more than the room a pass keeps
    at first): the native pass makes room and still agrees with numpy."""
    geometry = RingGeometry(16, 1024)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    words = ring.records.view("<u4").reshape(16, 1024, 4)
    words[..., 0] = 5 << 8  # a type there is not: torn, every one
    words[..., 3] = np.arange(1, 1025, dtype=np.uint32)[None, :]
    ring.counters["next"] = 1024
    reference, native = _drains(ring)
    records = np.array(ring.records)
    stamps = np.array(records["stamp"])
    _same(reference, native, False, stamps, records, stamps.copy())
    assert native.counters.torn == 16 * 1024


def test_native_drain_off_by_environment(tmp_path: Path) -> None:
    """``IKET_TUI_NATIVE_DRAIN=0``: the numpy drain, said in the drain's engine, nothing on stderr."""
    code = (
        "import numpy as np\n"
        "from iket_tui.ring.buffer import RingView\n"
        "from iket_tui.ring.drain import RingDrain\n"
        "from iket_tui.ring.layout import RingGeometry\n"
        "g = RingGeometry(2, 16)\n"
        "d = RingDrain(RingView.format(np.zeros(g.total_bytes, dtype=np.uint8), g))\n"
        "d.drain()\n"
        "print(d.engine)\n"
    )
    env = {**os.environ, native_drain.ENV: "0", "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "native drain pass off (IKET_TUI_NATIVE_DRAIN=0)"
    assert done.stderr == ""
    assert not (tmp_path / "iket-tui").exists()


def test_no_compiler_falls_back_to_numpy_once(tmp_path: Path) -> None:
    """No C compiler on the path: every drain still drains (with numpy), and the fallback is
    said once, in one line, however many rings are opened."""
    code = (
        "import numpy as np\n"
        "from iket_tui.ring.buffer import RingView\n"
        "from iket_tui.ring.cpu_producer import flood\n"
        "from iket_tui.ring.drain import RingDrain\n"
        "from iket_tui.ring.layout import RingGeometry\n"
        "g = RingGeometry(4, 64)\n"
        "for _ in range(3):\n"
        "    ring = RingView.format(np.zeros(g.total_bytes, dtype=np.uint8), g)\n"
        "    flood(ring, records_per_segment=40)\n"
        "    d = RingDrain(ring)\n"
        "    b = d.drain()\n"
        "    print(d.engine, b.events)\n"
    )
    env = {**os.environ, "PATH": str(tmp_path), "CC": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop(native_drain.ENV, None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == ["native drain pass unavailable: no C compiler (cc or gcc) found; draining with numpy 144"] * 3
    assert done.stderr.splitlines() == [
        "iket-tui: native drain pass unavailable: no C compiler (cc or gcc) found; draining with numpy"
    ]


@needs_native
def test_cache_refuses_a_link_and_builds_with_mode_0700(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library is built into a directory of mode 0700, under its source's and compiler's
    hash; a cache directory that is a link is refused (with numpy left in charge)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(native_drain.ENV, raising=False)
    native_drain._reset_for_tests()
    try:
        built, _ = native_drain.load(announce=False)
        assert built is not None
        directory = tmp_path / "cache" / "iket-tui" / "native"
        assert built.path.parent == directory
        assert directory.stat().st_mode & 0o777 == 0o700
        assert built.path.name.startswith("drain_pass-") and built.path.name.endswith(".so")
        native_drain._reset_for_tests()
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (tmp_path / "linked").mkdir()
        (tmp_path / "linked" / "iket-tui").symlink_to(elsewhere)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "linked"))
        refused, why = native_drain.load(announce=False)
        assert refused is None
        assert why == (
            f"native drain pass unavailable: {tmp_path / 'linked' / 'iket-tui'}: is a symbolic link; "
            "the native drain is not built through links; draining with numpy"
        )
        assert list(elsewhere.iterdir()) == []
    finally:
        native_drain._reset_for_tests()


def _broken_compiler(tmp_path: Path) -> Path:
    """A "compiler" that says its version and fails every build, as a broken toolchain does."""
    script = tmp_path / "bin" / "cc"
    script.parent.mkdir()
    script.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "cc 0.0"; exit 0; fi\necho "cc: error: broken" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    return script


def test_a_failed_build_or_an_unusable_cache_leaves_numpy_draining(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build that fails, and a cache path that is not a directory: each a one-line reason, and
    a drain that drains all the same (with numpy)."""
    monkeypatch.delenv(native_drain.ENV, raising=False)
    monkeypatch.setenv("CC", str(_broken_compiler(tmp_path)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    geometry = RingGeometry(4, 64)
    try:
        native_drain._reset_for_tests()
        built, why = native_drain.load(announce=False)
        assert built is None
        cc = tmp_path / "bin" / "cc"
        assert why == f"native drain pass unavailable: {cc} failed (cc: error: broken); draining with numpy"
        assert list((tmp_path / "cache" / "iket-tui" / "native").iterdir()) == []  # nothing half-built left
        ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
        flood(ring, records_per_segment=40)
        drain = RingDrain(ring)
        assert drain.drain().events == 4 * 36
        assert drain.engine == why
        assert RingDrain(ring).drain().counters.balanced  # a second ring: nothing said again
        assert capsys.readouterr().err == f"iket-tui: {why}\n"

        monkeypatch.delenv("CC")
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
        native_drain._reset_for_tests()
        built, why = native_drain.load(announce=False)
        assert built is None
        assert why == f"native drain pass unavailable: {tmp_path / 'file'}: not a directory; draining with numpy"
    finally:
        native_drain._reset_for_tests()
