"""The CUDA side of the ring: the runtime that TileLang's IKET macros are defined to, and the
post-processing that puts it into a module's generated CUDA.

TileLang's frontend leaves ``TL_IKET_EVENT(id, token)``, ``TL_IKET_EVENT(31)`` (a range end)
and ``TL_IKET_EVENT_PAYLOAD_U32/F32(id, value, token)`` in the generated code; every thread
runs them. :func:`inject` reads the event table from the tokens, gives the events module-wide
ids, defines those macros to the runtime below and opens a per-warp log at the top of each
kernel that has events.

The event path is what DESIGN.md measured to be cheap: read ``%globaltimer`` (all 64 bits:
ptxas then reads it with ``CS2R``; a 32-bit read became an ``S2UR`` that cost the H200's k-step
GEMM about 16 points), put ``timestamp | id`` into one lane's staging register with a select, advance
positions that live in registers. No lane-divergent branch: every lane does the same work, and
the one branch (flush when the chunk is full or its first event is getting old) is taken by the
whole warp at once. A flush stores the chunk as coalesced 128-byte rows into the warp's segment
of the host-mapped ring, with the header fields fixed for the warp packed once when it started.
Every :data:`~iket_tui.ring.layout.PUBLISH_EVERY` flushes, and when the warp ends, the stored
chunks are published: one system-scope fence, then their tags, one lane each. The fence is the
costly part of a publication, and it waits only for writes issued long before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from iket_tui.ring.events import TOKEN_PREFIX, EventInfo, EventTableError, ModuleEvents, decode_token
from iket_tui.ring.layout import (
    DEFAULT_FLUSH_NS,
    DEFAULT_LAYOUT,
    DEVICE_MIN_CHUNKS,
    FLAG_DIVERGED,
    FLAG_PARTIAL_WARP,
    FLAG_WARP_END,
    HEADER_WORDS,
    LANES,
    PUBLISH_EVERY,
    RANGE_END_TOKENLESS_ID,
    WARP_SLOTS,
    RingGeometry,
    WordPart,
    id_bits_for,
    range_end_id,
)

MARKER: Final = "iket-tui kernel event runtime"
"""Appears in every module the runtime was put into."""
WARP_VARIABLE: Final = "__iket_tui_warp"

_FENCES: Final = {
    "sc": "__threadfence_system();",
    "acq_rel": 'asm volatile("fence.acq_rel.sys;" ::: "memory");',
    "release": 'asm volatile("fence.release.sys;" ::: "memory");',
    "acq_rel_gpu": 'asm volatile("fence.acq_rel.gpu;" ::: "memory");',
    "none": 'asm volatile("" ::: "memory");',
}
_EVENT_MACROS: Final = ("TL_IKET_EVENT", "TL_IKET_EVENT_PAYLOAD_U32", "TL_IKET_EVENT_PAYLOAD_F32")
_CALL: Final = re.compile(r"\b(?P<macro>TL_IKET_EVENT(?:_PAYLOAD_(?:U32|F32))?)\(\s*(?P<id>[0-9]+)")
_TOKEN: Final = re.compile(r"\"(?P<token>" + re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]+)\"")
_TOKENED_CALL: Final = re.compile(
    r"\b(?P<macro>TL_IKET_EVENT(?:_PAYLOAD_(?:U32|F32))?)\(\s*(?P<id>[0-9]+)(?P<rest>[^\n]*?)"
    r"\"(?P<token>" + re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]+)\"\s*\)"
)
_RANGE_END_CALL: Final = re.compile(r"\bTL_IKET_EVENT\(\s*" + str(RANGE_END_TOKENLESS_ID) + r"\s*\)")
_GLOBAL: Final = re.compile(r"\b__global__\b")
_CALLED_NAME: Final = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\(")


class InjectionError(ValueError):
    """Generated CUDA the runtime cannot instrument; the message is one line."""


@dataclass(frozen=True)
class RingTarget:
    """Where the device writes: the ring's address (host pointer = device pointer under UVA),
    its geometry and its id. Every value is compiled into the module, so a module built for one
    ring must never run against another."""

    address: int
    geometry: RingGeometry
    ring_id: int
    flush_ns: int = DEFAULT_FLUSH_NS
    fence: str = "acq_rel"
    """The fence between chunks' bodies and their tags: ``acq_rel`` (``fence.acq_rel.sys``, which
    orders the bodies before the tags and cost least on an H200), ``sc``
    (``__threadfence_system()``, ``fence.sc.sys``), ``release`` (``fence.release.sys``: enough in
    the memory model, and without ``acq_rel``'s L1 invalidation, but TileLang's warp-specialized
    GEMM hung with it on an H200, as with no fence: for measuring only), ``acq_rel_gpu``
    (``fence.acq_rel.gpu``, enough only for a ring in device memory, which the host cannot read
    while kernels run: for measuring only), or ``none`` (no order: for measuring only)."""

    def __post_init__(self) -> None:
        if self.address <= 0 or self.address % 4096:
            raise ValueError(f"ring address must be a page-aligned pointer, not 0x{self.address:x}")
        if not 0 < self.flush_ns < 1 << 31:
            raise ValueError(f"flush age must be between 1 ns and 2**31 ns, not {self.flush_ns}")
        if self.geometry.chunks_per_segment < DEVICE_MIN_CHUNKS:
            raise ValueError(
                f"a ring the device writes needs at least {DEVICE_MIN_CHUNKS} chunks per segment,"
                f" not {self.geometry.chunks_per_segment}"
            )
        if self.fence not in _FENCES:
            raise ValueError(f"fence must be one of {', '.join(_FENCES)}, not {self.fence!r}")


@dataclass(frozen=True)
class InjectedModule:
    """A module's CUDA with the runtime in it, and its event table (no events: code unchanged)."""

    code: str
    events: ModuleEvents


def recover_events(code: str, module: int = 0) -> tuple[str, ModuleEvents]:
    """The code with module-wide event ids, and the module's event table.

    Events are told apart by (kind, name), numbered from 1 in order of first appearance,
    skipping 31 (the frontend's range-end id); ids of every call are rewritten to match.
    """
    calls = list(_TOKENED_CALL.finditer(code))
    if len(calls) != len(_TOKEN.findall(code)):
        raise InjectionError("an IKET token is not attached to a TL_IKET_EVENT call")
    others = [m for m in _CALL.finditer(code) if not _RANGE_END_CALL.match(code, m.start())]
    if len(others) != len(calls):
        raise InjectionError("a TL_IKET_EVENT call other than a range end carries no token")
    by_key: dict[tuple[str, str], EventInfo] = {}
    ids: list[int] = []
    next_id = 1
    for call in calls:
        try:
            token = decode_token(call.group("token"))
        except EventTableError as exc:
            raise InjectionError(str(exc)) from None
        macro = call.group("macro")
        if (macro == "TL_IKET_EVENT") != (token.payload_type == "none") or (
            macro.endswith("F32") and token.payload_type != "float32"
        ):
            raise InjectionError(f"IKET event {token.name!r}: {macro} does not match payload {token.payload_type}")
        key = (token.kind, token.name)
        known = by_key.get(key)
        if known is None:
            if next_id == RANGE_END_TOKENLESS_ID:
                next_id += 1
            known = EventInfo(next_id, token.name, token.kind, token.payload_type, token.range_id)
            by_key[key] = known
            next_id += 1
        elif known.payload_type != token.payload_type:
            raise InjectionError(
                f"IKET event {token.name!r} is used with payloads {known.payload_type} and {token.payload_type}"
            )
        ids.append(known.event_id)
    events = tuple(by_key.values())
    id_bits = id_bits_for(max((e.event_id for e in events), default=0))
    numbered = iter(ids)

    def renumber(call: re.Match[str]) -> str:
        return f'{call.group("macro")}({next(numbered)}{call.group("rest")}"{call.group("token")}")'

    code = _TOKENED_CALL.sub(renumber, code)
    return code, ModuleEvents(module, id_bits, tuple(kernel_names(code)), events)


def kernel_names(code: str) -> list[str]:
    """The ``__global__`` functions defined (not only declared) in ``code``, in order."""
    return [name for name, _ in _kernel_bodies(code)]


def _kernel_bodies(code: str) -> list[tuple[str, int]]:
    """(name, index just past the opening brace) of each kernel definition."""
    found: list[tuple[str, int]] = []
    for match in _GLOBAL.finditer(code):
        at = match.end()
        while (call := _CALLED_NAME.search(code, at)) is not None:
            end = _matching_paren(code, call.end() - 1)
            name = call.group("name")
            if not (name.startswith("__") and name.endswith("__")):  # __launch_bounds__(...) and the like
                break
            at = end + 1
        if call is None:
            break
        rest = code[end + 1 :].lstrip()
        if rest.startswith("{"):
            found.append((name, len(code) - len(rest) + 1))
    return found


def _matching_paren(code: str, start: int) -> int:
    depth = 0
    for index in range(start, len(code)):
        if code[index] == "(":
            depth += 1
        elif code[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise InjectionError("unbalanced parentheses in a kernel signature")


def inject(code: str, ring: RingTarget | None, module: int) -> InjectedModule:
    """Put the runtime into ``code`` for the ring ``ring`` as module ``module``.

    Code without IKET events comes back unchanged. Without a ring (no GPU) the macros compile
    to nothing but the event table is still recovered, so compiles and tables work everywhere.
    """
    if MARKER in code:
        raise InjectionError("this CUDA already holds the iket-tui runtime")
    if not 0 <= module < 1 << 16:
        raise InjectionError(f"module id {module} does not fit in 16 bits")
    if not any(macro + "(" in code for macro in _EVENT_MACROS):
        return InjectedModule(code, ModuleEvents(module, id_bits_for(0), tuple(kernel_names(code)), ()))
    code, events = recover_events(code, module)
    runtime = runtime_source(ring, module, events.id_bits)
    bodies = _kernel_bodies(code)
    using = [i for i, (_, start) in enumerate(bodies) if _has_events(code, start, bodies, i)]
    pieces: list[str] = []
    last = 0
    for index in using:
        start = bodies[index][1]
        pieces.append(code[last:start])
        if ring is not None:
            pieces.append(f"\n  iket_tui::Warp {WARP_VARIABLE}({index}u);")
        last = start
    pieces.append(code[last:])
    code = "".join(pieces)
    at = _insertion_point(code)
    return InjectedModule(code[:at] + runtime + code[at:], events)


def _has_events(code: str, start: int, bodies: list[tuple[str, int]], index: int) -> bool:
    end = bodies[index + 1][1] if index + 1 < len(bodies) else len(code)
    return _CALL.search(code, start, end) is not None


def _insertion_point(code: str) -> int:
    """Before the first kernel declaration, after the includes."""
    match = re.search(r"^[^\n#]*\b__global__\b", code, re.MULTILINE)
    if match is None:
        raise InjectionError("no __global__ function in the generated CUDA")
    return match.start()


def runtime_source(ring: RingTarget | None, module: int, id_bits: int) -> str:
    """The CUDA runtime for one module: constants, the per-warp log, and the IKET macros."""
    if ring is None:
        return (
            f"// ---- {MARKER}: no ring (no GPU); events compile to nothing, module {module} ----\n"
            "#define TL_IKET_EVENT(ID, ...) ((void)0)\n"
            "#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) ((void)0)\n"
            "#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) ((void)0)\n\n"
        )
    geometry = ring.geometry
    layout = geometry.layout
    constants = {
        "kRing": f"0x{ring.address:x}ull",
        "kCountersOffset": f"{geometry.counters_offset}ull",
        "kChunksOffset": f"{geometry.chunks_offset}ull",
        "kSegments": f"{geometry.segments}u",
        "kCapMask": f"{geometry.chunks_per_segment - 1}u",
        "kChunkBytes": f"{layout.chunk_bytes}u",
        "kWordsPerLane": f"{layout.words_per_lane}u",
        "kWarpSlots": f"{WARP_SLOTS}u",
        "kFirstEvent": f"{layout.first_event}u",
        "kLastPayload": f"{layout.last_payload}u",
        "kTail": f"{layout.tail}u",
        "kFlushNs": f"{ring.flush_ns}u",
        "kPublishEvery": f"{PUBLISH_EVERY}u",
        "kModule": f"{module}u",
        "kIdBits": f"{id_bits}u",
        "kIdMask": f"{(1 << id_bits) - 1}u",
        "kEndId": f"{range_end_id(id_bits)}u",
        "kTokenlessEndId": f"{RANGE_END_TOKENLESS_ID}u",
        "kFlagWarpEnd": f"{FLAG_WARP_END}u",
        "kFlagPartialWarp": f"{FLAG_PARTIAL_WARP}u",
        "kFlagDiverged": f"{FLAG_DIVERGED}u",
    }
    lines = [f"// ---- {MARKER}: ring layout 0x{layout.layout_id:x}, ring 0x{ring.ring_id:x}, module {module} ----"]
    lines.append("namespace iket_tui {")
    lines += [f"constexpr {_ctype(value)} {name} = {value};" for name, value in constants.items()]
    fence = f"__device__ __forceinline__ void publish_fence() {{ {_FENCES[ring.fence]} }}\n"
    warp_header, chunk_header = _header_assembly()
    runtime = _RUNTIME.replace("@WARP_HEADER@", warp_header).replace("@HEADER@", chunk_header)
    runtime = runtime.replace("@FENCE@", fence)
    source = "\n".join(lines) + "\n" + runtime
    return source + _MACROS


def _ctype(value: str) -> str:
    return "unsigned long long" if value.endswith("ull") else "unsigned"


_FIELD_VALUES: Final = {
    "tag": "0u",
    "stamp": "(seq + 1u)",
    "events_before": "events",
    "module": "kModule",
    "kernel": "(kernel_warp & 0xffu)",
    "flags": "flags",
    "launch": "(unsigned)grid",
    "block_x": "blockIdx.x",
    "block_y": "blockIdx.y",
    "block_z": "blockIdx.z",
    "warp": "(kernel_warp >> 8)",
    "n_events": "(pe - kFirstEvent)",
    "n_payloads": "(kLastPayload - pp)",
    "id_bits": "kIdBits",
    "t_base": "(deadline - kFlushNs)",
}


_WARP_FIELDS: Final = frozenset(
    {"tag", "module", "kernel", "launch", "block_x", "block_y", "block_z", "warp", "id_bits"}
)
"""Header fields that stay the same for every chunk of a warp: packed once, when the warp starts."""


def _header_terms(parts: list[WordPart], fixed: bool) -> list[str]:
    """C terms OR-ing the parts of one header word that are fixed for the warp (or the others)."""
    terms = []
    for part in parts:
        if (part.field in _WARP_FIELDS) != fixed:
            continue
        value = _FIELD_VALUES[part.field]
        if part.field_shift:
            value = f"({value} >> {part.field_shift})"
        term = f"((unsigned){value}" + (f" & 0x{(1 << part.bits) - 1:x}u)" if part.bits < 32 else ")")
        terms.append(f"({term} << {part.shift})" if part.shift else term)
    return terms


def _header_assembly() -> tuple[str, str]:
    """C statements derived from :data:`~iket_tui.ring.layout.CHUNK_HEADER_FIELDS`: the
    warp's constant header bits into ``hdr`` (lane ``i`` holds word ``i``), run once when the
    warp starts, and the flush's: lane ``i``'s first staging register gets ``hdr`` with the
    chunk's own fields of word ``i``."""
    if HEADER_WORDS > LANES:
        raise AssertionError("the chunk header must fit in one word per lane")
    constant = ["    hdr = 0u;"]
    varying = ["    unsigned own = 0u;"]
    for index, parts in enumerate(DEFAULT_LAYOUT.header_words()):
        if terms := _header_terms(parts, fixed=True):
            constant.append(f"    hdr = (lane == {index}u) ? ({' | '.join(terms)}) : hdr;")
        if terms := _header_terms(parts, fixed=False):
            varying.append(f"    own = (lane == {index}u) ? ({' | '.join(terms)}) : own;")
    varying.append(f"    r[0] = (lane < {HEADER_WORDS}u) ? (hdr | own) : r[0];")
    return "\n".join(constant), "\n".join(varying)


_RUNTIME: Final = r"""
#if defined(IKET_TUI_HOST_SIMULATION)
__device__ __forceinline__ void publish_fence() {}
// The same runtime on the host, one object per lane, for tests (iket_tui.ring.simulation).
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

@FENCE@
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
// ever store these counters, so its caches see their last value; a strong (.relaxed.sys or
// volatile) load here hung TileLang's warp-specialized kernels on an H200.
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
@WARP_HEADER@
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
@HEADER@
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

"""

_MACROS: Final = (
    "#define TL_IKET_EVENT(ID, ...) " + WARP_VARIABLE + ".event<(ID), false>(0u)\n"
    "#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) " + WARP_VARIABLE + ".event<(ID), true>((unsigned)(VALUE))\n"
    "#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) "
    + WARP_VARIABLE
    + ".event<(ID), true>(__float_as_uint((float)(VALUE)))\n\n"
)
