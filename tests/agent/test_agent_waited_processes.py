"""The processes a thread waits on, read from its frames, with those under them, and how an abort
ends them: real children (a shell that starts a child ignoring SIGTERM and waits for it)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from iket_tui.agent import waited_processes

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
)


def test_the_children_a_thread_waits_on_are_named_and_ended_tree_and_all(tmp_path: Path) -> None:
    script = tmp_path / "nvcc"
    script.write_text(f'#!/bin/sh\n{sys.executable} -c "{STUBBORN}" &\nwait\n')
    script.chmod(0o755)
    child = subprocess.Popen([str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    found: list[waited_processes.ChildProcess] = []
    try:
        outcome: list[tuple[str, int | None]] = []
        waiter = threading.Thread(target=lambda: outcome.append((child.communicate()[0], child.returncode)))
        waiter.start()
        time.sleep(0.2)
        frame = sys._current_frames()[waiter.ident]  # type: ignore[index]
        found = waited_processes.waited_on(frame)
        assert found[0].pid == child.pid and found[0].name == "nvcc"
        assert found[0].command == f"/bin/sh {script}", "a script: its interpreter, then the script"
        (under,) = found[1:]
        assert under.ppid == child.pid and "time.sleep(600)" in under.command
        assert waited_processes.named(found) == f"nvcc (pid {child.pid}), {under.name} (pid {under.pid})"
        assert waited_processes.waited_on(sys._current_frames()[threading.get_ident()]) == [], (
            "this thread waits on none"
        )

        started = time.monotonic()
        ended = dict(waited_processes.end(found, grace_s=0.5))
        assert ended == {found[0]: "SIGTERM", under: "SIGKILL"}, "the one ignoring SIGTERM is killed after the grace"
        assert 0.5 <= time.monotonic() - started < 5
        waiter.join(10)
        assert outcome == [("", -15)]
        assert not Path(f"/proc/{under.pid}").exists() or "Z" in Path(f"/proc/{under.pid}/stat").read_text().split()[2]
    finally:  # whatever failed, nothing is left running
        waited_processes.end(found or waited_processes.with_descendants([child.pid]), grace_s=0.1)
