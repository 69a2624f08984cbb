"""The UI watching a job across machines at idle: 64 ranks on 8 hosts, one ssh connection each.

The hosts are ports of one OpenSSH server on loopback whose sessions each have a runtime
directory of their own (``tests/e2e/ssh_server.py``), so that each "host" sees only its own 8
agents, as the machines of a cluster do. The ranks are real processes running the real agent,
each with ``RANK`` set, that emitted one compile of a few passes and then idle
(``tests/e2e/targets/job_rank.py``; rank 37 stays in ``tl.LayoutInference``), so what comes is
what a job between compiles sends: each agent's heartbeat every second. The UI is ``IketApp``
over ``attach node[1-8]:``'s source, headless at 160x48, in this process:

- idle CPU: this process's CPU time (every thread: the app, the 64 readers, the 8 links) over
  :data:`IDLE_S` seconds once all 64 ranks are in the tree, as a share of one core; the 8 ssh
  clients' CPU is said beside it;
- frame: the tree's every line of the screen painted from a cold cache, and the header, after
  the views are refreshed, as a frame after a change draws them (median of 50).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from benchmarks.results import Figure, median

ROOT = Path(__file__).resolve().parents[1]
RANK = ROOT / "tests" / "e2e" / "targets" / "job_rank.py"
HOSTS = 8
RANKS_PER_HOST = 8
IDLE_S = 20.0
SETTLE_S = 10.0
FRAMES = 50


def _ssh_server() -> ModuleType:
    """tests/e2e/ssh_server.py, imported by path (as the tests import it)."""
    spec = importlib.util.spec_from_file_location("bench_ssh_server", ROOT / "tests" / "e2e" / "ssh_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ssh_clients() -> list[int]:
    """This process's ssh children (one per host)."""
    me = os.getpid()
    children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
    return [int(pid) for pid in children if Path(f"/proc/{pid}/comm").read_text().strip() == "ssh"]


async def _watch(hosts: str) -> tuple[float, float, float, int]:
    from iket_tui.cli.targets import job_source, job_targets
    from iket_tui.ui.app import IketApp

    source = job_source(job_targets([hosts]), record_to=None, filters={})
    app = IketApp(source, by_rank=True)
    async with app.run_test(size=(160, 48)) as pilot:
        ranks = HOSTS * RANKS_PER_HOST
        deadline = time.monotonic() + 300
        while sum(1 for process in app.pass_tree.processes if process.compiles) < ranks:
            assert time.monotonic() < deadline, "not every rank reached the tree"
            await pilot.pause(0.2)
        await pilot.pause(SETTLE_S)
        ssh = _ssh_clients()
        ssh_before = sum(_cpu_s(pid) for pid in ssh)
        cpu_before, wall_before = time.process_time(), time.monotonic()
        await pilot.pause(IDLE_S)
        idle = (time.process_time() - cpu_before) / (time.monotonic() - wall_before)
        ssh_idle = (sum(_cpu_s(pid) for pid in ssh) - ssh_before) / IDLE_S
        frames = []
        view = app.view
        for _ in range(FRAMES):
            view._cache.clear()
            t0 = time.perf_counter()
            app.refresh_views()
            for y in range(view.size.height):
                view.render_line(y)
            app.header.text()
            frames.append(time.perf_counter() - t0)
            await pilot.pause(0.01)
        behind = app.header.text()
        processes = len(app.pass_tree.processes)
    source.close_and_wait()
    assert "node5/rank 37 has been in `tl.LayoutInference`" in behind, behind
    return idle, ssh_idle, median(frames), processes


def run() -> list[Figure]:
    server_module = _ssh_server()
    home = Path(tempfile.mkdtemp(prefix="iks"))
    own = Path(tempfile.mkdtemp(prefix="ik"))
    runtimes = {f"node{n}": Path(tempfile.mkdtemp(prefix="ik")) for n in range(1, HOSTS + 1)}
    server = server_module.start_sshd(home, iket_bin=Path(sys.executable).parent, runtime_dir=own, hosts=runtimes)
    saved = {name: os.environ.get(name) for name in ("XDG_RUNTIME_DIR", "IKET_TUI_SSH", "IKET_TUI")}
    os.environ.update(XDG_RUNTIME_DIR=str(own), IKET_TUI_SSH=f"ssh -F {server.client_config}", IKET_TUI="")
    ranks: list[subprocess.Popen[str]] = []
    try:
        for number, runtime in enumerate(runtimes.values()):
            for local in range(RANKS_PER_HOST):
                env = {
                    **os.environ,
                    "XDG_RUNTIME_DIR": str(runtime),
                    "RANK": str(number * RANKS_PER_HOST + local),
                    "IKET_TEST_SLOW_RANK": "37",
                }
                ranks.append(
                    subprocess.Popen(
                        [sys.executable, str(RANK)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
                    )
                )
        for process in ranks:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        rss_mb = sum(_rss_kb(process.pid) for process in ranks) / 1024
        idle, ssh_idle, frame_s, processes = asyncio.run(_watch(f"node[1-{HOSTS}]:"))
    finally:
        for process in ranks:
            process.kill()
            process.wait()
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for path in (home, own, *runtimes.values()):
            shutil.rmtree(path, ignore_errors=True)
    detail = (
        f"{processes} ranks on {HOSTS} hosts, one ssh each; each agent's heartbeat every second;"
        f" the 8 ssh clients {100 * ssh_idle:.1f}% of a core together; the ranks {rss_mb:.0f} MB resident in all"
    )
    return [
        Figure("UI's CPU at idle, 64 ranks on 8 hosts", 100 * idle, "% of a core", 5.0, detail),
        Figure("UI frame, 64 ranks on 8 hosts (tree and header, cold cache)", 1000 * frame_s, "ms", 16.0, detail),
    ]


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
