"""The native drain pass against the numpy drain: the same inputs, pass after pass, give the
same chunks (byte for byte), the same counters and losses, and the same claims still open.

Each example is a script of random rings: warps written by the CPU producer's writer (events
of random ids, payloads and gaps, some seconds apart; warps that lap their own region; claims
that go round the ring; warps that stop mid-way and never end; partial and diverged ends),
records torn or stale (a stamp naming another position or an older lap), descriptors not
visible yet, records written between the copy and the second read of the stamps, and generation
resets. Both drains read the same snapshot through a source of their own: descriptors, stamps
before, the copied records, stamps and descriptors after (or, as a GPU ring's mirror, the
records alone, each seen whole).
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
from iket_tui.ring.drain import RegionCopy, RingDrain
from iket_tui.ring.layout import END_COUNT_BITS, END_DIVERGED, RingGeometry

NATIVE, WHY_NOT = native_drain.load(announce=False)
needs_native = pytest.mark.skipif(NATIVE is None, reason=f"no native drain pass here: {WHY_NOT}")
Array = np.ndarray[Any, Any]


class Snapshot:
    """A drain's source reading one fixed snapshot of a ring's memory."""

    def __init__(self, claims: int, before: Array, memory: Array, after: Array, *, mirror: bool) -> None:
        self.claims, self.before, self.memory, self.after, self.mirror = claims, before, memory, after, mirror

    def refresh(self) -> bool:
        return True

    def read(self, claims: Array) -> RegionCopy:
        ring = RingView(self.memory)
        regions = claims & (ring.geometry.regions - 1)
        descriptors, words = ring.descriptor_words[regions], ring.record_words[regions]
        after = RingView(self.after)
        if self.mirror:  # a GPU ring's mirror: each record seen whole, no stamps before or after
            return RegionCopy(descriptors, words, after.descriptor_words[regions])
        before = RingView(self.before).record_words[regions, :, 3]
        return RegionCopy(
            descriptors, words, after.descriptor_words[regions], before, after.record_words[regions, :, 3]
        )

    def device_now_ns(self) -> int | None:
        return None


class Script:
    """Random warps writing one ring, driven step by step."""

    def __init__(self, ring: RingView, rng: random.Random) -> None:
        self.ring, self.rng = ring, rng
        self.writers: list[WarpWriter] = []
        self.t = 1 << 40
        self.launch = 0

    def tick(self) -> int:
        roll = self.rng.random()
        self.t += 1 << 33 if roll < 0.002 else self.rng.choice([64, 1000, 1 << 20]) if roll < 0.05 else 32
        return self.t

    def write(self, records: int) -> None:
        """About ``records`` steps: warps begin, write events, end or stop."""
        rng = self.rng
        for _ in range(records):
            roll = rng.random()
            if not self.writers or roll < 0.03:
                self.launch += 1
                self.writers.append(
                    WarpWriter(
                        self.ring,
                        module=rng.randrange(1, 4),
                        kernel=rng.randrange(3),
                        launch=self.launch,
                        block=(rng.randrange(5), rng.randrange(3), rng.randrange(2)),
                        warp=rng.randrange(8),
                        id_bits=rng.randrange(5, 9),
                        sm=rng.randrange(132),
                        grid=(rng.randrange(1, 9), 1, 1),
                        block_warps=rng.randrange(1, 9),
                        start_ns=self.tick(),
                    )
                )
                continue
            writer = rng.choice(self.writers)
            if roll < 0.06:  # the warp ends (partial, or its lanes diverged)
                writer.close(self.tick(), partial=rng.random() < 0.3)
                if rng.random() < 0.3:
                    self.ring.descriptor_words[writer.region, 15] |= END_DIVERGED << END_COUNT_BITS
                self.writers.remove(writer)
            elif roll < 0.07:  # the warp stops mid-way and never ends
                self.writers.remove(writer)
            else:
                payload = rng.getrandbits(32) if rng.random() < 0.5 else None
                writer.event(rng.randrange(1, writer.id_mask + 1), payload, self.tick())

    def damage(self, memory: Array, count: int) -> None:
        """Tear or stale ``count`` records or descriptor parts of a copy of the ring's memory."""
        rng = self.rng
        ring = RingView(memory)
        regions, cap = ring.geometry.regions, ring.geometry.records_per_region
        for _ in range(count):
            r, slot = rng.randrange(regions), rng.randrange(cap)
            kind = rng.randrange(4)
            if kind == 0:
                ring.record_words[r, slot, 3] = rng.getrandbits(32)
            elif kind == 1:
                stale = rng.choice([1, cap, 2 * cap, 1 << 20])
                ring.record_words[r, slot, 3] = (int(ring.record_words[r, slot, 3]) - stale) & 0xFFFFFFFF
            elif kind == 2:  # a descriptor part not visible yet
                ring.descriptor_words[r, 4 * rng.randrange(4)] = 0
            else:
                ring.record_words[r, slot, 3] = 0


def _drains(ring: RingView) -> tuple[RingDrain, RingDrain]:
    reference = RingDrain(ring, native=False)
    native = RingDrain(ring)
    native.drain()  # loads the native pass; nothing is written yet
    reference.drain()
    assert native.engine.startswith("native"), native.engine
    return reference, native


def _same(reference: RingDrain, native: RingDrain, mirror: bool, before: Array, memory: Array, after: Array) -> None:
    batches = []
    for drain in (reference, native):
        drain.source = Snapshot(0, before.copy(), memory.copy(), after.copy(), mirror=mirror)
        batches.append(drain.drain())
    a, b = batches
    assert a.chunks.tobytes() == b.chunks.tobytes()
    assert a.losses.tobytes() == b.losses.tobytes()
    assert a.counters == b.counters
    assert a.generation_changed == b.generation_changed
    assert reference._open.tobytes() == native._open.tobytes()
    assert reference.caught_up == native.caught_up
    counters = a.counters
    assert counters.chunks_written == counters.chunks_read + counters.chunks_lost
    assert counters.events_written == counters.events_read + counters.events_lost


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    regions_log=st.integers(3, 5),
    cap_log=st.integers(4, 8),
    passes=st.integers(1, 6),
    mirror=st.booleans(),
)
def test_native_drain_matches_numpy_on_random_rings(
    seed: int, regions_log: int, cap_log: int, passes: int, mirror: bool
) -> None:
    rng = random.Random(seed)
    cap = 1 << cap_log
    geometry = RingGeometry(1 << regions_log, cap)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    script = Script(ring, rng)
    reference, native = _drains(ring)
    for _ in range(passes):
        if rng.random() < 0.15:  # the owner resets the ring between passes
            script.writers.clear()
            ring.begin_generation()
        script.write(rng.choice([0, 1, 3, 5, cap // 2, cap - 1, cap, cap + 7, 3 * cap, 20 * cap]))
        before = np.array(ring.memory)
        memory = np.array(ring.memory)
        if rng.random() < 0.5:
            script.damage(memory, rng.randrange(1, 8))
        # writers go on between the copy and the second read of the stamps and descriptors
        script.write(rng.choice([0, 1, 2, cap // 3, cap]))
        after = np.array(ring.memory)
        _same(reference, native, mirror, before, memory, after)


@needs_native
@pytest.mark.parametrize("cap", [16, 64, 1024])
def test_native_drain_matches_numpy_on_a_flood_read_in_parts(cap: int) -> None:
    """Many regions, warps longer than their region (lapped), claims that go round the ring,
    read as they are written."""
    geometry = RingGeometry(128, cap)
    ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
    reference, native = _drains(ring)
    for step, (warps, records) in enumerate([(128, cap), (40, cap // 2), (300, 2 * cap + 5), (7, 7), (128, cap)]):
        flood(ring, records_per_warp=records, warps=warps, launch=step, block_warps=4)
        memory = np.array(ring.memory)
        _same(reference, native, step % 2 == 1, memory, memory, memory.copy())


@needs_native
def test_a_big_pass_spread_over_threads_hands_on_the_same_chunks() -> None:
    """A pass of the GEMM's burst (8,192 warps of 1,000 events) on three threads gives the
    chunks, counters and losses of one thread; a small pass runs on the drain's own thread."""
    geometry = RingGeometry(8192, 1024)
    batches = []
    for threads in (1, 3):
        ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry, ring_id=5)
        drain = RingDrain(ring, threads=threads)
        flood(ring, records_per_warp=1000, launch=1, block_warps=4)
        batches.append(drain.drain())
        assert drain.threads_used == threads
        flood(ring, records_per_warp=10, warps=100, launch=2)
        assert drain.drain().events == 1000 and drain.threads_used == 1
    one, three = batches
    assert one.chunks.tobytes() == three.chunks.tobytes() and one.counters == three.counters
    assert one.events == 8_192_000


def test_native_drain_off_by_environment(tmp_path: Path) -> None:
    """``IKET_TUI_NATIVE_DRAIN=0``: the numpy drain, said in the drain's engine, nothing on stderr."""
    code = (
        "import numpy as np\n"
        "from iket_tui.ring.buffer import RingView\n"
        "from iket_tui.ring.drain import RingDrain\n"
        "from iket_tui.ring.layout import RingGeometry\n"
        "g = RingGeometry(8, 16)\n"
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
        "g = RingGeometry(8, 64)\n"
        "for _ in range(3):\n"
        "    ring = RingView.format(np.zeros(g.total_bytes, dtype=np.uint8), g)\n"
        "    flood(ring, records_per_warp=40)\n"
        "    d = RingDrain(ring)\n"
        "    b = d.drain()\n"
        "    print(d.engine, b.events)\n"
    )
    env = {**os.environ, "PATH": str(tmp_path), "CC": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop(native_drain.ENV, None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == ["native drain pass unavailable: no C compiler (cc or gcc) found; draining with numpy 320"] * 3
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
    geometry = RingGeometry(8, 64)
    try:
        native_drain._reset_for_tests()
        built, why = native_drain.load(announce=False)
        assert built is None
        cc = tmp_path / "bin" / "cc"
        assert why == f"native drain pass unavailable: {cc} failed (cc: error: broken); draining with numpy"
        assert list((tmp_path / "cache" / "iket-tui" / "native").iterdir()) == []  # nothing half-built left
        ring = RingView.format(np.zeros(geometry.total_bytes, dtype=np.uint8), geometry)
        flood(ring, records_per_warp=40)
        drain = RingDrain(ring)
        assert drain.drain().events == 8 * 40
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
