"""The CUDA runtime's own source, compiled for the host and run one object per lane.

The runtime keeps its special-register reads, its claim, its counter additions and its stores in
small functions that have a host version under ``IKET_TUI_HOST_SIMULATION``; everything else
(the region a claim names, stamps, record words, the descriptor's parts) is the very code nvcc
compiles for the GPU. A driver maps the ring file at the ring's address, runs a
script of warps and events on 32 lane objects in lockstep (every lane stores the same record
to the same address, as the device's lanes do in one instruction; a record is stored stamp
cleared, body, stamp, as one store is seen whole), and exits; the test then drains the file with
the real drain. A warp may also stop without ending, as one that hangs.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from iket_tui.ring.device import RingTarget, runtime_source
from iket_tui.ring.layout import range_end_id

SHIM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <unistd.h>
#define IKET_TUI_HOST_SIMULATION 1
#define __device__
#define __forceinline__ inline
struct iket_tui_dim3 { unsigned x, y, z; };
namespace iket_tui_sim {
unsigned lane, smid, warpid;
unsigned long long now, gridid, claimed;
inline void store_record(unsigned long long address, unsigned word, unsigned hi, unsigned payload, unsigned stamp) {
  volatile unsigned* at = (volatile unsigned*)address;
  at[3] = 0u;
  at[0] = word;
  at[1] = hi;
  at[2] = payload;
  at[3] = stamp;
}
}
iket_tui_dim3 blockIdx, threadIdx, blockDim, gridDim;
inline unsigned __activemask() { return 0xffffffffu; }
inline unsigned __match_any_sync(unsigned mask, unsigned) { return mask; }
inline unsigned __reduce_max_sync(unsigned, unsigned value) { return value; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
"""

DRIVER = r"""
static void dispatch(iket_tui::Warp& w, unsigned id, bool payload, unsigned bits) {
  switch (id) {
@CASES@
    default: std::fprintf(stderr, "no event id %u\n", id); std::exit(3);
  }
}

int main(int argc, char** argv) {
  int fd = open(argv[1], O_RDWR);
  void* at = mmap((void*)IKET_TUI_RING_ADDRESS, std::strtoull(argv[2], nullptr, 10), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
  if (at != (void*)IKET_TUI_RING_ADDRESS) { std::perror("mmap at the ring address"); return 2; }
  alignas(iket_tui::Warp) static unsigned char storage[32][sizeof(iket_tui::Warp)];
  iket_tui::Warp* lanes[32] = {};
  // A warp that stops (S) keeps its log here, never destroyed: it hangs.
  static unsigned char stopped[256][32][sizeof(iket_tui::Warp)];
  int n_stopped = 0;
  char op;
  while (std::scanf(" %c", &op) == 1) {
    if (op == 'W') {  // W sm slot grid block_x block_y block_z warp warps t grid_x grid_y grid_z
      unsigned sm, slot, bx, by, bz, warp, warps, gx, gy, gz; unsigned long long grid, t;
      std::scanf("%u %u %llu %u %u %u %u %u %llu %u %u %u", &sm, &slot, &grid, &bx, &by, &bz, &warp, &warps, &t, &gx,
                 &gy, &gz);
      iket_tui_sim::smid = sm; iket_tui_sim::warpid = slot; iket_tui_sim::gridid = grid; iket_tui_sim::now = t;
      blockIdx = {bx, by, bz};
      gridDim = {gx, gy, gz};
      blockDim = {warps * 32u, 1u, 1u};
      for (int lane = 0; lane < 32; ++lane) {
        iket_tui_sim::lane = (unsigned)lane;
        threadIdx = {warp * 32u + (unsigned)lane, 0u, 0u};
        lanes[lane] = new (storage[lane]) iket_tui::Warp(0u);
      }
    } else if (op == 'E') {  // E id payload(0/1) bits t
      unsigned id, payload, bits; unsigned long long t;
      std::scanf("%u %u %u %llu", &id, &payload, &bits, &t);
      iket_tui_sim::now = t;
      for (int lane = 0; lane < 32; ++lane) {
        iket_tui_sim::lane = (unsigned)lane;
        dispatch(*lanes[lane], id, payload != 0u, bits);
      }
    } else if (op == 'S') {  // S: the warp stops here for good
      for (int lane = 0; lane < 32; ++lane) std::memcpy(stopped[n_stopped][lane], lanes[lane], sizeof(iket_tui::Warp));
      ++n_stopped;
    } else if (op == 'X') {  // X t
      unsigned long long t;
      std::scanf("%llu", &t);
      iket_tui_sim::now = t;
      for (int lane = 0; lane < 32; ++lane) {
        iket_tui_sim::lane = (unsigned)lane;
        lanes[lane]->~Warp();
      }
    }
  }
  return 0;
}
"""


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def build(directory: Path, ring: RingTarget, module: int, id_bits: int) -> Path:
    """Compile the runtime for ``ring`` with the driver; returns the program."""
    cases = []
    for event_id in range(1, range_end_id(id_bits) + 1):
        cases.append(
            f"    case {event_id}u: if (payload) w.event<{event_id}u, true>(bits); "
            f"else w.event<{event_id}u, false>(0u); break;"
        )
    source = SHIM + runtime_source(ring, module, id_bits) + DRIVER.replace("@CASES@", "\n".join(cases))
    path = directory / "warp_sim.cpp"
    path.write_text(source)
    program = directory / "warp_sim"
    cxx = compiler()
    assert cxx is not None
    subprocess.run(
        [cxx, "-std=c++17", "-O1", "-o", str(program), str(path)], check=True, capture_output=True, text=True
    )
    return program


@dataclass(frozen=True)
class SimWarp:
    """One warp of a script: where it runs and its events ``(id, payload bits or None, t_ns)``."""

    sm: int
    slot: int
    block: tuple[int, int, int]
    warp: int
    events: list[tuple[int, int | None, int]]
    grid: int = 1
    warps_per_block: int = 4
    grid_dim: tuple[int, int, int] = (1, 1, 1)
    end_ns: int | None = None
    start_ns: int | None = None
    """When the warp begins (default: at its first event)."""
    stops: bool = False
    """The warp never ends (it hangs after its events)."""


def script(warps: Iterable[SimWarp]) -> str:
    lines = []
    for w in warps:
        start = w.start_ns if w.start_ns is not None else (w.events[0][2] if w.events else 0)
        lines.append(
            f"W {w.sm} {w.slot} {w.grid} {w.block[0]} {w.block[1]} {w.block[2]} {w.warp} {w.warps_per_block} {start}"
            f" {w.grid_dim[0]} {w.grid_dim[1]} {w.grid_dim[2]}"
        )
        for event_id, bits, t in w.events:
            lines.append(f"E {event_id} {0 if bits is None else 1} {bits or 0} {t}")
        if w.stops:
            lines.append("S")
            continue
        end = w.end_ns if w.end_ns is not None else (w.events[-1][2] if w.events else start)
        lines.append(f"X {end}")
    return "\n".join(lines) + "\n"


def run(program: Path, ring_path: Path, size: int, warps: Iterable[SimWarp]) -> None:
    subprocess.run(
        [str(program), str(ring_path), str(size)], input=script(warps), check=True, capture_output=True, text=True
    )
