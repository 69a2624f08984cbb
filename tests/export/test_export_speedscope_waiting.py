"""Speedscope of compiles that end while one that began before them still runs (a compile hung
in one thread while others go on): each is kept and forgotten when it ends, whatever the one
before it does, and the file is still the whole session's, byte for byte."""

from __future__ import annotations

import json
import random
from typing import Any

from iket_tui.export import SpeedscopeStream, recording_session, speedscope
from iket_tui.protocol import messages as m


def _compile(number: int, t_ns: int, passes: int) -> list[m.Message]:
    """Compile ``number`` from ``t_ns``: ``passes`` passes one after another, then its end."""
    out = [m.compile_begin(compile=number, label=f"kernel=k{number}", kernel=f"k{number}", target=None, t_ns=t_ns)]
    for seq in range(passes):
        at = t_ns + 10 * seq + 1
        common: dict[str, Any] = {"compile": number, "context": 1, "name": f"p{seq}", "seq": seq, "depth": 0}
        out.append(m.pass_start(**common, parent=None, phase=None, t_ns=at))
        out.append(m.pass_end(**common, parent=None, phase=None, t_ns=at + 4, duration_ns=4))
    end = t_ns + 10 * passes + 5
    out.append(m.compile_end(compile=number, label=f"kernel=k{number}", t_ns=end, duration_ns=end - t_ns, ok=True))
    return out


def _hung_then(compiles: int) -> list[m.Message]:
    """Compile 0 begins and never ends; ``compiles`` more begin and end after it."""
    out = [m.compile_begin(compile=0, label="kernel=hung", kernel="hung", target=None, t_ns=1)]
    for number in range(1, compiles + 1):
        out += _compile(number, 1000 * number, passes=20)
    return out


def _whole(messages: list[m.Message]) -> bytes:
    document = speedscope(recording_session(messages))
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _streamed(messages: list[m.Message], chunk: int) -> tuple[bytes, SpeedscopeStream]:
    """The file written for ``messages`` fed ``chunk`` at a time; after each chunk, every compile
    that ended holds no pass, and no compile is held on to for being drawn later."""
    written: list[bytes] = []
    stream = SpeedscopeStream(written.append)
    for at in range(0, len(messages), chunk):
        stream.feed(messages[at : at + chunk])
        for comp in stream.session.tree.compiles:
            if comp.end_ns is not None:
                assert not comp.context_order and not comp.codegen_steps, f"compile {comp.id} still held"
        for profile in stream._profiles.values():
            for entry in profile.waiting:
                assert all(isinstance(part, int | tuple) for part in entry), "a waiting compile holds a node"
    stream.finish()
    return b"".join(written), stream


def test_a_compile_that_never_ends_holds_nothing_of_those_after_it() -> None:
    messages = _hung_then(200)
    text, _ = _streamed(messages, chunk=7)
    assert text == _whole(messages)
    profile = json.loads(text)["profiles"][0]
    assert profile["name"].endswith("(201 compiles)")
    # The hung compile is drawn first, to the end, and the others after it, as the whole session draws them.
    events = profile["events"]
    frames = [frame["name"] for frame in json.loads(text)["shared"]["frames"]]
    assert frames[events[0]["frame"]] == "hung" and events[0]["type"] == "O"
    assert events[1]["type"] == "C" and events[1]["at"] == profile["endValue"] - profile["startValue"]


def test_what_waits_is_a_few_numbers_per_compile_whatever_it_ran() -> None:
    """The compiles waiting behind the hung one are kept as their begin, order, key and drawn
    end: as many entries with 20 passes each as with none, and no pass anywhere in the model."""
    for passes in (0, 20):
        messages = [m.compile_begin(compile=0, label="kernel=hung", kernel="hung", target=None, t_ns=1)]
        for number in range(1, 51):
            messages += _compile(number, 1000 * number, passes=passes)
        stream = SpeedscopeStream(lambda data: None)
        stream.feed(messages)
        (profile,) = stream._profiles.values()
        assert len(profile.waiting) == 50 and not profile.runs
        assert all(len(entry) == 4 for entry in profile.waiting)
        assert not stream.session.tree.passes
        assert sum(len(ctx.passes) for comp in stream.session.tree.compiles for ctx in comp.context_order) == 0
        stream.finish()


def test_compiles_of_many_threads_ending_in_any_order_are_the_whole_sessions_file() -> None:
    """Compiles of many threads that overlap and end in any order, one never ending (each drawn
    in begin order, clipped to after the one drawn before it): the same bytes fed in chunks of
    any size."""
    rng = random.Random(17)
    begins: list[tuple[int, int, m.Message]] = []
    ends: list[tuple[int, int, list[m.Message]]] = []
    for number in range(40):
        start = rng.randrange(0, 20_000)
        body = _compile(number, start, passes=rng.randrange(0, 5))
        stop = start + rng.randrange(50, 3_000)
        begins.append((start, number, body[0]))
        ends.append((stop, number, [*body[1:-1], {**body[-1], "t_ns": stop, "duration_ns": stop - start}]))
    begins.append((5_000, 99, m.compile_begin(compile=99, label="kernel=open", kernel="open", target=None, t_ns=5_000)))
    messages = [msg for _, _, msg in sorted(begins)]
    for _, _, tail in sorted(ends):
        messages += tail
    whole = _whole(messages)
    for chunk in (1, 5, 1000):
        text, _ = _streamed(messages, chunk)
        assert text == whole
