"""Capture the stacks answer that the stacks pane's snapshot shows: the demo program held inside
``tl.InjectSoftwarePipeline`` (slowed to minutes) is asked for its stacks through its agent, as
the pane asks, and the answer is written to ``stacks-slow-gemm.json`` with the paths of this
machine replaced by neutral ones, so the snapshot is the same wherever it runs.

    python tests/ui/data/capture_stacks.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
OUT = HERE / "stacks-slow-gemm.json"
SLEEPING = "time.sleep(seconds)"
WAIT_S = 120.0


def neutral_paths() -> list[tuple[str, str]]:
    """This machine's prefixes, longest first, and what each becomes."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefixes = {
        sysconfig.get_paths()["purelib"]: f"/home/dev/venv/lib/{version}/site-packages",
        sysconfig.get_paths()["stdlib"]: f"/usr/lib/{version}",
        str(REPO): "/home/dev/iket-tui",
    }
    return sorted(prefixes.items(), key=lambda item: -len(item[0]))


def normalised(response: dict[str, Any]) -> dict[str, Any]:
    """The answer with neutral paths, a fixed request id and time, and thread ids numbered."""
    prefixes = neutral_paths()
    threads = []
    for number, thread in enumerate(response["threads"], 1):
        frames = []
        for frame in thread["frames"]:
            path = frame["file"]
            for prefix, neutral in prefixes:
                if path.startswith(prefix):
                    path = neutral + path[len(prefix) :]
                    break
            frames.append({**frame, "file": path})
        threads.append({**thread, "id": 139_900_000_000_000 + number * 4096, "frames": frames})
    return {**response, "id": 1, "t_ns": 0, "threads": threads}


def main() -> None:
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from live_target import main_code, socket_of, start_stuck_program

    from iket_tui.protocol import messages as m
    from iket_tui.sources.socket import SocketSource

    runtime = Path(tempfile.mkdtemp(prefix="ik"))
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    program, _ = start_stuck_program()
    try:
        source = SocketSource(socket_of(program))  # one client, as the app is
        source.connect()
        deadline = time.monotonic() + WAIT_S
        captured: dict[str, Any] | None = None
        asked = source.request(m.WHAT_STACKS)
        for batch in source.batches():
            response = next((a.response for a in batch.answers if a.request_id == asked), None)
            if response is not None and SLEEPING in main_code(response):
                captured = response
                break
            if response is not None:
                time.sleep(0.2)
                asked = source.request(m.WHAT_STACKS)
            if time.monotonic() > deadline:
                break
        source.close_and_wait("captured")
        if captured is None:
            raise SystemExit("the program never reached the slowed pass")
    finally:
        program.kill()
        program.wait()
        shutil.rmtree(runtime, ignore_errors=True)
    OUT.write_text(json.dumps(normalised(captured), indent=1) + "\n", encoding="utf-8")
    print(OUT)


if __name__ == "__main__":
    main()
