"""A module's event table: which id means which named mark or range, with which payload.

TileLang's IKET frontend carries each event's description in the generated CUDA as a token
``__tl_iket_v1_<base64 json>``. The runtime reads them back from the code, gives the events
module-wide ids, and the table travels to clients as a ``kernel_module`` message before any
launch, so that a chunk (which holds ids only) can be named.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from iket_tui.ring.layout import PAYLOAD_NAMES, range_end_id

TOKEN_PREFIX: Final = "__tl_iket_v1_"
EVENT_KINDS: Final = ("mark", "range")
MAX_NAME_BYTES: Final = 32
_TOKEN_FIELDS: Final = frozenset({"version", "name", "event_id", "kind", "range_id", "payload_type", "payload_iket_id"})
_PAYLOAD_FROM_TOKEN: Final = {"NoPayload": "none", "int32": "int32", "uint32": "uint32", "float32": "float32"}


class EventTableError(ValueError):
    """A token or table that cannot be read; the message is one line."""


@dataclass(frozen=True)
class EventInfo:
    """One named event of a module."""

    event_id: int
    """The id a chunk carries for it (module-wide; the range end has its own id)."""
    name: str
    kind: str
    """``"mark"`` or ``"range"`` (a range's start; its end is the module's range-end id)."""
    payload_type: str = "none"
    """``"none"``, ``"int32"``, ``"uint32"`` or ``"float32"``."""
    range_id: int = 0


@dataclass(frozen=True)
class TokenEvent:
    """What one frontend token says, before the module gives it its id."""

    name: str
    kind: str
    payload_type: str
    range_id: int
    frontend_id: int


def decode_token(token: str) -> TokenEvent:
    """Read one ``__tl_iket_v1_`` token, checked like TileLang's own ``decode_event``."""
    if not token.startswith(TOKEN_PREFIX):
        raise EventTableError(f"not an IKET event token: {token[:40]!r}")
    encoded = token[len(TOKEN_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise EventTableError(f"undecodable IKET event token: {token[:40]!r}") from None
    if not isinstance(data, dict) or set(data) != _TOKEN_FIELDS or data["version"] != 1:
        raise EventTableError("IKET event token of an unknown schema")
    name, kind, payload = data["name"], data["kind"], data["payload_type"]
    if not isinstance(name, str) or not name or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise EventTableError(f"IKET event token with a bad name: {name!r}")
    if kind not in EVENT_KINDS:
        raise EventTableError(f"IKET event token of unknown kind {kind!r}")
    if payload not in _PAYLOAD_FROM_TOKEN:
        raise EventTableError(f"IKET event {name!r} has unsupported payload type {payload!r}")
    for key in ("event_id", "range_id"):
        if type(data[key]) is not int or data[key] < 0:
            raise EventTableError(f"IKET event token with a bad {key}")
    return TokenEvent(name, kind, _PAYLOAD_FROM_TOKEN[payload], data["range_id"], data["event_id"])


@dataclass(frozen=True)
class ModuleEvents:
    """The event table of one compiled module, as the runtime wrote it into that module."""

    module: int
    id_bits: int
    kernels: tuple[str, ...]
    events: tuple[EventInfo, ...]

    @property
    def range_end_id(self) -> int:
        return range_end_id(self.id_bits)

    def by_id(self) -> dict[int, EventInfo]:
        return {event.event_id: event for event in self.events}

    def to_fields(self) -> dict[str, Any]:
        """The table as plain msgpack-ready fields (see ``kernel_module`` in docs/ring.md)."""
        return {
            "module": self.module,
            "id_bits": self.id_bits,
            "range_end": self.range_end_id,
            "kernels": list(self.kernels),
            "events": [
                {
                    "id": event.event_id,
                    "name": event.name,
                    "kind": event.kind,
                    "payload": event.payload_type,
                    "range_id": event.range_id,
                }
                for event in self.events
            ],
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> ModuleEvents:
        """Read a table from untrusted fields; a one-line :class:`EventTableError` if malformed."""
        try:
            module, id_bits = fields["module"], fields["id_bits"]
            kernels, events = fields["kernels"], fields["events"]
            if type(module) is not int or not 0 <= module < 1 << 16:
                raise EventTableError(f"bad module id {module!r}")
            if type(id_bits) is not int or not 5 <= id_bits <= 8:
                raise EventTableError(f"bad id width {id_bits!r}")
            if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
                raise EventTableError("kernels is not a list of names")
            infos = tuple(_event_from_fields(event, id_bits) for event in events)
        except (KeyError, TypeError) as exc:
            raise EventTableError(f"malformed event table ({type(exc).__name__}: {exc})") from None
        return cls(module, id_bits, tuple(kernels), infos)


def _event_from_fields(event: Any, id_bits: int) -> EventInfo:
    if not isinstance(event, Mapping):
        raise EventTableError("an event of the table is not a map")
    event_id, name, kind = event["id"], event["name"], event["kind"]
    payload, range_id = event.get("payload", "none"), event.get("range_id", 0)
    if type(event_id) is not int or not 1 <= event_id < range_end_id(id_bits):
        raise EventTableError(f"bad event id {event_id!r}")
    if not isinstance(name, str) or kind not in EVENT_KINDS or payload not in PAYLOAD_NAMES:
        raise EventTableError(f"bad event {name!r}")
    if type(range_id) is not int:
        raise EventTableError(f"bad range id for event {name!r}")
    return EventInfo(event_id, name, kind, payload, range_id)
