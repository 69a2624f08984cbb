"""Checks on the fields of untrusted messages, shared by every part of the model that applies them.

A handler raises :data:`MALFORMED` (or lets one of :data:`MALFORMED_ERRORS` escape) for a message
whose fields do not have the types ``docs/protocol.md`` documents; the session counts it as
malformed and leaves the model as it was.
"""

from __future__ import annotations

from typing import Any, Final


class Malformed(Exception):
    """A message whose fields do not have the types the protocol documents."""


MALFORMED: Final = Malformed
"""What a handler raises for a malformed message. It is the class, not a shared instance: each
raise makes an exception that dies once the session has counted it, whereas an instance raised
again and again would keep the traceback of every raise, and with it every frame and message
it passed through."""
MALFORMED_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)
"""What reading a field of the wrong shape raises; counted as malformed too."""
ABSENT: Any = object()
"""A field missing from a map, which no type check accepts."""


def int_field(value: Any) -> int:
    if type(value) is not int:
        raise MALFORMED
    return value


def opt_str_field(value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise MALFORMED
    return value


MAX_COUNT: Final = 2**53
"""The largest count of events an agent can report (produced, dropped, backlog, filtered, open,
observer errors). Each is a count of compiler events, and the agent spends about 2 µs on one
(DESIGN.md): counting past 2**53 would take an agent at one event a microsecond 285 years. A
count beyond it, or below 0, is a message that lies, counted as malformed rather than shown;
2**53 is also the largest integer every JSON reader of an export holds exactly."""


def count_field(value: Any) -> int:
    """A count of events: an integer from 0 to :data:`MAX_COUNT`."""
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise MALFORMED
    return value


def opt_count_field(value: Any) -> int | None:
    """An optional count of events (older agents leave some out): ``None`` when it is not an
    integer, as before; an integer outside 0 to :data:`MAX_COUNT` is malformed."""
    if type(value) is not int:
        return None
    return count_field(value)
