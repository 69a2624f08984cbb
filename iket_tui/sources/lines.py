"""Messages as single lines for ``iket-tui dump``: aligned readable text, or JSON objects.

JSON lines carry each message map unchanged (its keys are the documented field names), a
pass row as the map it stands for; values JSON cannot hold (bytes, non-finite floats, arrays
and maps nested more than 32 deep) become strings. A ``kernel_records`` batch is summarised
(its chunk bytes replaced by the number of events they hold); :class:`KernelEvents` expands it
into one ``kernel_event`` per event.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from iket_tui.durations import duration
from iket_tui.protocol import messages as m
from iket_tui.ring.decode import EventTables, decode, payload_values
from iket_tui.ring.events import EventTableError
from iket_tui.ring.layout import KIND_MASK, KIND_NAMES, PAYLOAD_NAMES
from iket_tui.ring.wire import RecordsError, module_from_message, records_from_message

_TYPE_WIDTH = 18
_NESTING = (dict, list, tuple)
_PLAIN = re.compile(r"[^\s\"'=]+")
"""A value shown as it is: no spaces, quotes or equals signs."""
_NO_SPACE = re.compile(r"\S+")
_PLANS_KEPT = 4096
"""Sets of field names whose order and shown names a :class:`TextLines` remembers (a recording
holds a few dozen: one per message type, and the kernel events')."""
_DEPTH = 32
"""Levels of arrays and maps a line shows; a field nested deeper (a reader accepts up to
msgpack's 1,023) is shown as text saying so."""
_LEADING = ("compile", "context", "seq", "depth", "parent", "phase", "name")
_PASS_ORDER = ("compile", "context", "seq", "depth", "parent", "phase", "name")


def json_line(item: m.Item) -> str:
    """One message (or pass row) as one JSON object."""
    msg = _as_map(item)
    if all(type(value) not in _NESTING or _flat(value) for value in msg.values()):  # most messages, kernel events
        try:
            return json.dumps(msg, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            pass
    # Nesting is cut at _DEPTH here: json.dumps itself nests as deep as the C stack allows
    # (Python 3.13's far deeper than 3.11's ~1,000 levels, which raised RecursionError).
    return json.dumps(_jsonable(msg), ensure_ascii=False, separators=(",", ":"))


class TextLines:
    """Formats messages as aligned text lines, times relative to the first timestamp seen."""

    def __init__(self) -> None:
        self._t0: int | None = None
        self._gpu_t0: int | None = None  # the first time on the device's clock shown
        self._said: dict[tuple[str, str | None], str] = {}  # a kernel event's words for its names
        self._plans: dict[tuple[Any, ...], list[tuple[str, str]]] = {}  # field names, ordered and as shown

    def line(self, item: m.Item) -> str:
        msg = _as_map(item)
        kind = str(msg.get("type"))
        if kind == "kernel_event" and tuple(msg) == _KERNEL_EVENT_KEYS:
            return self._kernel_event(msg)
        key = _DEVICE_CLOCK.get(kind)
        if key is not None and type(device_t := msg.get(key)) is int:
            # An absolute device time reads as an offset from the first one shown, in
            # milliseconds to the nanosecond, as the time column reads the host's (as a
            # duration, 1.8e18 ns would read "498882h29m").
            if self._gpu_t0 is None:
                self._gpu_t0 = device_t
            msg = {**msg, key: _Offset(device_t - self._gpu_t0)}
        return f"{self._time(msg.get('t_ns'))}  {kind:<{_TYPE_WIDTH}}  {_fields(kind, msg, self._plans)}".rstrip()

    def _kernel_event(self, msg: m.Message) -> str:
        """A kernel event as :meth:`line` writes any message, the same words in the same order,
        its counts written at once: ``dump --records`` writes a line per event."""
        gpu_t = msg["gpu_t_ns"]
        if type(gpu_t) is int:
            if self._gpu_t0 is None:
                self._gpu_t0 = gpu_t
            gpu_t = _Offset(gpu_t - self._gpu_t0)
        said = self._said
        words = []
        for key in _KERNEL_EVENT_WORDS:
            value = gpu_t if key == "gpu_t_ns" else msg[key]
            kind = type(value)
            if kind is int:
                words.append(f"{key}={value}")
            elif kind is str or value is None:  # names, kinds and types: the same few, again and again
                word = said.get((key, value))
                if word is None:
                    word = _field(key, value)
                    if len(said) < _SAID_KEPT:
                        said[key, value] = word
                words.append(word)
            else:
                words.append(_field(key, value))
        return f"{' ' * 15}  {'kernel_event':<{_TYPE_WIDTH}}  {' '.join(words)}".rstrip()

    def starts_at(self, t_ns: int) -> None:
        """Read times from ``t_ns`` on: the recording's first timestamp, where the first line
        shown comes later (``dump --from``), so that times read as they do in the whole dump."""
        if self._t0 is None:
            self._t0 = t_ns

    def _time(self, t_ns: object) -> str:
        if not isinstance(t_ns, int) or isinstance(t_ns, bool) or t_ns <= 0:
            return " " * 15
        if self._t0 is None:
            self._t0 = t_ns
        return f"{(t_ns - self._t0) / 1e6:12.3f} ms"


def _as_map(item: m.Item) -> m.Message:
    if isinstance(item, list):
        return m.message_of(item)
    if item.get("type") == m.KERNEL_RECORDS:
        return summarised(item)
    return item


def summarised(msg: m.Message) -> m.Message:
    """A ``kernel_records`` message with ``events`` (how many its chunks hold) in place of the
    chunk bytes; a malformed one unchanged."""
    try:
        records = records_from_message(msg)
    except RecordsError:
        return msg
    out = {key: value for key, value in msg.items() if key != "chunks"}
    out["events"] = int(records.chunks["n_events"].sum(dtype="int64"))
    return out


class KernelEvents:
    """Expands ``kernel_records`` into one ``kernel_event`` map per event, with the names of the
    ``kernel_module`` tables seen so far (in a stream of several processes, those of the process
    the last ``process`` message named)."""

    def __init__(self) -> None:
        self.tables = EventTables()
        """The event tables of the process whose messages are being read."""
        self._of_process: dict[
            tuple[object, int], EventTables
        ] = {}  # a stream of several: each process's own, by host and pid (module ids are per process)
        self.damaged = 0
        """``kernel_records`` skipped because their fields are impossible (see :func:`records_from_message`)."""
        self.bad_tables = 0
        """``kernel_module`` messages skipped because their event table cannot be read."""

    def events(self, msg: m.Message) -> list[m.Message]:
        """The events of ``msg`` if it is a ``kernel_records``; learns tables from ``kernel_module``.
        A damaged one of either is counted and gives no events."""
        kind = msg.get("type")
        if kind == m.PROCESS:
            pid = msg.get("pid")
            if type(pid) is int:
                process = (msg.get("host"), pid)
                if not self._of_process:
                    self._of_process[process] = self.tables  # the first process: the tables read so far
                self.tables = self._of_process.setdefault(process, EventTables())
            return []
        if kind == m.KERNEL_MODULE:
            try:
                self.tables.add(module_from_message(msg))
            except EventTableError:
                self.bad_tables += 1
            return []
        if kind != m.KERNEL_RECORDS:
            return []
        try:
            records = records_from_message(msg)
        except RecordsError:
            self.damaged += 1
            return []
        events = decode(records.chunks, self.tables, records.layout, records.warp_slots)
        values = payload_values(events)
        out: list[m.Message] = []
        names: dict[int, tuple[dict[int, str], tuple[str, ...]]] = {}
        for event, value in zip(events.tolist(), values.tolist(), strict=True):
            t_ns, _payload, event_id, kind_bits, payload_type, kernel, launch, x, y, z, module, sm, warp = event
            known = names.get(module)
            if known is None:
                table = self.tables.module(module)
                known = names[module] = (
                    ({e.event_id: e.name for e in table.events}, table.kernels) if table else ({}, ())
                )
            event_names, kernels = known
            out.append(
                {
                    "type": "kernel_event",
                    "module": module,
                    "kernel": kernels[kernel] if kernel < len(kernels) else kernel,
                    "launch": launch,
                    "block": [x, y, z],
                    "warp": warp,
                    "sm": sm,
                    "event": event_id,
                    "name": event_names.get(event_id),
                    "kind": KIND_NAMES[kind_bits & KIND_MASK],
                    "gpu_t_ns": t_ns,
                    "payload": value,
                    "payload_type": PAYLOAD_NAMES[payload_type] if payload_type < len(PAYLOAD_NAMES) else None,
                }
            )
        return out

    def notes(self) -> tuple[str, ...]:
        """One-line remarks for the user about what could not be expanded."""
        notes: list[str] = []
        if self.damaged:
            notes.append(f"skipped {self.damaged} damaged kernel_records batches")
        if self.bad_tables:
            notes.append(f"skipped {self.bad_tables} kernel_module messages without a readable event table")
        return tuple(notes)


def _fields(kind: str, msg: m.Message, plans: dict[tuple[Any, ...], list[tuple[str, str]]]) -> str:
    names = (kind, *msg)
    plan = plans.get(names)
    if plan is None:
        order = _PASS_ORDER if kind in m.PASS_EVENTS else _LEADING
        keys = [k for k in order if k in msg] + [k for k in msg if k not in order and k not in ("type", "t_ns")]
        plan = [(key, key if type(key) is str and _PLAIN.fullmatch(key) else _quoted(key)) for key in keys]
        if len(plans) < _PLANS_KEPT:
            plans[names] = plan
    return " ".join([_field(shown, msg[key]) for key, shown in plan])


def _quoted(key: Any) -> str:
    """A field name that is not plain as a line shows it: quoted, its newlines escaped."""
    return json.dumps(_key(key), ensure_ascii=False)


_KERNEL_EVENT_KEYS: Final = (
    "type",
    "module",
    "kernel",
    "launch",
    "block",
    "warp",
    "sm",
    "event",
    "name",
    "kind",
    "gpu_t_ns",
    "payload",
    "payload_type",
)
"""The fields of a kernel event as :meth:`KernelEvents.events` makes it, in its order."""
_KERNEL_EVENT_WORDS: Final = ("name", *(key for key in _KERNEL_EVENT_KEYS if key not in ("type", "name")))
"""How a line writes them: its name first (as every message's), then the others in order."""
_SAID_KEPT: Final = 4096
"""Words of names and kinds remembered by a :class:`TextLines`, at most."""

_DEVICE_CLOCK: Final = {"kernel_event": "gpu_t_ns", m.KERNEL_RECORDS: "device_now_ns"}
"""The field of a message that holds an absolute time on the device's clock."""


class _Offset(int):
    """A device time as an offset from the first one a dump showed."""


def _field(key: str, value: Any) -> str:
    kind = type(value)
    if kind is _Offset:
        ms, ns = divmod(abs(value), 1_000_000)
        return f"{key[:-3]}={'-' if value < 0 else '+'}{ms}.{ns:06d}ms"
    if kind is int:
        return f"{key[:-3]}={duration(value).replace(' ', '')}" if key.endswith("_ns") else f"{key}={value}"
    if type(value) is str:
        if key == "traceback":
            return f"traceback=<{len(value.splitlines())} lines>"
        if _PLAIN.fullmatch(value):
            return value if key == "name" else f"{key}={value}"
        if key == "name" and _NO_SPACE.fullmatch(value):
            return value
    elif value is None:
        return f"{key}=-"
    return f"{key}={_value(value)}"


def _value(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "-"
    if type(value) is str and _PLAIN.fullmatch(value):
        return value
    if kind is int:
        return str(value)
    if kind is bytes:
        return f"<{len(value)} bytes>"
    if kind is list and len(value) <= 8 and all(type(item) is int for item in value):
        return f"[{', '.join(map(str, value))}]"
    return json.dumps(_jsonable(value), ensure_ascii=False)


def _flat(value: Any) -> bool:
    """A list or tuple of plain values (a block's coordinates): as cheap to write as they are."""
    return type(value) is not dict and not any(type(item) in _NESTING or type(item) is bytes for item in value)


def _jsonable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict | list | tuple) and depth == _DEPTH:
        return f"<nested deeper than {_DEPTH} levels>"
    if isinstance(value, dict):
        return {_key(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _key(key: Any) -> str:
    return key.hex() if isinstance(key, bytes) else str(key)
