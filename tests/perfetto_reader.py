"""Perfetto's native trace read back for the tests: a small protobuf reader that checks every
field it meets against the number and wire type Perfetto's own protos give it (copied here, apart
from :mod:`iket_tui.export.perfetto`, so that a wrong number there fails here), and the tracks,
slices and instants the trace holds. Shared by the export tests and the fuzz targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Fields = list[tuple[int, int, Any]]


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> Fields:
    """A message's fields as ``(number, wire type, value)``: an int for varints and fixed
    widths, bytes for length-delimited fields."""
    out: Fields = []
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = read_varint(data, at)
        elif wire == 1:
            value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
        elif wire == 2:
            size, at = read_varint(data, at)
            value, at = data[at : at + size], at + size
            assert at <= len(data), "a length past the end of its message"
        elif wire == 5:
            value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((number, wire, value))
    assert at == len(data)
    return out


VARINT, I64, LEN, I32 = 0, 1, 2, 5

# Perfetto's protos as google/perfetto declares them at ec5d16b14b74 (2026-08-22), paths under
# protos/perfetto/trace/: (field name, wire type) by field number, only the fields the exporter
# may write. A field outside this table, or with another wire type, fails the decode.
SCHEMA: dict[str, dict[int, tuple[str, int]]] = {
    "Trace": {1: ("packet", LEN)},  # trace.proto: repeated TracePacket packet = 1
    "TracePacket": {  # trace_packet.proto
        8: ("timestamp", VARINT),  # optional uint64 timestamp = 8
        10: ("trusted_packet_sequence_id", VARINT),  # uint32, oneof optional_trusted_packet_sequence_id
        11: ("track_event", LEN),  # TrackEvent track_event = 11, oneof data
        13: ("sequence_flags", VARINT),  # optional uint32 sequence_flags = 13
        60: ("track_descriptor", LEN),  # TrackDescriptor track_descriptor = 60, oneof data
    },
    "TrackDescriptor": {  # track_event/track_descriptor.proto
        1: ("uuid", VARINT),  # optional uint64 uuid = 1
        2: ("name", LEN),  # string name = 2, oneof static_or_dynamic_name
        3: ("process", LEN),  # optional ProcessDescriptor process = 3
        5: ("parent_uuid", VARINT),  # optional uint64 parent_uuid = 5
    },
    "ProcessDescriptor": {  # track_event/process_descriptor.proto
        1: ("pid", VARINT),  # optional int32 pid = 1
        2: ("cmdline", LEN),  # repeated string cmdline = 2
        6: ("process_name", LEN),  # optional string process_name = 6
    },
    "TrackEvent": {  # track_event/track_event.proto
        9: ("type", VARINT),  # optional Type type = 9
        11: ("track_uuid", VARINT),  # optional uint64 track_uuid = 11
        22: ("categories", LEN),  # repeated string categories = 22
        23: ("name", LEN),  # string name = 23, oneof name_field
    },
}
REPEATED = {("Trace", "packet"), ("ProcessDescriptor", "cmdline"), ("TrackEvent", "categories")}
ONEOF_DATA = ("track_event", "track_descriptor")
SEQ_INCREMENTAL_STATE_CLEARED = 1  # trace_packet.proto: TracePacket.SequenceFlags
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT = 1, 2, 3  # track_event.proto: TrackEvent.Type


def message(data: bytes, kind: str) -> dict[str, Any]:
    """A ``kind`` message's fields by their proto names (a list for a repeated one), each checked
    against Perfetto's number and wire type."""
    schema = SCHEMA[kind]
    out: dict[str, Any] = {}
    for number, wire, value in fields(data):
        assert number in schema, f"{kind} has no field {number} in Perfetto's protos"
        name, expected = schema[number]
        assert wire == expected, f"{kind}.{name} is wire type {expected}, written as {wire}"
        if (kind, name) in REPEATED:
            out.setdefault(name, []).append(value)
        else:
            assert name not in out, f"{kind}.{name} written twice"
            out[name] = value
    return out


def int32(value: int) -> int:
    """A varint read back as protobuf's int32 (a negative one is its 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass
class Track:
    uuid: int
    name: str
    parent: int | None
    pid: int | None = None
    process_name: str | None = None
    cmdline: list[str] = field(default_factory=list)
    events: list[tuple[int, int, str | None, str | None]] = field(default_factory=list)
    """``(timestamp, type, name, category)`` in the order written."""


@dataclass
class Trace:
    tracks: dict[int, Track]

    def children(self, parent: int | None) -> list[Track]:
        return [track for track in self.tracks.values() if track.parent == parent]

    def slices(self, track: Track) -> list[tuple[str, int, int]]:
        """A track's slices as ``(name, begin, end)``, checking that its begins and ends are
        balanced, properly nested and in time order."""
        out: list[tuple[str, int, int]] = []
        stack: list[tuple[str, int]] = []
        last = 0
        for ts, kind, name, _ in track.events:
            assert ts >= last, track.name
            last = ts
            if kind == TYPE_SLICE_BEGIN:
                assert name is not None
                stack.append((name, ts))
            elif kind == TYPE_SLICE_END:
                assert stack, f"an end without a begin on {track.name}"
                begun, begin = stack.pop()
                out.append((begun, begin, ts))
            else:
                assert kind == TYPE_INSTANT, kind
        assert not stack, f"slices never ended on {track.name}"
        return out

    def instants(self, track: Track) -> list[tuple[str | None, int]]:
        return [(name, ts) for ts, kind, name, _ in track.events if kind == TYPE_INSTANT]

    def processes(self) -> list[Track]:
        """The process tracks, in the order written."""
        return [track for track in self.tracks.values() if track.process_name is not None]

    def process_of(self, track: Track) -> Track | None:
        """The process track a track is under (itself for a process track), None outside any."""
        at: Track | None = track
        while at is not None and at.process_name is None:
            at = self.tracks[at.parent] if at.parent is not None else None
        return at


def decode(data: bytes) -> Trace:
    tracks: dict[int, Track] = {}
    pending: list[tuple[int, int, int, str | None, str | None]] = []
    packets = message(data, "Trace")["packet"]
    first = message(packets[0], "TracePacket")
    assert first == {"trusted_packet_sequence_id": 1, "sequence_flags": SEQ_INCREMENTAL_STATE_CLEARED}
    for body in packets[1:]:
        packet = message(body, "TracePacket")
        assert packet["trusted_packet_sequence_id"] == 1
        assert sum(name in packet for name in ONEOF_DATA) == 1, "a packet holds one event or one descriptor"
        if "track_descriptor" in packet:
            found = message(packet["track_descriptor"], "TrackDescriptor")
            uuid = found["uuid"]
            assert uuid and uuid not in tracks
            track = Track(uuid, found["name"].decode(), found.get("parent_uuid"))
            if "process" in found:
                described = message(found["process"], "ProcessDescriptor")
                track.pid = int32(described["pid"]) if "pid" in described else None
                track.process_name = described["process_name"].decode()
                track.cmdline = [arg.decode() for arg in described.get("cmdline", [])]
            tracks[uuid] = track
        else:
            found = message(packet["track_event"], "TrackEvent")
            assert found["type"] in (TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT)
            assert ("name" in found) == (found["type"] != TYPE_SLICE_END), "an end is nameless, a begin is named"
            categories = [category.decode() for category in found.get("categories", [])]
            assert len(categories) == (found["type"] != TYPE_SLICE_END)
            pending.append(
                (
                    found["track_uuid"],
                    packet["timestamp"],
                    found["type"],
                    found["name"].decode() if "name" in found else None,
                    categories[0] if categories else None,
                )
            )
    for uuid, ts, kind, name, category in pending:
        assert uuid in tracks, "an event on a track never described"
        tracks[uuid].events.append((ts, kind, name, category))
    for track in tracks.values():
        assert track.parent is None or track.parent in tracks
    pids = [track.pid for track in tracks.values() if track.pid is not None]
    assert len(pids) == len(set(pids)), "two process tracks name the same pid"
    return Trace(tracks)
