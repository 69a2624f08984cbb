"""A program that already uses TileLang's own instrumentation works exactly as it does without the
agent, and the agent shows the same passes.

Each program (``targets/instruments.py``) runs twice on real TileLang lowering, once plain and
once with the agent and a client attached from its start: ``TL_LOWER_TRACE=html`` writes the
same files, ``TILELANG_PASS_PROFILE=1`` prints the same report, a user's own
``StackedPassInstrument`` with a ``PassEventObserver`` sees the same pass events, and the phases
set with nested ``pass_phase`` reach the agent's pass rows as the user set them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_wire import TARGETS, WAIT_S, WireClient, events, of_type, socket_of

from iket_tui.protocol import messages as m
from iket_tui.protocol.messages import Message

pytestmark = pytest.mark.tilelang

USER_PASS = "user.PhasedLayoutInference"
USER_PHASE = "user-layout"


@dataclass
class Run:
    """One run of the program: what it printed and, with the agent, what a client received."""

    returncode: int
    stdout: str
    stderr: str
    received: list[Message]

    def passes(self) -> list[list[Message]]:
        """The ``pass_start`` of each compile the agent saw, in the order the compiles began."""
        by_compile: dict[int, list[Message]] = defaultdict(list)
        for msg in of_type(self.received, m.PASS_START):
            by_compile[msg["compile"]].append(msg)
        return [by_compile[begin["compile"]] for begin in of_type(self.received, m.COMPILE_BEGIN)]


def run(mode: str, *args: str, env: dict[str, str], agent: bool) -> Run:
    """``instruments.py MODE ARGS`` with ``env``, plain or with the agent and one client from its start."""
    full_env = {key: value for key, value in os.environ.items() if not key.startswith("IKET_TUI")}
    full_env.update(env)
    if agent:
        full_env.update({"IKET_TUI": "1", "IKET_TUI_WAIT_CLIENT": str(WAIT_S)})
    proc = subprocess.Popen(
        [sys.executable, str(TARGETS / "instruments.py"), mode, *args],
        cwd=TARGETS,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    received: list[Message] = []
    try:
        if agent:
            client = WireClient(socket_of(proc))
            received = client.read_to_end()
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    assert "instruments done" in stdout
    if agent:
        assert received[-1]["type"] == m.BYE
        assert received[-1]["dropped"] == 0
        assert all(beat["observer_errors"] == 0 for beat in of_type(received, m.HEARTBEAT))
    return Run(proc.returncode, stdout, stderr, received)


# TL_LOWER_TRACE=html


@dataclass
class Traced:
    plain: Run
    watched: Run
    plain_files: dict[str, str]
    watched_files: dict[str, str]


def trace_files(root: Path) -> dict[str, str]:
    """Every file the lower trace wrote under ``root``, by path, with the names of its runs (a
    timestamp, the pid and a random suffix) and ``root`` itself replaced by fixed words."""
    (script,) = root.iterdir()
    runs = sorted(path.name for path in (script / ".run_records").iterdir())
    found = {}
    for path in sorted(script.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(script)).removeprefix(".run_records/")
        text = path.read_text(encoding="utf-8", errors="replace").replace(str(root), "TRACE_DIR")
        for number, name in enumerate(runs):
            rel, text = rel.replace(name, f"run{number}"), text.replace(name, f"run{number}")
        found[rel] = text
    return found


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    plain_dir, watched_dir = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("watched")
    plain = run("trace", env={"TL_LOWER_TRACE": "html", "TL_LOWER_TRACE_DIR": str(plain_dir)}, agent=False)
    watched = run("trace", env={"TL_LOWER_TRACE": "html", "TL_LOWER_TRACE_DIR": str(watched_dir)}, agent=True)
    return Traced(plain, watched, trace_files(plain_dir), trace_files(watched_dir))


def test_the_lower_trace_writes_the_same_files_with_the_agent(traced: Traced) -> None:
    assert "run0/report.html" in traced.plain_files
    assert len(traced.plain_files) > 200, "every pass's IR before and after, for both compiles"
    assert traced.watched_files.keys() == traced.plain_files.keys()
    differing = [name for name, text in traced.plain_files.items() if traced.watched_files[name] != text]
    assert differing == []
    said = [line for line in traced.watched.stdout.splitlines() if "[lower_trace] Final HTML report" in line]
    assert len(said) == 2


def test_the_agent_sees_every_pass_the_lower_trace_records(traced: Traced) -> None:
    gemm, failing = traced.watched.passes()
    for number, passes in enumerate((gemm, failing)):
        recorded = {
            name.split("/")[-1].rsplit("_", 1)[0]
            for name in traced.watched_files
            if name.startswith(f"run{number}/") and name.endswith(".tir") and "/codegen/" not in name
        }
        # The trace names a pass's files NN_Name, with its name's last dotted part.
        assert recorded == {f"{msg['seq']:02d}_{msg['name'].rsplit('.', 1)[-1]}" for msg in passes}
    assert failing[-1]["name"] == "tl.LayoutInference"
    (incomplete,) = of_type(traced.watched.received, m.PASS_INCOMPLETE)
    assert (incomplete["name"], incomplete["seq"]) == ("tl.LayoutInference", failing[-1]["seq"])


# TILELANG_PASS_PROFILE=1

_REPORT_ROW = re.compile(r"^\s*(\d+)  (\s*\S.*?)\s+\d+\.\d+s\s+\d+\.\d+s\s+\d+\.\d+%\s+\d+\.\d+%$")


def report_rows(output: str) -> list[tuple[int, str]]:
    """The numbered rows of the pass timing report (TileLang logs it to standard output): number,
    and pass name with its kernel in parentheses, indented by depth."""
    rows = []
    for line in output.splitlines():
        found = _REPORT_ROW.match(line)
        if found:
            rows.append((int(found.group(1)), found.group(2)))
    return rows


@pytest.fixture(scope="module")
def profiled() -> tuple[Run, Run]:
    env = {"TILELANG_PASS_PROFILE": "1"}
    return run("profile", env=env, agent=False), run("profile", env=env, agent=True)


def test_the_pass_timing_report_is_printed_the_same_with_the_agent(profiled: tuple[Run, Run]) -> None:
    plain, watched = profiled
    for each in (plain, watched):
        assert "TileLang Pass Timing Report" in each.stdout
        assert "Context: stage=jit-lower, kernel=add, backend=tvm_ffi" in each.stdout
    assert len(report_rows(plain.stdout)) > 80
    assert report_rows(watched.stdout) == report_rows(plain.stdout)


def test_the_agent_sees_the_passes_the_pass_timing_report_lists(profiled: tuple[Run, Run]) -> None:
    _, watched = profiled
    (passes,) = watched.passes()
    # Each row names the pass, indented two spaces a level, with its kernel in parentheses.
    listed = [
        (re.sub(r"\(.*\)$", "", name.strip()), (len(name) - len(name.lstrip())) // 2)
        for _, name in report_rows(watched.stdout)
    ]
    assert [(msg["name"], msg["depth"]) for msg in passes] == listed
    assert any(depth == 1 for _, depth in listed)
    (total,) = re.findall(r"Total: \d+\.\d+s \((\d+) passes\)", watched.stdout)
    assert int(total) == len(passes)


# A user's own StackedPassInstrument, and nested pass_phase labels


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[list[Any]], list[list[Any]], Run]:
    logs = tmp_path_factory.mktemp("observed")
    run("observer", str(logs / "plain.json"), env={}, agent=False)
    watched = run("observer", str(logs / "watched.json"), env={}, agent=True)
    plain_log = json.loads((logs / "plain.json").read_text())
    watched_log = json.loads((logs / "watched.json").read_text())
    return plain_log, watched_log, watched


def _pass_events(log: list[list[Any]], tag: str) -> list[list[Any]]:
    return [entry for entry in log if entry[0] == tag and entry[1] not in ("enter", "exit")]


def test_a_users_tool_sees_every_callback_it_sees_without_the_agent(
    observed: tuple[list[list[Any]], list[list[Any]], Run],
) -> None:
    plain, watched, _ = observed
    tools = sorted({entry[0] for entry in plain if entry[0].startswith("tool")})
    assert tools == ["tool 1", "tool 2", "tool 3"]
    for tag in tools:
        assert [entry for entry in watched if entry[0] == tag] == [entry for entry in plain if entry[0] == tag]
    assert any(entry[1] == "incomplete" for entry in plain if entry[0] == "tool 3")


def test_a_users_instrument_in_its_own_context_sees_every_pass_event_it_sees_without_the_agent(
    observed: tuple[list[list[Any]], list[list[Any]], Run],
) -> None:
    plain, watched, run = observed
    # TileLang adds any registered tool (the agent is one) to the caller's own PassContext by
    # replacing the context's instruments, which leaves and enters them again around each
    # compile. A StackedPassInstrument numbers its events from 0 again when entered, so with the
    # agent the second compile in the same context is numbered from 0, not on from the first:
    # the same events, renumbered per compile. Its observer also sees more enter and exit calls,
    # always paired and never inside a pass.
    first_compile = len(run.passes()[0])
    expected = []
    for entry in _pass_events(plain, "context"):
        if entry[1] in ("start", "finish") and entry[3] >= first_compile:
            entry = [*entry[:3], entry[3] - first_compile, *entry[4:]]
            if entry[1] == "start" and entry[5] is not None:
                entry[5] -= first_compile
            if entry[1] == "finish":
                entry[4] -= first_compile  # the state pass_started returned: the sequence
        expected.append(entry)
    assert len(expected) > 100
    assert _pass_events(watched, "context") == expected
    depth = 0
    for call in [entry[1] for entry in watched if entry[0] == "context"]:
        if call == "enter":
            assert depth == 0
            depth = 1
        elif call == "exit":
            assert depth == 1
            depth = 0
        else:
            assert depth == 1, "pass events only inside an entered context"


def test_the_agent_sees_the_passes_a_users_observer_sees(
    observed: tuple[list[list[Any]], list[list[Any]], Run],
) -> None:
    plain, _, watched = observed
    compiles = watched.passes()
    seen_by_user = [
        _pass_events(plain, "context"),  # the GEMM and the failing kernel, in one context of the user's
        *(_pass_events(plain, f"tool {number}") for number in (1, 2, 3)),
    ]
    context_starts = [entry for entry in seen_by_user[0] if entry[1] == "start"]
    ours = [*compiles[:2]]
    assert [(e[2], e[4], e[6]) for e in context_starts] == [
        (msg["name"], msg["depth"], msg["phase"]) for msg in ours[0] + ours[1]
    ]
    for user, agents in zip(seen_by_user[1:], compiles[2:], strict=True):
        starts = [entry for entry in user if entry[1] == "start"]
        assert [(e[2], e[4], e[6]) for e in starts] == [(msg["name"], msg["depth"], msg["phase"]) for msg in agents]
    assert len(compiles) == 5


def test_nested_phases_reach_the_pass_rows_as_the_user_set_them(
    observed: tuple[list[list[Any]], list[list[Any]], Run],
) -> None:
    _, _, watched = observed
    _, _, gemm, add, failing = watched.passes()
    assert {msg["phase"] for msg in gemm} == {"outer", "pipeline_cuda"}
    assert {msg["phase"] for msg in add} == {"inner", "pipeline_cuda", USER_PHASE}
    assert {msg["phase"] for msg in failing} == {"outer", "pipeline_cuda"}, "the inner phase ended"
    (user_pass,) = [msg for msg in add if msg["name"] == USER_PASS]
    (nested,) = [msg for msg in add if msg["parent"] == user_pass["seq"]]
    assert (user_pass["depth"], user_pass["phase"]) == (0, "pipeline_cuda")
    assert (nested["name"], nested["depth"], nested["phase"]) == ("tl.LayoutInference", 1, USER_PHASE)
    ends = {
        msg["seq"]: msg for msg in of_type(events(watched.received), m.PASS_END) if msg["compile"] == add[0]["compile"]
    }
    assert ends[nested["seq"]]["phase"] == USER_PHASE
