// The device side of the iket-tui kernel event ring: a per-warp log that TileLang's IKET
// macros (TL_IKET_EVENT, TL_IKET_EVENT_PAYLOAD_U32/F32) are defined to write into.
//
// iket_tui/ring/device.py pastes this file into every generated CUDA module that has events,
// after the #defines listed below, and opens a log (`iket_tui::Warp __iket_tui_warp(kernel)`) as the
// first statement of each kernel with events; the log's destructor finishes the warp.
// docs/ring.md describes the bytes it writes and the order it writes them in.
//
// A warp claims a region of the ring when it begins (one atomic add by one lane, on the claim
// counter of its SM's stripe: IKET_TUI_CLAIM_STRIPES counters, one as the ring is now), says who it is
// in the region's descriptor, and writes its events into the region. An event runs on the
// kernel's own critical path, so it is as short as it can be: a timer read and one 16-byte store
// at an offset held in a register. No staging, no branch, no fence: each record carries its own
// stamp, and the host (which copies the ring with a DMA engine) takes a record only when its
// stamp is the one expected at that position. Because every event reaches device memory at
// once, a warp that never executes another instruction still shows every event it ran.
//
// What the includer defines (all integers, with their C suffixes):
//   IKET_TUI_RING_ADDRESS        the ring, in device memory
//   IKET_TUI_DESCRIPTORS_OFFSET, IKET_TUI_RECORDS_OFFSET, IKET_TUI_REGION_BITS,
//   IKET_TUI_RECORDS_PER_REGION  the ring's geometry (regions: 1 << IKET_TUI_REGION_BITS; records per
//                                region: a power of two)
//   IKET_TUI_CLAIMS_OFFSET, IKET_TUI_CLAIM_STRIPES, IKET_TUI_WARPS_ENDED_OFFSET, IKET_TUI_EVENTS_ENDED_OFFSET
//                                the header's claim counters (one per stripe, 8 bytes each) and warp counters
//   IKET_TUI_STAMP_LAP_SHIFT, IKET_TUI_END_COUNT_BITS, IKET_TUI_END_PARTIAL, IKET_TUI_END_DIVERGED
//   IKET_TUI_MODULE, IKET_TUI_ID_BITS, IKET_TUI_RANGE_END_ID, IKET_TUI_TOKENLESS_END_ID
//                                the module and its event ids
// IKET_TUI_HOST_SIMULATION builds the same log for the host, one object per lane, for tests
// (tests/ring/ring_warp_sim.py supplies the iket_tui_sim state it reads).

#ifndef IKET_TUI_DEVICE_RUNTIME_CUH
#define IKET_TUI_DEVICE_RUNTIME_CUH

#if !defined(IKET_TUI_RING_ADDRESS) || !defined(IKET_TUI_DESCRIPTORS_OFFSET) || !defined(IKET_TUI_RECORDS_OFFSET) || \
    !defined(IKET_TUI_REGION_BITS) || !defined(IKET_TUI_RECORDS_PER_REGION) || !defined(IKET_TUI_CLAIMS_OFFSET) ||   \
    !defined(IKET_TUI_WARPS_ENDED_OFFSET) || !defined(IKET_TUI_EVENTS_ENDED_OFFSET) ||                               \
    !defined(IKET_TUI_STAMP_LAP_SHIFT) || !defined(IKET_TUI_END_COUNT_BITS) || !defined(IKET_TUI_END_PARTIAL) ||    \
    !defined(IKET_TUI_END_DIVERGED) || !defined(IKET_TUI_MODULE) || !defined(IKET_TUI_ID_BITS) ||                  \
    !defined(IKET_TUI_RANGE_END_ID) || !defined(IKET_TUI_TOKENLESS_END_ID) || !defined(IKET_TUI_CLAIM_STRIPES)
#error "the iket-tui device runtime needs the ring's, the layout's and the module's #defines (see its first lines)"
#endif

namespace iket_tui {
constexpr unsigned long long kDescriptors = IKET_TUI_RING_ADDRESS + IKET_TUI_DESCRIPTORS_OFFSET;
constexpr unsigned long long kRecords = IKET_TUI_RING_ADDRESS + IKET_TUI_RECORDS_OFFSET;
constexpr unsigned long long kClaims = IKET_TUI_RING_ADDRESS + IKET_TUI_CLAIMS_OFFSET;
constexpr unsigned kStripes = IKET_TUI_CLAIM_STRIPES;
constexpr unsigned long long kWarpsEnded = IKET_TUI_RING_ADDRESS + IKET_TUI_WARPS_ENDED_OFFSET;
constexpr unsigned long long kEventsEnded = IKET_TUI_RING_ADDRESS + IKET_TUI_EVENTS_ENDED_OFFSET;
constexpr unsigned kRegionBits = IKET_TUI_REGION_BITS;
constexpr unsigned kRegionMask = (1u << kRegionBits) - 1u;
constexpr unsigned long long kRegionBytes = 16ull * IKET_TUI_RECORDS_PER_REGION;
constexpr unsigned kOffsetMask = (unsigned)(kRegionBytes - 1ull);
constexpr unsigned kLapShift = IKET_TUI_STAMP_LAP_SHIFT;
constexpr unsigned kCountBits = IKET_TUI_END_COUNT_BITS;
constexpr unsigned kModule = IKET_TUI_MODULE;
constexpr unsigned kIdBits = IKET_TUI_ID_BITS;
constexpr unsigned kIdMask = (1u << kIdBits) - 1u;
constexpr unsigned kEndId = IKET_TUI_RANGE_END_ID;
constexpr unsigned kTokenlessEndId = IKET_TUI_TOKENLESS_END_ID;
constexpr unsigned kEndPartial = IKET_TUI_END_PARTIAL;
constexpr unsigned kEndDiverged = IKET_TUI_END_DIVERGED;
static_assert((IKET_TUI_RECORDS_PER_REGION & (IKET_TUI_RECORDS_PER_REGION - 1u)) == 0u,
              "records per region must be a power of two");
static_assert(kRegionBytes <= (1ull << 32), "an event's byte offset in its region is 32 bits");
static_assert((kStripes & (kStripes - 1u)) == 0u, "claim stripes must be a power of two");

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
// The claim: the leader takes the next claim number, every lane then reads it (lanes run one
// after another here, leader first).
__device__ __forceinline__ unsigned long long claim_region(bool leader, unsigned, unsigned long long counter) {
  if (leader) iket_tui_sim::claimed = (*(volatile unsigned long long*)counter)++;
  return iket_tui_sim::claimed;
}
__device__ __forceinline__ void add_to_counter(bool leader, unsigned long long address, unsigned long long value) {
  if (leader) *(volatile unsigned long long*)address += value;
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

// One lane claims the warp's region (an atomic add on the header's claim counter, predicated: no
// branch) and hands the claim to the others. The result is first needed by the descriptor's
// stores, so its round trip overlaps the timer and special-register reads before them.
__device__ __forceinline__ unsigned long long claim_region(bool leader, unsigned mask, unsigned long long counter) {
  unsigned long long claim = 0ull;
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\t@p atom.relaxed.gpu.global.add.u64 %0, [%2], 1;\n\t}"
               : "+l"(claim)
               : "r"((unsigned)leader), "l"(counter)
               : "memory");
  return __shfl_sync(mask, claim, __ffs(mask) - 1);
}

// One lane adds to a counter of the header: a predicated reduction, no branch.
__device__ __forceinline__ void add_to_counter(bool leader, unsigned long long address, unsigned long long value) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p red.relaxed.gpu.global.add.u64 [%1], %2;\n\t}" ::"r"(
                   (unsigned)leader),
               "l"(address), "l"(value)
               : "memory");
}
#endif

// The log of one warp: its claim, where its region's records lie, where the next record goes and
// the stamp it carries. Every lane holds the same values.
//
// An event finds its slot from `off`, the next slot's byte offset in the region, added to the
// slab and then moved on by 16 and wrapped with a mask (a warp that writes more than its region
// holds laps its own region, keeping its newest records); the stamp counts up by one. On the
// H200 k-step GEMM the register-held offset costs less than deriving the address from a position
// (benchmarks/gpu_ring_variants.py, `off32`; docs/ring.md gives the figures).
struct Warp {
  unsigned long long slab;  // the region's first record
  unsigned off;             // the byte offset of the next record's slot in the region
  unsigned stamp;           // the next record's stamp: the claim's stamp base + the record's position
  unsigned claim;           // the low 32 bits of the claim: its stripe's count * kStripes + the stripe (the region
                            // is claim & kRegionMask)

  __device__ __forceinline__ explicit Warp(unsigned kernel) {
    const unsigned lane = special_laneid();
    const unsigned mask = __activemask();
    const bool leader = lane == (unsigned)(__ffs(mask) - 1);
    const unsigned sm = special_smid();
    const unsigned stripe = sm & (kStripes - 1u);
    const unsigned long long taken = claim_region(leader, mask, kClaims + 8ull * stripe) * kStripes + stripe;
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31u) >> 5;
    const unsigned long long grid = special_gridid();
    const unsigned long long now = timer();
    claim = (unsigned)taken;
    stamp = ((unsigned)(taken >> kRegionBits) << kLapShift) + 1u;
    off = 0u;
    const unsigned region = claim & kRegionMask;
    slab = kRecords + (unsigned long long)region * kRegionBytes;
    const unsigned long long d = kDescriptors + 64ull * region;
    const unsigned tag = claim + 1u;  // never 0: a descriptor never written names no claim
    store_record(d, tag, (unsigned)grid, blockIdx.x, blockIdx.y | (blockIdx.z << 16));
    store_record(d + 16ull, tag, (kModule << 16) | (kernel << 8) | (tid >> 5), (unsigned)now, (unsigned)(now >> 32));
    store_record(d + 32ull, tag, sm | (kIdBits << 8) | (warps << 16), gridDim.x, gridDim.y | (gridDim.z << 16));
  }

  // The end: the lanes agree on the furthest record any of them wrote, then the descriptor's end
  // part, then the header's counters of warps and records ended.
  __device__ __forceinline__ ~Warp() {
    const unsigned lane = special_laneid();
    const unsigned mask = __activemask();
    const unsigned base = ((claim >> kRegionBits) << kLapShift) + 1u;
    const unsigned count = __reduce_max_sync(mask, stamp - base);
    const unsigned flags =
        (mask != 0xffffffffu ? kEndPartial : 0u) | (__match_any_sync(mask, stamp) != mask ? kEndDiverged : 0u);
    const unsigned long long now = timer();
    store_record(kDescriptors + 64ull * (claim & kRegionMask) + 48ull, claim + 1u, (unsigned)now,
                 (unsigned)(now >> 32), count | (flags << kCountBits));
    const bool leader = lane == (unsigned)(__ffs(mask) - 1);
    add_to_counter(leader, kWarpsEnded, 1ull);
    add_to_counter(leader, kEventsEnded, (unsigned long long)count);
  }

  template <unsigned ID, bool PAYLOAD>
  __device__ __forceinline__ void event(unsigned payload) {
    constexpr unsigned id = ID == kTokenlessEndId ? kEndId : ID;
    const unsigned long long now = timer();
    store_record(slab + off, ((unsigned)now & ~kIdMask) | id, (unsigned)(now >> 32), PAYLOAD ? payload : 0u, stamp);
    off = (off + 16u) & kOffsetMask;
    stamp += 1u;
  }
};
}  // namespace iket_tui

// TileLang's IKET macros, on the log that each kernel with events opens first.
#define TL_IKET_EVENT(ID, ...) __iket_tui_warp.event<(ID), false>(0u)
#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>((unsigned)(VALUE))
#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>(__float_as_uint((float)(VALUE)))

#endif  // IKET_TUI_DEVICE_RUNTIME_CUH
