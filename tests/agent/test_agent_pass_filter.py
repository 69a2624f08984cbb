"""A client's pass filter (``--passes``, ``--depth``): applied per client by its sender, counted, never silent.

Two clients of one agent filter differently; what each is left without is counted in its sync,
heartbeats and bye; a pass kept inside passes left out hangs under the nearest kept pass; a
filter that cannot be applied is refused in one line. The filter itself is a pure function of
the stream, tested on rows alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_wire import WireClient, events, of_type, wait_until

from iket_tui.agent.pass_filter import FilterError, PassChoice, PassFilter
from iket_tui.agent.registry import Registry
from iket_tui.agent.server import AgentServer
from iket_tui.protocol import messages as m
from iket_tui.protocol.codec import check_hello, encode_message
from iket_tui.protocol.messages import PassTuple


def start(compile_id: int, seq: int, name: str, depth: int, parent: int | None, t: int = 0) -> PassTuple:
    return (m.PASS_START, compile_id, 0, name, seq, depth, parent, "pipeline_cuda", t, None)


def end(row: PassTuple, t: int = 1) -> PassTuple:
    return (m.PASS_END, *row[1:8], t, t - row[8])


def pipeline(compile_id: int = 1) -> list[PassTuple]:
    """A compile's pass events in order: a top-level pass with two nested ones, then two top-level passes.

    tl.Outer (0) > [Inner (1), tl.Deep (2)], Simplify (3), tl.LayoutInference (4)
    """
    outer = start(compile_id, 0, "tl.Outer", 0, None)
    inner = start(compile_id, 1, "Inner", 1, 0)
    deep = start(compile_id, 2, "tl.Deep", 1, 0)
    simplify = start(compile_id, 3, "Simplify", 0, None)
    layout = start(compile_id, 4, "tl.LayoutInference", 0, None)
    return [outer, inner, end(inner), deep, end(deep), end(outer), simplify, end(simplify), layout, end(layout)]


def shown(items: list[Any]) -> list[tuple[str, str, int | None]]:
    """What the tree would get: each pass event's type, name and parent."""
    out = []
    for item in items:
        msg = m.as_message(item)
        if msg["type"] in m.PASS_EVENTS:
            out.append((msg["type"], msg["name"], msg["parent"]))
    return out


# The filter on rows alone


def test_no_filter_keeps_every_event_and_counts_nothing() -> None:
    rows = pipeline()
    kept = PassFilter(PassChoice()).apply(rows)
    assert kept == rows


def test_globs_keep_matching_passes_and_count_the_others() -> None:
    choice = PassChoice(globs=("tl.*",))
    pass_filter = PassFilter(choice)
    kept = pass_filter.apply(pipeline())
    assert [name for kind, name, _ in shown(kept) if kind == m.PASS_START] == [
        "tl.Outer",
        "tl.Deep",
        "tl.LayoutInference",
    ]
    assert pass_filter.counts() == {"filtered": 4, "filtered_passes": 2}


def test_several_globs_keep_a_pass_matching_any_of_them() -> None:
    kept = PassFilter(PassChoice(globs=("*Layout*", "Simp*"))).apply(pipeline())
    assert [name for kind, name, _ in shown(kept) if kind == m.PASS_START] == ["Simplify", "tl.LayoutInference"]


def test_depth_zero_keeps_top_level_passes_only() -> None:
    pass_filter = PassFilter(PassChoice(depth=0))
    kept = pass_filter.apply(pipeline())
    assert [name for kind, name, _ in shown(kept) if kind == m.PASS_START] == [
        "tl.Outer",
        "Simplify",
        "tl.LayoutInference",
    ]
    assert pass_filter.counts() == {"filtered": 4, "filtered_passes": 2}


def test_globs_and_depth_together_keep_what_both_keep() -> None:
    kept = PassFilter(PassChoice(globs=("tl.*",), depth=0)).apply(pipeline())
    assert [name for kind, name, _ in shown(kept) if kind == m.PASS_START] == ["tl.Outer", "tl.LayoutInference"]


def test_a_pass_kept_inside_one_left_out_hangs_under_the_nearest_kept_pass() -> None:
    a = start(1, 0, "tl.A", 0, None)
    b = start(1, 1, "B", 1, 0)
    c = start(1, 2, "C", 2, 1)
    d = start(1, 3, "tl.D", 3, 2)
    top = start(1, 4, "E", 0, None)
    f = start(1, 5, "tl.F", 1, 4)
    rows = [a, b, c, d, end(d), end(c), end(b), end(a), top, f, end(f), end(top)]
    kept = PassFilter(PassChoice(globs=("tl.*",))).apply(rows)
    assert shown(kept) == [
        (m.PASS_START, "tl.A", None),
        (m.PASS_START, "tl.D", 0),
        (m.PASS_END, "tl.D", 0),
        (m.PASS_END, "tl.A", None),
        (m.PASS_START, "tl.F", None),
        (m.PASS_END, "tl.F", None),
    ]
    assert [m.as_message(row)["depth"] for row in kept] == [0, 3, 3, 0, 1, 1], "depths stay real, as TileLang's"


def test_pass_events_sent_as_maps_are_filtered_too_and_everything_else_kept() -> None:
    outer = start(1, 0, "tl.Outer", 0, None)
    inner = start(1, 1, "Inner", 1, 0)
    begin = m.compile_begin(compile=1, label="lower", kernel="k", target=None, t_ns=0)
    incomplete = m.pass_incomplete(
        compile=1, context=0, name="Inner", seq=1, depth=1, parent=0, phase=None, t_ns=5, error="ValueError: no"
    )
    failure = {"type": m.COMPILE_FAILURE, "compile": 1, "seq": 1, "name": "Inner", "stage": "pass"}
    ended = m.compile_end(compile=1, label="lower", t_ns=6, duration_ns=6, ok=False, error="ValueError: no")
    pass_filter = PassFilter(PassChoice(globs=("tl.*",)))
    kept = pass_filter.apply([begin, outer, inner, incomplete, failure, ended])
    assert kept == [begin, outer, failure, ended], "the failure still names the pass left out"
    assert pass_filter.counts() == {"filtered": 2, "filtered_passes": 1}


def test_open_passes_left_out_are_forgotten_when_their_compile_ends() -> None:
    pass_filter = PassFilter(PassChoice(globs=("tl.*",)))
    pass_filter.apply([start(1, 0, "Outer", 0, None), start(1, 1, "Inner", 1, 0)])
    assert pass_filter._hidden
    pass_filter.apply([m.compile_end(compile=1, label="", t_ns=1, duration_ns=1, ok=False)])
    assert not pass_filter._hidden


@pytest.mark.parametrize(
    ("field", "why"),
    [
        ("tl.*", "a filter that is not a map (str)"),
        ({"passes": "tl.*"}, "a filter whose passes are not a list of at most 64 globs"),
        ({"passes": ["tl.*"] * 65}, "a filter whose passes are not a list of at most 64 globs"),
        ({"passes": [""]}, "a pass glob that is not a string of 1 to 256 characters"),
        ({"passes": [7]}, "a pass glob that is not a string of 1 to 256 characters"),
        ({"depth": -1}, "a filter depth that is not a whole number from 0 to 1000000"),
        ({"depth": True}, "a filter depth that is not a whole number from 0 to 1000000"),
    ],
)
def test_a_filter_that_cannot_be_applied_says_why(field: object, why: str) -> None:
    with pytest.raises(FilterError) as raised:
        PassChoice.of_hello({"filter": field})
    assert str(raised.value) == why


def test_a_filter_names_globs_once_and_unknown_keys_are_ignored() -> None:
    choice = PassChoice.of_hello({"filter": {"passes": ["tl.*", "tl.*", "*Simplify"], "later": 1}})
    assert choice == PassChoice(globs=("tl.*", "*Simplify"), depth=None)
    assert PassChoice.of_hello({}).keeps_everything


# Two real clients of one agent


@dataclass
class Served:
    """An agent's socket server over a registry of its own, away from this process's."""

    server: AgentServer
    registry: Registry

    def stop(self) -> None:
        self.server.close(reason="stopped")


@pytest.fixture
def agent() -> Iterator[Served]:
    served = Served(AgentServer(registry := Registry(), heartbeat_s=0.05), registry)
    served.server.start()
    yield served
    served.stop()


def connect(path: Path, filters: dict[str, Any] | None) -> WireClient:
    """A client whose hello names ``filters`` (no ``filter`` field when ``None``)."""
    client = WireClient(path, hello=False)
    first = client.next()
    assert first is not None
    check_hello(first, expect_role="agent")
    hello = m.hello(role="client", pid=os.getpid(), start_time=0, software_version="test", capabilities=[])
    if filters is not None:
        hello["filter"] = filters
    client.sock.sendall(encode_message(hello))
    return client


def emit(registry: Registry, rows: list[PassTuple]) -> None:
    for row in rows:
        if row[0] == m.PASS_START:
            registry.emit_pass_start(row, row[1], row[4])
        else:
            registry.emit_pass_end(row, row[1], row[4])


def test_two_clients_filter_differently_and_each_is_told_what_it_was_left_without(
    agent: Served,
) -> None:
    registry = agent.registry
    begin = m.compile_begin(compile=41, label="lower", kernel="k", target=None, t_ns=0)
    registry.emit(begin)
    rows = pipeline(compile_id=41)
    emit(registry, rows[:3])  # tl.Outer runs, Inner ran: the catch-up holds them
    clients = {
        "all": connect(agent.server.path, None),
        "top": connect(agent.server.path, {"depth": 0}),
        "tl": connect(agent.server.path, {"passes": ["tl.*"]}),
    }
    syncs = {name: client.catch_up()[1] for name, client in clients.items()}
    emit(registry, rows[3:])
    registry.emit(m.compile_end(compile=41, label="lower", t_ns=9, duration_ns=9, ok=True))
    for client in clients.values():
        client.read_until(lambda msg: msg["type"] == m.COMPILE_END and msg["compile"] == 41)
    beats = {name: client.read_until(lambda msg: msg["type"] == m.HEARTBEAT) for name, client in clients.items()}
    agent.stop()
    byes = {name: client.read_to_end()[-1] for name, client in clients.items()}

    ours = {
        name: [msg for msg in events(client.received) if msg.get("compile") == 41] for name, client in clients.items()
    }
    assert {name: [msg["name"] for msg in of_type(msgs, m.PASS_START)] for name, msgs in ours.items()} == {
        "all": ["tl.Outer", "Inner", "tl.Deep", "Simplify", "tl.LayoutInference"],
        "top": ["tl.Outer", "Simplify", "tl.LayoutInference"],
        "tl": ["tl.Outer", "tl.Deep", "tl.LayoutInference"],
    }
    for msgs in ours.values():
        assert of_type(msgs, m.COMPILE_BEGIN) == [begin], "compiles always reach every client"
    assert "filtered" not in syncs["all"], "a client that asked for no filter is told of none"
    assert "filtered" not in beats["all"] and "filtered" not in byes["all"]
    # What the catch-up held that the top-level client was left without: nested pass events (Inner's two here).
    catch_up = clients["all"].received[1 : clients["all"].received.index(syncs["all"])]
    nested = [msg for msg in catch_up if msg["type"] in m.PASS_EVENTS and msg["depth"] > 0]
    assert (syncs["top"]["filtered"], syncs["top"]["filtered_passes"]) == (
        len(nested),
        len(of_type(nested, m.PASS_START)),
    )
    assert len(nested) == 2
    for name in ("top", "tl"):
        live = (
            beats[name]["filtered"] - syncs[name]["filtered"],
            beats[name]["filtered_passes"] - syncs[name]["filtered_passes"],
        )
        assert live == {"top": (2, 1), "tl": (2, 1)}[name], "Deep (or Simplify) left out live, start and end"
        assert (byes[name]["type"], byes[name]["filtered"]) == (m.BYE, beats[name]["filtered"])


def test_what_a_filter_leaves_out_keeps_the_accounting_exact(agent: Served) -> None:
    client = connect(agent.server.path, {"passes": ["tl.*"]})
    _, sync = client.catch_up()
    emit(agent.registry, pipeline(compile_id=77))
    client.read_until(lambda msg: msg.get("name") == "tl.LayoutInference" and msg["type"] == m.PASS_END)
    wait_until(lambda: agent.registry.client_stats()[0].queued == 0)
    (stats,) = agent.registry.client_stats()
    assert stats.produced == stats.delivered + stats.dropped + stats.queued == 10
    beat = client.read_until(lambda msg: msg["type"] == m.HEARTBEAT)
    shown_live = [msg for msg in events(client.received) if msg.get("compile") == 77]
    assert len(shown_live) + beat["filtered"] - sync["filtered"] == 10


def test_a_client_whose_filter_cannot_be_applied_is_refused_in_one_line(agent: Served) -> None:
    client = connect(agent.server.path, {"depth": "deep"})
    assert client.read_to_end()[1:] == [], "hung up on before anything is sent"
    wait_until(lambda: agent.server.refused == 1)
    (why,) = agent.server.refusals
    assert why == f"client pid {os.getpid()}: sent a filter depth that is not a whole number from 0 to 1000000"
