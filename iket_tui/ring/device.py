"""Putting the device runtime into a module's generated CUDA.

TileLang's frontend leaves ``TL_IKET_EVENT(id, token)``, ``TL_IKET_EVENT(31)`` (a range end)
and ``TL_IKET_EVENT_PAYLOAD_U32/F32(id, value, token)`` in the generated code; every thread
runs them. :func:`inject` reads the event table from the tokens, gives the events module-wide
ids, puts the runtime in front of the kernels and opens a per-warp log at the top of each
kernel that has events.

The runtime is CUDA, :data:`RUNTIME_RESOURCE` in this package; ``docs/ring.md`` describes what
it writes and in which order. What depends on the ring and the module (the ring's address and
geometry, the record types that :mod:`iket_tui.ring.layout` describes, the event ids) goes in as
``#define``s ahead of the runtime's text. The text is pasted in, not
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
    CLAIM_STRIPES,
    CLAIMS_OFFSET,
    END_COUNT_BITS,
    END_DIVERGED,
    END_PARTIAL,
    EVENTS_ENDED_OFFSET,
    RANGE_END_TOKENLESS_ID,
    RING_LAYOUT,
    STAMP_LAP_SHIFT,
    WARPS_ENDED_OFFSET,
    RingGeometry,
    id_bits_for,
    range_end_id,
)

MARKER: Final = "iket-tui kernel event runtime"
"""Appears in every module the runtime was put into."""
WARP_VARIABLE: Final = "__iket_tui_warp"
"""The per-warp log each kernel with events opens; the runtime's IKET macros name it."""
RUNTIME_RESOURCE: Final = "device_runtime.cuh"
"""The runtime's CUDA, a file of this package."""

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
    """Where the device writes: the ring's address in device memory, its geometry and its id.
    Every value is compiled into the module, so a module built for one ring must never run
    against another."""

    address: int
    geometry: RingGeometry
    ring_id: int

    def __post_init__(self) -> None:
        if self.address <= 0 or self.address % 4096:
            raise ValueError(f"ring address must be a page-aligned pointer, not 0x{self.address:x}")


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
    defines = {
        "IKET_TUI_RING_ADDRESS": f"0x{ring.address:x}ull",
        "IKET_TUI_DESCRIPTORS_OFFSET": f"{geometry.descriptors_offset}ull",
        "IKET_TUI_RECORDS_OFFSET": f"{geometry.records_offset}ull",
        "IKET_TUI_REGION_BITS": f"{geometry.region_bits}u",
        "IKET_TUI_RECORDS_PER_REGION": f"{geometry.records_per_region}u",
        "IKET_TUI_CLAIMS_OFFSET": f"{CLAIMS_OFFSET}ull",
        "IKET_TUI_CLAIM_STRIPES": f"{CLAIM_STRIPES}u",
        "IKET_TUI_WARPS_ENDED_OFFSET": f"{WARPS_ENDED_OFFSET}ull",
        "IKET_TUI_EVENTS_ENDED_OFFSET": f"{EVENTS_ENDED_OFFSET}ull",
        "IKET_TUI_STAMP_LAP_SHIFT": f"{STAMP_LAP_SHIFT}u",
        "IKET_TUI_END_COUNT_BITS": f"{END_COUNT_BITS}u",
        "IKET_TUI_END_PARTIAL": f"{END_PARTIAL}u",
        "IKET_TUI_END_DIVERGED": f"{END_DIVERGED}u",
        "IKET_TUI_MODULE": f"{module}u",
        "IKET_TUI_ID_BITS": f"{id_bits}u",
        "IKET_TUI_RANGE_END_ID": f"{range_end_id(id_bits)}u",
        "IKET_TUI_TOKENLESS_END_ID": f"{RANGE_END_TOKENLESS_ID}u",
    }
    lines = [f"// ---- {MARKER}: ring layout 0x{RING_LAYOUT:x}, ring 0x{ring.ring_id:x}, module {module} ----"]
    lines += [f"#define {name} {value}" for name, value in defines.items()]
    return "\n".join(lines) + "\n"
