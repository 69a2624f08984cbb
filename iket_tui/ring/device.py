"""Putting the device runtime into a module's generated CUDA.

TileLang's frontend leaves ``TL_IKET_EVENT(id, token)``, ``TL_IKET_EVENT(31)`` (a range end)
and ``TL_IKET_EVENT_PAYLOAD_U32/F32(id, value, token)`` in the generated code; every thread
runs them. :func:`inject` reads the event table from the tokens, gives the events module-wide
ids, puts the runtime in front of the kernels and opens a per-warp log at the top of each
kernel that has events.

The runtime is CUDA, :data:`RUNTIME_RESOURCE` in this package; ``docs/ring.md`` describes what
it writes and in which order. What depends on the ring and the module (the ring's address and
geometry, the event ids, the fence, and the chunk header packing that :mod:`iket_tui.ring.layout`
describes) goes in as ``#define``s ahead of the runtime's text. The text is pasted in, not
included: nvcc inside TileLang's pipeline knows no include path to it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Final

from iket_tui.ring.events import TOKEN_PREFIX, EventInfo, EventTableError, ModuleEvents, decode_token
from iket_tui.ring.layout import (
    DEFAULT_FLUSH_NS,
    DEVICE_MIN_CHUNKS,
    FLAG_DIVERGED,
    FLAG_PARTIAL_WARP,
    FLAG_WARP_END,
    HEADER_WORDS,
    LANES,
    PUBLISH_EVERY,
    RANGE_END_TOKENLESS_ID,
    WARP_SLOTS,
    ChunkLayout,
    RingGeometry,
    WordPart,
    id_bits_for,
    range_end_id,
)

MARKER: Final = "iket-tui kernel event runtime"
"""Appears in every module the runtime was put into."""
WARP_VARIABLE: Final = "__iket_tui_warp"
"""The per-warp log each kernel with events opens; the runtime's IKET macros name it."""
RUNTIME_RESOURCE: Final = "device_runtime.cuh"
"""The runtime's CUDA, a file of this package."""

FENCES: Final = ("sc", "acq_rel", "release", "acq_rel_gpu", "none")
"""What :attr:`RingTarget.fence` may be; the runtime names each ``IKET_TUI_FENCE_<NAME>``."""
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
    orders the bodies before the tags), ``sc`` (``__threadfence_system()``, ``fence.sc.sys``),
    ``release`` (``fence.release.sys``: enough in the memory model, yet TileLang's
    warp-specialized GEMM has hung with it, see docs/ring.md: for measuring only),
    ``acq_rel_gpu`` (``fence.acq_rel.gpu``, enough only for a ring in device memory, which the
    host cannot read while kernels run: for measuring only), or ``none`` (no order: for
    measuring only)."""

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
        if self.fence not in FENCES:
            raise ValueError(f"fence must be one of {', '.join(FENCES)}, not {self.fence!r}")


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


def inject(code: str, ring: RingTarget | None, module: int, cuda_runtime: str | None = None) -> InjectedModule:
    """Put the runtime into ``code`` for the ring ``ring`` as module ``module``.

    Code without IKET events comes back unchanged. Without a ring (no GPU) the macros compile
    to nothing but the event table is still recovered, so compiles and tables work everywhere.
    ``cuda_runtime`` replaces the runtime's text (:func:`runtime_cuh`), for measuring variants.
    """
    if MARKER in code:
        raise InjectionError("this CUDA already holds the iket-tui runtime")
    if not 0 <= module < 1 << 16:
        raise InjectionError(f"module id {module} does not fit in 16 bits")
    if not any(macro + "(" in code for macro in _EVENT_MACROS):
        return InjectedModule(code, ModuleEvents(module, id_bits_for(0), tuple(kernel_names(code)), ()))
    code, events = recover_events(code, module)
    runtime = runtime_source(ring, module, events.id_bits, cuda_runtime)
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


@functools.cache
def runtime_cuh() -> str:
    """The runtime's fixed CUDA, the package resource :data:`RUNTIME_RESOURCE`: everything but
    what :func:`runtime_source` defines for a ring and a module."""
    return resources.files("iket_tui.ring").joinpath(RUNTIME_RESOURCE).read_text(encoding="utf-8")


def runtime_source(ring: RingTarget | None, module: int, id_bits: int, cuda_runtime: str | None = None) -> str:
    """The CUDA runtime for one module, self-contained: :func:`runtime_defines`, then the text
    of ``cuda_runtime`` (default: :func:`runtime_cuh`), which defines the per-warp log and the
    IKET macros. Without a ring the macros do nothing."""
    if ring is None:
        return (
            f"// ---- {MARKER}: no ring (no GPU); events compile to nothing, module {module} ----\n"
            "#define TL_IKET_EVENT(ID, ...) ((void)0)\n"
            "#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) ((void)0)\n"
            "#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) ((void)0)\n\n"
        )
    text = runtime_cuh() if cuda_runtime is None else cuda_runtime
    return runtime_defines(ring, module, id_bits) + text + "\n"


def runtime_defines(ring: RingTarget, module: int, id_bits: int) -> str:
    """The ``#define``s the runtime's text needs for ``ring`` and module ``module`` (its first
    lines list them), after a comment line naming the ring and the module."""
    geometry = ring.geometry
    layout = geometry.layout
    defines = {
        "IKET_TUI_RING_ADDRESS": f"0x{ring.address:x}ull",
        "IKET_TUI_COUNTERS_OFFSET": f"{geometry.counters_offset}ull",
        "IKET_TUI_CHUNKS_OFFSET": f"{geometry.chunks_offset}ull",
        "IKET_TUI_SEGMENTS": f"{geometry.segments}u",
        "IKET_TUI_CHUNKS_PER_SEGMENT": f"{geometry.chunks_per_segment}u",
        "IKET_TUI_CHUNK_BYTES": f"{layout.chunk_bytes}u",
        "IKET_TUI_WORDS_PER_LANE": f"{layout.words_per_lane}u",
        "IKET_TUI_HEADER_WORDS": f"{HEADER_WORDS}u",
        "IKET_TUI_FIRST_EVENT": f"{layout.first_event}u",
        "IKET_TUI_LAST_PAYLOAD": f"{layout.last_payload}u",
        "IKET_TUI_TAIL": f"{layout.tail}u",
        "IKET_TUI_WARP_SLOTS": f"{WARP_SLOTS}u",
        "IKET_TUI_PUBLISH_EVERY": f"{PUBLISH_EVERY}u",
        "IKET_TUI_FLUSH_NS": f"{ring.flush_ns}u",
        "IKET_TUI_FLAG_WARP_END": f"{FLAG_WARP_END}u",
        "IKET_TUI_FLAG_PARTIAL_WARP": f"{FLAG_PARTIAL_WARP}u",
        "IKET_TUI_FLAG_DIVERGED": f"{FLAG_DIVERGED}u",
        "IKET_TUI_MODULE": f"{module}u",
        "IKET_TUI_ID_BITS": f"{id_bits}u",
        "IKET_TUI_RANGE_END_ID": f"{range_end_id(id_bits)}u",
        "IKET_TUI_TOKENLESS_END_ID": f"{RANGE_END_TOKENLESS_ID}u",
        "IKET_TUI_FENCE": f"IKET_TUI_FENCE_{ring.fence.upper()}",
    }
    warp_header, chunk_header = _header_packing(layout)
    lines = [f"// ---- {MARKER}: ring layout 0x{layout.layout_id:x}, ring 0x{ring.ring_id:x}, module {module} ----"]
    lines += [f"#define {name} {value}" for name, value in defines.items()]
    lines.append(_statement_macro("IKET_TUI_PACK_WARP_HEADER", warp_header))
    lines.append(_statement_macro("IKET_TUI_PACK_CHUNK_HEADER", chunk_header))
    return "\n".join(lines) + "\n"


def _statement_macro(name: str, statements: list[str]) -> str:
    """``#define name`` as ``statements``, one a line; a use of it ends with a semicolon."""
    return f"#define {name} \\\n  " + "; \\\n  ".join(statements or ["(void)0"])


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
"""Each header field as the runtime's C names it, inside the warp's log."""


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


def _header_packing(layout: ChunkLayout) -> tuple[list[str], list[str]]:
    """C statements derived from :data:`~iket_tui.ring.layout.CHUNK_HEADER_FIELDS`, lane ``i``
    handling header word ``i``: the warp's fixed fields into ``hdr`` (run once when the warp
    starts), and the chunk's own fields into ``own`` (run at each flush)."""
    if HEADER_WORDS > LANES:
        raise AssertionError("the chunk header must fit in one word per lane")
    fixed: list[str] = []
    own: list[str] = []
    for index, parts in enumerate(layout.header_words()):
        if terms := _header_terms(parts, fixed=True):
            fixed.append(f"hdr = (lane == {index}u) ? ({' | '.join(terms)}) : hdr")
        if terms := _header_terms(parts, fixed=False):
            own.append(f"own = (lane == {index}u) ? ({' | '.join(terms)}) : own")
    return fixed, own
