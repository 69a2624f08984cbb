"""What a reader accepts from one frame, in one place: the limits ``docs/protocol.md`` documents."""

from __future__ import annotations

from typing import Any, Final

MAX_FRAME_BODY: Final = 16 * 1024 * 1024
"""Bytes in one frame's body."""
MAX_STR: Final = 4 * 1024 * 1024
"""Bytes in one string."""
MAX_ARRAY: Final = 1_000_000
"""Items in one array (and messages in one batch)."""
MAX_MAP: Final = 10_000
"""Entries in one map."""

MAX_FRAME_OBJECTS: Final = 4_000_000
"""Objects one frame decodes to: every array and map, plus every item, key and value inside one.
The largest frames a writer sends (16 MiB of pass rows) hold about 3.2 million; 16 MiB of nested
empty arrays would hold 16 million, about 1.2 GB once decoded."""
OBJECTS_CHECKED_ABOVE: Final = MAX_FRAME_OBJECTS // 2
"""Body size in bytes above which decoding counts objects: every object takes at least one byte
and is counted at most twice (once itself, once as an item), so a smaller body cannot exceed
:data:`MAX_FRAME_OBJECTS`."""

UNPACK_LIMITS: Final[dict[str, Any]] = {
    "raw": False,
    "strict_map_key": True,
    "max_str_len": MAX_STR,
    "max_bin_len": MAX_FRAME_BODY,
    "max_array_len": MAX_ARRAY,
    "max_map_len": MAX_MAP,
    "max_ext_len": 0,
}
"""msgpack's own limits, as ``Unpacker`` and ``unpackb`` take them. ``strict_map_key`` lets
binary keys through as well as strings: the codec refuses those itself."""
