// The device side of the iket-tui kernel event ring: a per-warp log that TileLang's IKET
// macros (TL_IKET_EVENT, TL_IKET_EVENT_PAYLOAD_U32/F32) are defined to write into.
//
// iket_tui/ring/device.py pastes this file into every generated CUDA module that has events,
// after the #defines listed below, and opens a log (`iket_tui::Warp __iket_tui_warp(kernel)`) as the
// first statement of each kernel with events; the log's destructor finishes the warp.
// docs/ring.md describes the bytes it writes and the order it writes them in.
//
// An event runs on the kernel's own critical path, so it stays short, branch-free and
// warp-uniform: a timer read, a select into one lane's staging register, positions held in
// registers. The one branch (flush when the chunk is full or its first event is getting old)
// is taken by the whole warp at once; the costly fence runs once per kPublishEvery chunks and
// waits only for stores issued long before.
//
// What the includer defines (all integers, with their C suffixes):
//   IKET_TUI_RING_ADDRESS        the ring (host pointer = device pointer under UVA)
//   IKET_TUI_COUNTERS_OFFSET, IKET_TUI_CHUNKS_OFFSET, IKET_TUI_SEGMENTS,
//   IKET_TUI_CHUNKS_PER_SEGMENT  the ring's geometry (chunks per segment: a power of two)
//   IKET_TUI_CHUNK_BYTES, IKET_TUI_WORDS_PER_LANE, IKET_TUI_HEADER_WORDS,
//   IKET_TUI_FIRST_EVENT, IKET_TUI_LAST_PAYLOAD, IKET_TUI_TAIL
//                                the chunk layout (word indices)
//   IKET_TUI_WARP_SLOTS, IKET_TUI_PUBLISH_EVERY, IKET_TUI_FLUSH_NS,
//   IKET_TUI_FLAG_WARP_END, IKET_TUI_FLAG_PARTIAL_WARP, IKET_TUI_FLAG_DIVERGED
//   IKET_TUI_MODULE, IKET_TUI_ID_BITS, IKET_TUI_RANGE_END_ID, IKET_TUI_TOKENLESS_END_ID
//                                the module and its event ids
//   IKET_TUI_FENCE               one of the IKET_TUI_FENCE_* values below
//   IKET_TUI_PACK_WARP_HEADER    statements setting `hdr`, lane i's header word i, from the
//                                fields fixed for the warp (`lane`, `kernel_warp`, `grid`,
//                                blockIdx, kModule, kIdBits), once when the warp starts
//   IKET_TUI_PACK_CHUNK_HEADER   statements setting `own` from the chunk's own fields (`seq`,
//                                `events`, `flags`, `pe`, `pp`, `deadline`) at each flush
// IKET_TUI_HOST_SIMULATION builds the same log for the host, one object per lane, for tests
// (tests/ring/ring_warp_sim.py supplies the iket_tui_sim state it reads).

#ifndef IKET_TUI_DEVICE_RUNTIME_CUH
#define IKET_TUI_DEVICE_RUNTIME_CUH

#if !defined(IKET_TUI_RING_ADDRESS) || !defined(IKET_TUI_COUNTERS_OFFSET) || !defined(IKET_TUI_CHUNKS_OFFSET) || \
    !defined(IKET_TUI_SEGMENTS) || !defined(IKET_TUI_CHUNKS_PER_SEGMENT) || !defined(IKET_TUI_CHUNK_BYTES) ||     \
    !defined(IKET_TUI_WORDS_PER_LANE) || !defined(IKET_TUI_HEADER_WORDS) || !defined(IKET_TUI_FIRST_EVENT) ||     \
    !defined(IKET_TUI_LAST_PAYLOAD) || !defined(IKET_TUI_TAIL) || !defined(IKET_TUI_WARP_SLOTS) ||                \
    !defined(IKET_TUI_PUBLISH_EVERY) || !defined(IKET_TUI_FLUSH_NS) || !defined(IKET_TUI_FLAG_WARP_END) ||        \
    !defined(IKET_TUI_FLAG_PARTIAL_WARP) || !defined(IKET_TUI_FLAG_DIVERGED) || !defined(IKET_TUI_MODULE) ||      \
    !defined(IKET_TUI_ID_BITS) || !defined(IKET_TUI_RANGE_END_ID) || !defined(IKET_TUI_TOKENLESS_END_ID) ||       \
    !defined(IKET_TUI_FENCE) || !defined(IKET_TUI_PACK_WARP_HEADER) || !defined(IKET_TUI_PACK_CHUNK_HEADER)
#error "the iket-tui device runtime needs the ring's, the layout's and the module's #defines (see its first lines)"
#endif

// The fence between stored chunks and their tags (RingTarget.fence): acq_rel by default;
// release, acq_rel_gpu and none are for measuring only (docs/ring.md says why).
#define IKET_TUI_FENCE_SC 1          // __threadfence_system(), fence.sc.sys
#define IKET_TUI_FENCE_ACQ_REL 2     // fence.acq_rel.sys
#define IKET_TUI_FENCE_RELEASE 3     // fence.release.sys
#define IKET_TUI_FENCE_ACQ_REL_GPU 4 // fence.acq_rel.gpu: orders nothing for the host
#define IKET_TUI_FENCE_NONE 5        // a compiler barrier only

namespace iket_tui {
constexpr unsigned long long kRing = IKET_TUI_RING_ADDRESS;
constexpr unsigned long long kCountersOffset = IKET_TUI_COUNTERS_OFFSET;
constexpr unsigned long long kChunksOffset = IKET_TUI_CHUNKS_OFFSET;
constexpr unsigned kSegments = IKET_TUI_SEGMENTS;
constexpr unsigned kCapMask = IKET_TUI_CHUNKS_PER_SEGMENT - 1u;
constexpr unsigned kChunkBytes = IKET_TUI_CHUNK_BYTES;
constexpr unsigned kWordsPerLane = IKET_TUI_WORDS_PER_LANE;
constexpr unsigned kHeaderWords = IKET_TUI_HEADER_WORDS;
constexpr unsigned kWarpSlots = IKET_TUI_WARP_SLOTS;
constexpr unsigned kFirstEvent = IKET_TUI_FIRST_EVENT;
constexpr unsigned kLastPayload = IKET_TUI_LAST_PAYLOAD;
constexpr unsigned kTail = IKET_TUI_TAIL;
constexpr unsigned kFlushNs = IKET_TUI_FLUSH_NS;
constexpr unsigned kPublishEvery = IKET_TUI_PUBLISH_EVERY;
constexpr unsigned kModule = IKET_TUI_MODULE;
constexpr unsigned kIdBits = IKET_TUI_ID_BITS;
constexpr unsigned kIdMask = (1u << kIdBits) - 1u;
constexpr unsigned kEndId = IKET_TUI_RANGE_END_ID;
constexpr unsigned kTokenlessEndId = IKET_TUI_TOKENLESS_END_ID;
constexpr unsigned kFlagWarpEnd = IKET_TUI_FLAG_WARP_END;
constexpr unsigned kFlagPartialWarp = IKET_TUI_FLAG_PARTIAL_WARP;
constexpr unsigned kFlagDiverged = IKET_TUI_FLAG_DIVERGED;
static_assert((kCapMask & (kCapMask + 1u)) == 0u, "chunks per segment must be a power of two");
static_assert(kHeaderWords <= 32u, "the chunk header must fit in one word per lane");

#if defined(IKET_TUI_HOST_SIMULATION)
__device__ __forceinline__ void publish_fence() {}
__device__ __forceinline__ unsigned long long timer() { return iket_tui_sim::now; }
__device__ __forceinline__ unsigned special_laneid() { return iket_tui_sim::lane; }
__device__ __forceinline__ unsigned special_smid() { return iket_tui_sim::smid; }
__device__ __forceinline__ unsigned special_warpid() { return iket_tui_sim::warpid; }
__device__ __forceinline__ unsigned long long special_gridid() { return iket_tui_sim::gridid; }
__device__ __forceinline__ void store_if(bool on, unsigned long long address, unsigned value) {
  if (on) *(volatile unsigned*)address = value;
}
__device__ __forceinline__ void store_counters_lane0(unsigned lane, unsigned long long address, unsigned chunks,
                                                     unsigned events) {
  if (lane == 0u) {
    ((volatile unsigned*)address)[0] = chunks;
    ((volatile unsigned*)address)[1] = events;
  }
}
__device__ __forceinline__ void store_word(unsigned long long address, unsigned value) {
  *(volatile unsigned*)address = value;
}
__device__ __forceinline__ void load_counters(unsigned long long address, unsigned& chunks, unsigned& events) {
  chunks = ((volatile unsigned*)address)[0];
  events = ((volatile unsigned*)address)[1];
}
#else
// All 64 bits: ptxas then reads the timer with CS2R; a read of the low half alone became a
// costlier S2UR (docs/ring.md).
__device__ __forceinline__ unsigned long long timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
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

__device__ __forceinline__ void publish_fence() {
#if IKET_TUI_FENCE == IKET_TUI_FENCE_SC
  __threadfence_system();
#elif IKET_TUI_FENCE == IKET_TUI_FENCE_ACQ_REL
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#elif IKET_TUI_FENCE == IKET_TUI_FENCE_RELEASE
  asm volatile("fence.release.sys;" ::: "memory");
#elif IKET_TUI_FENCE == IKET_TUI_FENCE_ACQ_REL_GPU
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#elif IKET_TUI_FENCE == IKET_TUI_FENCE_NONE
  asm volatile("" ::: "memory");
#else
#error "IKET_TUI_FENCE names none of the IKET_TUI_FENCE_* fences"
#endif
}

// The lanes for which `on` holds store, each to its own address: a predicated store, no branch.
__device__ __forceinline__ void store_if(bool on, unsigned long long address, unsigned value) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.relaxed.sys.global.u32 [%1], %2;\n\t}"
               :: "r"((unsigned)on), "l"(address), "r"(value) : "memory");
}

__device__ __forceinline__ void store_counters_lane0(unsigned lane, unsigned long long address, unsigned chunks,
                                                     unsigned events) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.eq.u32 p, %0, 0;\n\t@p st.relaxed.sys.global.v2.u32 [%1], {%2, %3};\n\t}"
               :: "r"(lane), "l"(address), "r"(chunks), "r"(events) : "memory");
}

__device__ __forceinline__ void store_word(unsigned long long address, unsigned value) {
  asm volatile("st.global.u32 [%0], %1;" :: "l"(address), "r"(value) : "memory");
}

// Where the last warp in this slot stopped: a load from host memory, needed only at the first
// flush, so its latency hides behind the kernel's own work. A weak load: only warps of this SM
// ever store these counters, so its caches see their last value (a strong .relaxed.sys or
// volatile load here hung TileLang's warp-specialized kernels: docs/ring.md).
__device__ __forceinline__ void load_counters(unsigned long long address, unsigned& chunks, unsigned& events) {
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(chunks), "=r"(events) : "l"(address) : "memory");
}
#endif

// The log of one warp: its segment, its place in it, and the chunk it stages in registers
// (word w of the chunk lives in lane w % 32, register w / 32). Every lane holds the same
// positions; only the staged words differ.
struct Warp {
  unsigned lane;
  unsigned seg;
  unsigned kernel_warp;  // kernel index | warp index << 8
  unsigned seq;          // this chunk's sequence number in the segment
  unsigned events;       // events of the segment before this chunk
  unsigned pe;           // next event word
  unsigned pp;           // next payload word (payloads fill from the back)
  unsigned pending;      // chunks stored but not yet published (at most kPublishEvery)
  unsigned long long deadline;  // t_base (%globaltimer no later than any event staged) + kFlushNs
  unsigned hdr;          // header word `lane` (lanes below the header's size), fields fixed for the warp
  unsigned r[kWordsPerLane];

  __device__ __forceinline__ explicit Warp(unsigned kernel) {
    lane = special_laneid();
    seg = (special_smid() * kWarpSlots + (special_warpid() & (kWarpSlots - 1u))) % kSegments;
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    kernel_warp = kernel | ((tid >> 5) << 8);
    load_counters(kRing + kCountersOffset + 8ull * seg, seq, events);
    pe = kFirstEvent;
    pp = kLastPayload;
    pending = 0u;
    const unsigned long long grid = special_gridid();
    hdr = 0u;
    IKET_TUI_PACK_WARP_HEADER;
    deadline = timer() + kFlushNs;
#pragma unroll
    for (unsigned j = 0; j < kWordsPerLane; ++j) r[j] = 0u;
  }

  __device__ __forceinline__ ~Warp() {
    if (pe != kFirstEvent || pp != kLastPayload) flush(kFlagWarpEnd);
    if (pending) {
      store_counters_lane0(lane, kRing + kCountersOffset + 8ull * seg, seq, events);
      publish();
    }
  }

  // Fence, then publish every pending chunk: lane i stores the tag of the i-th. One fence for
  // kPublishEvery chunks, stored long before, as were the announcements it orders; only at the
  // warp's end does it wait for a chunk just stored (its last).
  __device__ __forceinline__ void publish() {
    publish_fence();
    const unsigned first = seq - pending;
    store_if(lane < pending, slot(first + lane), first + lane + 1u);
    pending = 0u;
  }

  __device__ __forceinline__ unsigned long long slot(unsigned sequence) const {
    return kRing + kChunksOffset + ((unsigned long long)seg * (kCapMask + 1u) + (sequence & kCapMask)) * kChunkBytes;
  }

  __device__ __forceinline__ void stage(unsigned position, unsigned value) {
#pragma unroll
    for (unsigned j = 0; j < kWordsPerLane; ++j) r[j] = (position == lane + 32u * j) ? value : r[j];
  }

  template <unsigned ID, bool PAYLOAD>
  __device__ __forceinline__ void event(unsigned payload) {
    constexpr unsigned id = ID == kTokenlessEndId ? kEndId : ID;
    const unsigned long long now = timer();
    unsigned t = (unsigned)now;
    const bool full = PAYLOAD ? pe >= pp : pe > pp;
    // The same for every lane: a warp-uniform branch. Against a deadline rather than t_base, the
    // branch waits for two compares after the timer read, not a subtraction and two compares.
    if (full | (now > deadline)) {
      if (pe != kFirstEvent || pp != kLastPayload) flush(0u);
      else deadline = timer() + kFlushNs;
      t = (unsigned)(deadline - kFlushNs);
    }
    stage(pe, (t & ~kIdMask) | id);
    pe += 1u;
    if (PAYLOAD) {
      stage(pp, payload);
      pp -= 1u;
    }
  }

  // Store the staged chunk, first publishing the pending ones if there are kPublishEvery of them.
  // Taken by the whole warp.
  __device__ __forceinline__ void flush(unsigned flags) {
    const unsigned mask = __activemask();
    flags |= mask != 0xffffffffu ? kFlagPartialWarp : 0u;
    flags |= __match_any_sync(mask, pe | (pp << 16)) != mask ? kFlagDiverged : 0u;
    if (pending == kPublishEvery) publish();
    unsigned own = 0u;
    IKET_TUI_PACK_CHUNK_HEADER;
    r[0] = (lane < kHeaderWords) ? (hdr | own) : r[0];
    r[kTail / 32u] = (lane == kTail % 32u) ? seq + 1u : r[kTail / 32u];
    const unsigned long long row = slot(seq);
#pragma unroll
    for (unsigned j = 0; j < kWordsPerLane; ++j) store_word(row + 4ull * (lane + 32u * j), r[j]);
    // Announce the slot kPublishEvery ahead: a fence (a publication) comes between this store and
    // that slot's new body, so a reader never trusts its old body while it is being replaced.
    store_if(lane == 0u, slot(seq + kPublishEvery), 0u);
    events += pe - kFirstEvent;
    seq += 1u;
    pending += 1u;
    pe = kFirstEvent;
    pp = kLastPayload;
#pragma unroll
    for (unsigned j = 0; j < kWordsPerLane; ++j) r[j] = 0u;
    deadline = timer() + kFlushNs;
  }
};
}  // namespace iket_tui

// TileLang's IKET macros, on the log that each kernel with events opens first.
#define TL_IKET_EVENT(ID, ...) __iket_tui_warp.event<(ID), false>(0u)
#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>((unsigned)(VALUE))
#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) __iket_tui_warp.event<(ID), true>(__float_as_uint((float)(VALUE)))

#endif  // IKET_TUI_DEVICE_RUNTIME_CUH
