// The device side of the iket-tui kernel event ring: a per-warp log that TileLang's IKET
// macros (TL_IKET_EVENT, TL_IKET_EVENT_PAYLOAD_U32/F32) are defined to write into.
//
// iket_tui/ring/device.py pastes this file into every generated CUDA module that has events,
// after the #defines listed below, and opens a log (`iket_tui::Warp __iket_tui_warp(kernel)`) as the
// first statement of each kernel with events; the log's destructor finishes the warp.
// docs/ring.md describes the bytes it writes and the order it writes them in.
//
// An event runs on the kernel's own critical path, so it is as short as it can be: a timer read
// and one 16-byte store into the warp's segment of a ring in device memory, at an offset held in
// a register. No staging, no branch, no fence: each record carries its own sequence stamp, and
// the host (which copies the ring with a DMA engine) takes a record only when its stamp is the
// one expected at that position. Because every event reaches device memory at once, a warp that
// never executes another instruction still shows every event it ran.
//
// What the includer defines (all integers, with their C suffixes):
//   IKET_TUI_RING_ADDRESS        the ring, in device memory
//   IKET_TUI_COUNTERS_OFFSET, IKET_TUI_RECORDS_OFFSET, IKET_TUI_SEGMENTS,
//   IKET_TUI_RECORDS_PER_SEGMENT the ring's geometry (records per segment: a power of two)
//   IKET_TUI_WARPS_STARTED_OFFSET, IKET_TUI_WARPS_ENDED_OFFSET
//                                the header's two warp counters
//   IKET_TUI_WARP_SLOTS, IKET_TUI_RECORD_BEGIN, IKET_TUI_RECORD_LAUNCH, IKET_TUI_RECORD_BLOCK,
//   IKET_TUI_RECORD_END, IKET_TUI_END_PARTIAL, IKET_TUI_END_DIVERGED
//   IKET_TUI_MODULE, IKET_TUI_ID_BITS, IKET_TUI_RANGE_END_ID, IKET_TUI_TOKENLESS_END_ID
//                                the module and its event ids
// IKET_TUI_HOST_SIMULATION builds the same log for the host, one object per lane, for tests
// (tests/ring/ring_warp_sim.py supplies the iket_tui_sim state it reads).

#ifndef IKET_TUI_DEVICE_RUNTIME_CUH
#define IKET_TUI_DEVICE_RUNTIME_CUH

#if !defined(IKET_TUI_RING_ADDRESS) || !defined(IKET_TUI_COUNTERS_OFFSET) || !defined(IKET_TUI_RECORDS_OFFSET) || \
    !defined(IKET_TUI_SEGMENTS) || !defined(IKET_TUI_RECORDS_PER_SEGMENT) ||                                       \
    !defined(IKET_TUI_WARPS_STARTED_OFFSET) || !defined(IKET_TUI_WARPS_ENDED_OFFSET) ||                            \
    !defined(IKET_TUI_WARP_SLOTS) || !defined(IKET_TUI_RECORD_BEGIN) || !defined(IKET_TUI_RECORD_LAUNCH) ||        \
    !defined(IKET_TUI_RECORD_BLOCK) || !defined(IKET_TUI_RECORD_END) || !defined(IKET_TUI_END_PARTIAL) ||          \
    !defined(IKET_TUI_END_DIVERGED) || !defined(IKET_TUI_MODULE) || !defined(IKET_TUI_ID_BITS) ||                  \
    !defined(IKET_TUI_RANGE_END_ID) || !defined(IKET_TUI_TOKENLESS_END_ID)
#error "the iket-tui device runtime needs the ring's, the layout's and the module's #defines (see its first lines)"
#endif

namespace iket_tui {
constexpr unsigned long long kRing = IKET_TUI_RING_ADDRESS;
constexpr unsigned long long kCountersOffset = IKET_TUI_COUNTERS_OFFSET;
constexpr unsigned long long kRecordsOffset = IKET_TUI_RECORDS_OFFSET;
constexpr unsigned long long kWarpsStarted = IKET_TUI_RING_ADDRESS + IKET_TUI_WARPS_STARTED_OFFSET;
constexpr unsigned long long kWarpsEnded = IKET_TUI_RING_ADDRESS + IKET_TUI_WARPS_ENDED_OFFSET;
constexpr unsigned kSegments = IKET_TUI_SEGMENTS;
constexpr unsigned kCapMask = IKET_TUI_RECORDS_PER_SEGMENT - 1u;
constexpr unsigned long long kSegmentBytes = 16ull * IKET_TUI_RECORDS_PER_SEGMENT;
constexpr unsigned kOffsetMask = (unsigned)(kSegmentBytes - 1ull);
constexpr unsigned kWarpSlots = IKET_TUI_WARP_SLOTS;
constexpr unsigned kModule = IKET_TUI_MODULE;
constexpr unsigned kIdBits = IKET_TUI_ID_BITS;
constexpr unsigned kIdMask = (1u << kIdBits) - 1u;
constexpr unsigned kEndId = IKET_TUI_RANGE_END_ID;
constexpr unsigned kTokenlessEndId = IKET_TUI_TOKENLESS_END_ID;
constexpr unsigned kBegin = IKET_TUI_RECORD_BEGIN << 8;
constexpr unsigned kLaunch = IKET_TUI_RECORD_LAUNCH << 8;
constexpr unsigned kBlock = IKET_TUI_RECORD_BLOCK << 8;
constexpr unsigned kEnd = IKET_TUI_RECORD_END << 8;
constexpr unsigned kEndPartial = IKET_TUI_END_PARTIAL;
constexpr unsigned kEndDiverged = IKET_TUI_END_DIVERGED;
static_assert((kCapMask & (kCapMask + 1u)) == 0u, "records per segment must be a power of two");
static_assert(kSegmentBytes <= (1ull << 32), "an event's byte offset in its segment is 32 bits");

#if defined(IKET_TUI_HOST_SIMULATION)
__device__ __forceinline__ unsigned long long timer() { return iket_tui_sim::now; }
__device__ __forceinline__ unsigned special_laneid() { return iket_tui_sim::lane; }
__device__ __forceinline__ unsigned special_smid() { return iket_tui_sim::smid; }
__device__ __forceinline__ unsigned special_warpid() { return iket_tui_sim::warpid; }
__device__ __forceinline__ unsigned long long special_gridid() { return iket_tui_sim::gridid; }
__device__ __forceinline__ void store_record(unsigned long long address, unsigned word, unsigned hi, unsigned payload,
                                             unsigned stamp) {
  iket_tui_sim::store_record(address, word, hi, payload, stamp);
}
__device__ __forceinline__ void load_counters(unsigned long long address, unsigned& next, unsigned& events) {
  next = ((volatile unsigned*)address)[0];
  events = ((volatile unsigned*)address)[1];
}
__device__ __forceinline__ void store_counters(unsigned long long address, unsigned next, unsigned events) {
  ((volatile unsigned*)address)[0] = next;
  ((volatile unsigned*)address)[1] = events;
}
__device__ __forceinline__ void count_warp(bool first, unsigned long long address) {
  if (first) *(volatile unsigned long long*)address += 1ull;
}
#else
// All 64 bits: ptxas then reads the timer with CS2R; a read of the low half alone became a
// costlier S2UR (docs/ring.md). Volatile, so it is never merged, dropped or reordered against the
// other events, but no compiler barrier: the kernel's own loads and stores stay free to be
// scheduled across an event (with a "memory" clobber here and on the store, the H200 k-step GEMM
// measured the same: benchmarks/gpu_ring_variants.py).
__device__ __forceinline__ unsigned long long timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned special_laneid() {
  unsigned v;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(v));
  return v;
}

__device__ __forceinline__ unsigned special_smid() {
  unsigned v;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
  return v;
}

__device__ __forceinline__ unsigned special_warpid() {
  unsigned v;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(v));
  return v;
}

__device__ __forceinline__ unsigned long long special_gridid() {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(v));
  return v;
}

// One record, one instruction: every active lane stores the same 16 bytes to the same address,
// which the memory system merges into one write (the payload is that of one of the lanes).
__device__ __forceinline__ void store_record(unsigned long long address, unsigned word, unsigned hi, unsigned payload,
                                             unsigned stamp) {
#if defined(IKET_TUI_STORE_RECORD)
  IKET_TUI_STORE_RECORD;
#else
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(word), "r"(hi), "r"(payload),
               "r"(stamp));
#endif
}

// Where the last warp in this slot stopped. A weak load: only warps of this SM ever store these
// counters, so its caches see their last value (a strong .sys or volatile load here hung
// TileLang's warp-specialized kernels on the H200: docs/ring.md).
__device__ __forceinline__ void load_counters(unsigned long long address, unsigned& next, unsigned& events) {
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(next), "=r"(events) : "l"(address) : "memory");
}

__device__ __forceinline__ void store_counters(unsigned long long address, unsigned next, unsigned events) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(address), "r"(next), "r"(events) : "memory");
}

// One lane adds one to a warp counter of the header: a predicated reduction, no branch.
__device__ __forceinline__ void count_warp(bool first, unsigned long long address) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p red.relaxed.gpu.global.add.u64 [%1], 1;\n\t}" ::"r"(
                   (unsigned)first),
               "l"(address)
               : "memory");
}
#endif

// The log of one warp: where its segment's records lie, its position in them, and what the
// segment's counters become when it ends. Every lane holds the same values.
//
// An event finds its slot from `off`, the next slot's byte offset in the segment, added to the
// slab and then moved on by 16 and wrapped with a mask: not from `pos` (`slab + 16 * (pos & mask)`,
// as the warp's own records do). The position stays for the stamp. One register more, but on
// the H200 k-step GEMM the offset costs less than the position (the same ring, in one run:
// benchmarks/gpu_ring_variants.py, `off32`; docs/ring.md gives the figures and what else was tried).
struct Warp {
  unsigned long long slab;  // the segment's first record
  unsigned pos;             // the next record's position in the segment
  unsigned off;             // the byte offset of the next record's slot in the segment: 16 * (pos & mask)
  unsigned events_base;     // the segment's events before this warp, minus the warp's first event position

  __device__ __forceinline__ explicit Warp(unsigned kernel) {
    const unsigned lane = special_laneid();
    const unsigned sm = special_smid();
    const unsigned seg = (sm * kWarpSlots + (special_warpid() & (kWarpSlots - 1u))) % kSegments;
    slab = kRing + kRecordsOffset + (unsigned long long)seg * kSegmentBytes;
    unsigned events;
    load_counters(kRing + kCountersOffset + 8ull * seg, pos, events);
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned long long grid = special_gridid();
    const unsigned long long now = timer();
    store_record(slot(pos), kBegin | (kIdBits << 12) | (kernel << 16) | ((tid >> 5) << 24), (unsigned)(now >> 32),
                 (unsigned)now, pos + 1u);
    store_record(slot(pos + 1u), kLaunch | (kModule << 16), (unsigned)grid, blockIdx.x, pos + 2u);
    store_record(slot(pos + 2u), kBlock | (sm << 16), blockIdx.y | (blockIdx.z << 16), events, pos + 3u);
    pos += 3u;
    off = 16u * (pos & kCapMask);
    events_base = events - pos;
    const unsigned mask = __activemask();
    count_warp(lane == (unsigned)(__ffs(mask) - 1), kWarpsStarted);
  }

  // The end record, then the counters for the next warp in this slot: the lanes agree on the
  // furthest position any of them reached.
  __device__ __forceinline__ ~Warp() {
    const unsigned lane = special_laneid();
    const unsigned mask = __activemask();
    const unsigned top = __reduce_max_sync(mask, pos);
    const unsigned flags =
        (mask != 0xffffffffu ? kEndPartial : 0u) | (__match_any_sync(mask, pos) != mask ? kEndDiverged : 0u);
    const unsigned long long now = timer();
    store_record(slot(top), kEnd | (flags << 12), (unsigned)(now >> 32), (unsigned)now, top + 1u);
    const unsigned long long seg = (slab - kRing - kRecordsOffset) / kSegmentBytes;
    store_counters(kRing + kCountersOffset + 8ull * seg, top + 1u, events_base + top);
    count_warp(lane == (unsigned)(__ffs(mask) - 1), kWarpsEnded);
  }

  __device__ __forceinline__ unsigned long long slot(unsigned position) const {
    return slab + 16ull * (position & kCapMask);
  }

  template <unsigned ID, bool PAYLOAD>
  __device__ __forceinline__ void event(unsigned payload) {
    constexpr unsigned id = ID == kTokenlessEndId ? kEndId : ID;
    const unsigned long long now = timer();
    store_record(slab + off, ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, pos + 1u);
    off = (off + 16u) & kOffsetMask;
    pos += 1u;
  }
};
}  // namespace iket_tui

// TileLang's IKET macros, on the log that each kernel with events opens first.
#define TL_IKET_EVENT(ID, ...) __iket_tui_warp.event<(ID), false>(0u)
#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>((unsigned)(VALUE))
#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>(__float_as_uint((float)(VALUE)))

#endif  // IKET_TUI_DEVICE_RUNTIME_CUH
