# mypy: disable-error-code="no-untyped-call"
"""A heavy kernel on the agent's default ring: whole launches, never shreds.

The fp16 GEMM 4096^3 of ``gpu_ring_check.py`` (128x128x32 tiles, 3 stages) with a range around
the loads and one around the MMA of every k-step (``gemm_kernel("ksteps")``: 128 k-steps, 512
events per consumer warp per block, about 2.1 M events a launch), compiled with the iket-tui
runtime for a ring of the agent's default geometry (``KernelOptions()``) in device memory,
drained by :class:`RingDrain` over :class:`~iket_tui.ring.device_copy.DeviceRing` on a thread at
the agent's default period while the kernels run, as the agent drains it:

- a first launch, drained to the end: its result, and the kernel's own event count (the
  header's ``events_ended`` after it) and shape (warps per launch, from its chunks' grid and
  warps-per-block words);
- a lone launch after a pause: every one of its events arrives (per block and warp, against the
  first launch), all its blocks, nothing lost; how many had arrived before it ended;
- a burst of back-to-back launches, then the drain to its end: how many launches arrived whole
  (at least as many as the ring holds at once), in every launch with kept events at least 90% of
  them in warps kept whole, the loss counted exactly.

Needs an NVIDIA GPU (run on the H200), CuPy, torch and TileLang:

    PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 benchmarks/gpu_heavy_check.py [--burst 30]

It prints one table (check, ok, measured, expected) and the figures; with ``$OUT`` set it also
writes ``$OUT/gpu_heavy_check.json``. The exit status is 0 when every check passed. The
accounting per launch (:func:`launch_accounts`) needs no GPU: tests/ring/test_ring_tilelang.py
runs it over the CPU producer's warps.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.ring.counters import LOSS_DTYPE, DrainBatch
from iket_tui.ring.drain import RingDrain
from iket_tui.ring.layout import (
    CLAIM_STRIPES,
    DEFAULT_LAYOUT,
    FLAG_WARP_BEGIN,
    FLAG_WARP_END,
    FLAG_WARP_LAPPED,
    WARP_SLOTS,
    stripe_share,
)

Array = np.ndarray[Any, Any]
KEPT_WHOLE_SHARE = 0.9
"""In every launch with kept events, at least this share of them belongs to warps kept whole."""


def _gpu_ring_check() -> Any:
    """benchmarks/gpu_ring_check.py, imported by path (as the CPU tests import it)."""
    path = Path(__file__).resolve().parent / "gpu_ring_check.py"
    name = "gpu_ring_check"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


gpu = _gpu_ring_check()


# ---- accounting per launch (numpy only) -----------------------------------------------------------


@dataclass(frozen=True)
class LaunchAccount:
    """What arrived of one launch: its warps, blocks and events, and which were kept whole."""

    launch: int
    warps_expected: int
    """Blocks x warps per block, from its chunks' grid and warps-per-block words (0: unknown)."""
    blocks_expected: int
    warps_seen: int
    warps_whole: int
    """Warps that began, ended, lost nothing (no loss named, not lapped) and, where the warp's
    event count is known, hold exactly that many."""
    blocks_seen: int
    blocks_whole: int
    events_kept: int
    events_in_whole_warps: int
    events_lost_named: int
    """Events the drain's named losses of this launch say were lost (where it knew how many)."""
    warps_lost_named: int
    counts: dict[tuple[int, int], int] = field(repr=False, compare=False)
    """Events kept per (block, warp), the block as its linear index in the grid."""
    warps_per_stripe: tuple[int, ...] = ()
    """Warps seen per claim stripe (the stripe of the SM each ran on)."""

    @property
    def whole(self) -> bool:
        return self.warps_expected > 0 and self.warps_whole == self.warps_expected

    @property
    def kept_whole_share(self) -> float:
        """The share of its kept events that belong to warps kept whole (1 with none kept)."""
        return self.events_in_whole_warps / self.events_kept if self.events_kept else 1.0


def launch_accounts(
    chunks: Array, losses: Array, expected: dict[tuple[int, int], int] | None = None
) -> dict[int, LaunchAccount]:
    """Each launch's account (by its ``launch`` word) from the drained ``chunks`` and the named
    ``losses`` of a run; ``expected`` gives each (block, warp)'s event count where known."""
    chunks = np.asarray(chunks)
    losses = np.asarray(losses) if len(losses) else np.zeros(0, dtype=LOSS_DTYPE)
    launch_ids = np.unique(np.concatenate([chunks["launch"], losses["launch"]]).astype(np.int64))
    out = {}
    for launch in launch_ids.tolist():
        mine = chunks[chunks["launch"] == launch]
        lost = losses[losses["launch"] == launch]
        grid_x = int(mine["grid_x"].max()) if len(mine) else 0
        grid_yz = int(mine["grid_yz"].max()) if len(mine) else 0
        block_warps = int(mine["block_warps"].max()) if len(mine) else 0
        grid_y, grid_z = max(grid_yz & 0xFFFF, 1), max(grid_yz >> 16, 1)
        blocks_expected = grid_x * grid_y * grid_z
        warps_expected = blocks_expected * block_warps

        def linear(rows: Array, gx: int = max(grid_x, 1), gy: int = grid_y) -> Array:
            bx = rows["block_x"].astype(np.int64)
            by = rows["block_y"].astype(np.int64)
            bz = rows["block_z"].astype(np.int64)
            return (bz * gy + by) * gx + bx

        keys = linear(mine) << 8 | mine["warp"].astype(np.int64)
        warps, inverse = np.unique(keys, return_inverse=True)
        flags = mine["flags"].astype(np.int64)
        events = np.bincount(inverse, weights=mine["n_events"].astype(np.int64), minlength=len(warps)).astype(np.int64)
        began = np.bincount(inverse, weights=(flags & FLAG_WARP_BEGIN) != 0, minlength=len(warps)) > 0
        ended = np.bincount(inverse, weights=(flags & FLAG_WARP_END) != 0, minlength=len(warps)) > 0
        lapped = np.bincount(inverse, weights=(flags & FLAG_WARP_LAPPED) != 0, minlength=len(warps)) > 0
        lost_keys = linear(lost) << 8 | lost["warp"].astype(np.int64)
        named = np.isin(warps, lost_keys)
        whole = began & ended & ~lapped & ~named
        counts = {(int(k >> 8), int(k & 0xFF)): int(n) for k, n in zip(warps.tolist(), events.tolist(), strict=True)}
        if expected is not None and counts:
            whole &= np.array([expected.get(key, -1) == n for key, n in counts.items()], dtype=bool)
        sm = np.zeros(len(warps), dtype=np.int64)
        np.maximum.at(sm, inverse, mine["segment"].astype(np.int64) // WARP_SLOTS)
        per_stripe = np.bincount(sm % CLAIM_STRIPES, minlength=CLAIM_STRIPES)
        block_of = warps >> 8
        blocks = np.unique(block_of)
        whole_per_block = np.bincount(np.searchsorted(blocks, block_of), weights=whole, minlength=len(blocks))
        blocks_whole = int((whole_per_block == block_warps).sum()) if block_warps else 0
        lost_events = lost["events"].astype(np.int64)
        out[launch] = LaunchAccount(
            launch=launch,
            warps_expected=warps_expected,
            blocks_expected=blocks_expected,
            warps_seen=len(warps),
            warps_whole=int(whole.sum()),
            blocks_seen=len(blocks),
            blocks_whole=blocks_whole,
            events_kept=int(events.sum()),
            events_in_whole_warps=int(events[whole].sum()),
            events_lost_named=int(lost_events[lost_events > 0].sum()),
            warps_lost_named=len(np.unique(lost_keys)),
            counts=counts,
            warps_per_stripe=tuple(int(n) for n in per_stripe),
        )
    return out


def ring_capacity_in_launches(regions: int, warps_per_launch: int) -> int:
    """Launches the ring holds at once: a warp of a block takes a region."""
    return regions // warps_per_launch if warps_per_launch else 0


def stripe_capacity_in_launches(regions: int, warps_per_stripe: tuple[int, ...]) -> int:
    """Launches the ring holds at once where each SM's warps claim from its stripe's share of
    the regions: the fullest stripe decides."""
    share = stripe_share(regions)
    return min((share // n for n in warps_per_stripe if n), default=0)


# ---- the run on the GPU ---------------------------------------------------------------------------


class TimedDrain(RingDrain):
    """The agent's drain, timing its passes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passes = 0
        self.busy_s = 0.0
        self.reading_passes = 0
        self.reading_s = 0.0
        self.longest_s = 0.0
        self.most_threads = 1

    def drain(self) -> DrainBatch:
        t0 = time.perf_counter()
        batch = super().drain()
        seconds = time.perf_counter() - t0
        self.passes += 1
        self.busy_s += seconds
        self.longest_s = max(self.longest_s, seconds)
        self.most_threads = max(self.most_threads, self.threads_used)
        if len(batch.chunks) or len(batch.losses):
            self.reading_passes += 1
            self.reading_s += seconds
        return batch


@dataclass
class Arrivals:
    """Every batch the drain thread handed on, with the host time it arrived and the phase."""

    phase: str = "first"
    batches: list[tuple[float, str, DrainBatch]] = field(default_factory=list)

    def add(self, batch: DrainBatch) -> None:
        self.batches.append((time.monotonic(), self.phase, batch))

    def chunks(self, phase: str | None = None, before: float | None = None) -> Array:
        parts = [
            b.chunks for at, p, b in self.batches if (phase is None or p == phase) and (before is None or at < before)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=DEFAULT_LAYOUT.drained_dtype)

    def losses(self) -> Array:
        parts = [b.losses for _, _, b in self.batches]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=LOSS_DTYPE)

    def launches_of(self, phase: str) -> list[int]:
        """The launches first heard of in ``phase`` (by chunk or by named loss)."""
        seen: dict[int, str] = {}
        for _, p, b in self.batches:
            for launch in np.unique(np.concatenate([b.chunks["launch"], b.losses["launch"]])).tolist():
                seen.setdefault(int(launch), p)
        return sorted(launch for launch, p in seen.items() if p == phase)


def settle(ring: Any, seconds: float = 30.0) -> bool:
    """Wait until every warp that claimed a region ended and the drain has accounted for every
    event they wrote (``events_written`` = the header's ``events_ended``)."""
    drain = ring.drain
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        claims, ended, events = ring.view.warps
        if claims == ended and drain.caught_up and drain.counters.events_written == events:
            time.sleep(2 * drain.period_s)  # one more pass: nothing after it
            if ring.view.warps == (claims, ended, events) and drain.counters.events_written == events:
                return True
        time.sleep(drain.period_s)
    return False


def _histogram(counts: dict[tuple[int, int], int]) -> str:
    values, times = np.unique(np.fromiter(counts.values(), dtype=np.int64, count=len(counts)), return_counts=True)
    return ", ".join(f"{t} warps x {v}" for v, t in zip(values.tolist(), times.tolist(), strict=True))


def run(burst: int, pause_s: float) -> tuple[list[Any], dict[str, Any]]:
    """The three phases; the table's rows and the figures."""
    import torch

    Row = gpu.Row
    options = KernelOptions()
    ring = gpu.GpuRing(gpu.agent_geometry())
    ring.drain = TimedDrain(ring.view, period_s=1.0 / options.drain_hz, source=ring.device)
    geometry = ring.device.geometry
    rows: list[Any] = []
    figures: dict[str, Any] = {
        "regions": geometry.regions,
        "records_per_region": geometry.records_per_region,
        "ring_bytes": geometry.total_bytes,
        "drain_period_s": ring.drain.period_s,
    }
    t0 = time.monotonic()
    kernel = gpu.compile_kernel(ring.runtime, gpu.gemm_kernel("ksteps"))
    print(f"  compiled the k-step GEMM in {time.monotonic() - t0:.1f} s", flush=True)
    size = gpu.GEMM_SIZE
    a = torch.randn(size, size, dtype=torch.float16, device="cuda")
    b = torch.randn(size, size, dtype=torch.float16, device="cuda")
    c = torch.empty(size, size, dtype=torch.float16, device="cuda")
    reference = a.float() @ b.float()
    arrivals = Arrivals()
    stop = threading.Event()
    thread = ring.drain.run(arrivals.add, stop)
    try:
        # The first launch: the kernel's own event count and shape.
        kernel(a, b, c)
        gpu.finish("the first k-step GEMM")
        error = float((c.float() - reference).abs().max() / reference.abs().max())
        rows.append(Row("k-step GEMM: result", error < 1e-2, f"max rel err {error:.1e}", "< 1e-2"))
        settled = settle(ring)
        _, _, events_first = ring.view.warps
        first_launches = arrivals.launches_of("first")
        accounts = launch_accounts(arrivals.chunks("first"), arrivals.losses())
        first = accounts[first_launches[0]] if len(first_launches) == 1 else None
        rows.append(
            Row(
                "first launch: drained to its end, every event the warps wrote",
                settled and first is not None and first.events_kept == events_first and first.whole,
                f"{len(first_launches)} launch(es), {first.events_kept if first else 0} of {events_first} events "
                f"(header), warps whole {first.warps_whole if first else 0} of {first.warps_expected if first else 0}",
                f"1 launch, {events_first} events, every warp whole",
            )
        )
        if first is None:
            return rows, figures
        events_per_launch = events_first
        warps_per_launch = first.warps_expected
        capacity = ring_capacity_in_launches(geometry.regions, warps_per_launch)
        by_stripe = stripe_capacity_in_launches(geometry.regions, first.warps_per_stripe)
        figures["ring_capacity_launches_by_stripe"] = by_stripe
        figures["warps_per_stripe"] = list(first.warps_per_stripe)
        figures |= {
            "events_per_launch": events_per_launch,
            "warps_per_launch": warps_per_launch,
            "blocks_per_launch": first.blocks_expected,
            "ring_capacity_launches": capacity,
            "events_per_warp": _histogram(first.counts),
        }
        print(
            f"  a launch: {events_per_launch} events, {first.blocks_expected} blocks, {warps_per_launch} warps "
            f"({_histogram(first.counts)}); the ring holds {capacity} launch(es) at once, {by_stripe} by its "
            f"fullest claim stripe (warps per stripe {list(first.warps_per_stripe)})",
            flush=True,
        )
        rows += _lone(ring, arrivals, kernel, (a, b, c), first, events_per_launch, pause_s, figures)
        rows += _burst(ring, arrivals, kernel, (a, b, c), first, events_per_launch, burst, capacity, figures)
    finally:
        stop.set()
        thread.join(timeout=60)
    drain = ring.drain
    counters = drain.counters
    claims, ended, events = ring.view.warps
    rows.append(
        Row(
            "in all: written = read + lost, written = the warps' own count",
            counters.balanced and counters.events_written == events and counters.torn == 0,
            f"written {counters.events_written}, read {counters.events_read}, lost {counters.events_lost}, "
            f"torn {counters.torn}; header: {events} events of {ended} of {claims} warps",
            f"balanced, written {events}, torn 0",
        )
    )
    rate = counters.events_read / drain.reading_s if drain.reading_s else 0.0
    figures |= {
        "drain_passes": drain.passes,
        "drain_passes_reading": drain.reading_passes,
        "drain_busy_s": drain.busy_s,
        "drain_reading_s": drain.reading_s,
        "drain_longest_pass_s": drain.longest_s,
        "drain_threads_most": drain.most_threads,
        "drain_engine": drain.engine,
        "bytes_copied": ring.device.bytes_copied,
        "region_copies": ring.device.copies,
        "events_read": counters.events_read,
        "events_lost": counters.events_lost,
        "warps_lost": counters.warps_lost,
        "warps_unread": counters.warps_unread,
        "drained_events_per_s": rate,
    }
    rows.append(
        Row(
            "drain: passes, time, copies, rate",
            True,
            f"{drain.passes} passes ({drain.reading_passes} reading) in {drain.busy_s:.2f} s, longest "
            f"{drain.longest_s * 1e3:.1f} ms; {ring.device.bytes_copied / 2**20:.0f} MiB copied; "
            f"{rate / 1e6:.0f} M events/s while reading; {gpu.drain_engine(drain)} (most {drain.most_threads})",
            "",
        )
    )
    return rows, figures


def _lone(
    ring: Any,
    arrivals: Arrivals,
    kernel: Any,
    args: tuple[Any, ...],
    first: LaunchAccount,
    events_per_launch: int,
    pause_s: float,
    figures: dict[str, Any],
) -> list[Any]:
    """One launch after a pause: every event of it arrives, while it runs and after."""
    import torch

    Row = gpu.Row
    time.sleep(pause_s)
    before = ring.drain.counters
    _, _, events_before = ring.view.warps
    arrivals.phase = "lone"
    done = torch.cuda.Event()
    started = time.monotonic()
    kernel(*args)
    done.record()
    while not done.query():
        if time.monotonic() - started > 30:
            raise gpu.Hung("the lone k-step GEMM did not finish in 30 s")
        time.sleep(0.0002)
    finished = time.monotonic()
    settled = settle(ring)
    _, _, events_after = ring.view.warps
    launches = arrivals.launches_of("lone")
    accounts = launch_accounts(arrivals.chunks("lone"), arrivals.losses(), first.counts)
    lone = accounts.get(launches[0]) if len(launches) == 1 else None
    during = int(arrivals.chunks("lone", before=finished)["n_events"].sum(dtype=np.int64))
    counters = ring.drain.counters
    lost = counters.events_lost - before.events_lost
    wrote = events_after - events_before
    figures |= {"lone_events_before_end": during, "lone_seconds": finished - started}
    if lone is None:
        return [Row("lone launch: arrived", False, f"{len(launches)} launches heard of", "1")]
    same = lone.counts == first.counts
    return [
        Row(
            "lone launch: every event arrives",
            settled and lone.events_kept == wrote == events_per_launch and lost == 0,
            f"{lone.events_kept} of {wrote} written (header), lost {lost}",
            f"{events_per_launch}, lost 0",
        ),
        Row(
            "lone launch: per block and warp, the kernel's own count",
            same and lone.whole,
            f"{_histogram(lone.counts)}; warps whole {lone.warps_whole} of {lone.warps_expected}",
            f"{_histogram(first.counts)}, as the first launch",
        ),
        Row(
            "lone launch: all blocks",
            lone.blocks_seen == lone.blocks_whole == lone.blocks_expected,
            f"{lone.blocks_seen} seen, {lone.blocks_whole} whole",
            str(lone.blocks_expected),
        ),
        Row(
            "lone launch: arrived before it ended",
            True,
            f"{during} of {lone.events_kept} events, the launch {1e3 * (finished - started):.1f} ms long "
            f"(drain period {1e3 * ring.drain.period_s:.0f} ms)",
            "",
        ),
    ]


def _burst(
    ring: Any,
    arrivals: Arrivals,
    kernel: Any,
    args: tuple[Any, ...],
    first: LaunchAccount,
    events_per_launch: int,
    burst: int,
    capacity: int,
    figures: dict[str, Any],
) -> list[Any]:
    """``burst`` launches back to back: whole launches kept, shreds never."""
    Row = gpu.Row
    before = ring.drain.counters
    _, _, events_before = ring.view.warps
    arrivals.phase = "burst"
    started = time.monotonic()
    for _ in range(burst):
        kernel(*args)
    seconds = gpu.finish("the burst of k-step GEMMs", 60.0)
    settled = settle(ring)
    _, _, events_after = ring.view.warps
    launches = arrivals.launches_of("burst")
    accounts = launch_accounts(arrivals.chunks("burst"), arrivals.losses(), first.counts)
    mine = [accounts[launch] for launch in launches if launch in accounts]
    whole = [account for account in mine if account.whole]
    shares = [account.kept_whole_share for account in mine if account.events_kept]
    counters = ring.drain.counters
    written = counters.events_written - before.events_written
    read = counters.events_read - before.events_read
    lost = counters.events_lost - before.events_lost
    wrote = events_after - events_before
    figures |= {
        "burst_launches": burst,
        "burst_seconds": time.monotonic() - started,
        "burst_gpu_tail_seconds": seconds,
        "burst_launches_heard_of": len(mine),
        "burst_launches_whole": len(whole),
        "burst_kept_whole_share": [round(share, 4) for share in shares],
        "burst_kept_fraction": [round(account.events_kept / events_per_launch, 4) for account in mine],
        "burst_events_read": read,
        "burst_events_lost": lost,
    }
    print(
        "  burst, per launch heard of: kept / events, share in whole warps: "
        + "; ".join(
            f"{account.events_kept / events_per_launch:.3f} {account.kept_whole_share:.3f}" for account in mine
        ),
        flush=True,
    )
    worst = min(shares, default=1.0)
    return [
        Row(
            f"burst of {burst}: launches arrived whole >= the ring's capacity in launches",
            len(whole) >= capacity,
            f"{len(whole)} of {burst} whole ({len(mine)} heard of)",
            f">= {capacity} (regions {ring.device.geometry.regions} // {first.warps_expected} warps a launch; "
            f"{figures.get('ring_capacity_launches_by_stripe')} by the fullest claim stripe)",
        ),
        Row(
            f"burst of {burst}: in every launch, kept events in warps kept whole",
            worst >= KEPT_WHOLE_SHARE,
            f"lowest share {worst:.4f} over {len(shares)} launches with kept events",
            f">= {KEPT_WHOLE_SHARE}",
        ),
        Row(
            f"burst of {burst}: loss counted exactly",
            settled
            and counters.balanced
            and written == wrote == burst * events_per_launch
            and read == sum(account.events_kept for account in mine),
            f"written {written} = read {read} + lost {lost}; header {wrote}",
            f"written {burst * events_per_launch} = the header's count, read = the events kept",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_heavy_check", description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=30, help="launches back to back in the burst")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds of pause before the lone launch")
    args = parser.parse_args(argv)
    if args.burst < 1 or args.pause < 0:
        print("gpu_heavy_check: --burst must be at least 1 and --pause not negative", file=sys.stderr)
        return 2
    sms = gpu._require_gpu()
    import torch

    print(f"GPU: {torch.cuda.get_device_name(0)}, {sms} SMs; torch {torch.__version__}", flush=True)
    t0 = time.monotonic()
    try:
        rows, figures = run(args.burst, args.pause)
    except gpu.Hung as exc:
        status = gpu.report([gpu.Row("a kernel hung", False, str(exc), "every kernel finishes")], {}, "gpu_heavy_check")
        sys.stdout.flush()
        os._exit(3 if status == 0 else status)  # a hung context cannot be torn down
    for row in rows:
        gpu.print_row(row)
    figures["seconds"] = time.monotonic() - t0
    print("\nfigures:")
    for name, value in figures.items():
        print(f"  {name}: {value}")
    return int(gpu.report(rows, figures, "gpu_heavy_check"))


if __name__ == "__main__":
    sys.exit(main())
