"""How stacks read as text, in ``iket-tui stacks`` and the stacks pane: each thread from its
innermost frame (where it is now) outwards, and files short enough that the line numbers stay in
view of a 100-column pane."""

from __future__ import annotations

import json
from pathlib import Path

from iket_tui.sources.stacks import short_path, stack_lines

STACKS = Path(__file__).parents[1] / "ui" / "data" / "stacks-slow-gemm.json"


def _frame(file: str, line: int, function: str, code: str = "") -> dict[str, object]:
    return {"file": file, "line": line, "function": function, "code": code}


def test_each_thread_starts_from_its_innermost_frame_and_ends_with_what_was_left_out() -> None:
    thread = {"id": 7, "name": "MainThread", "main": True, "agent": False, "cut": 3}
    frames = [_frame("/work/prog.py", 10, "main", "run()"), _frame("/work/prog.py", 4, "run", "time.sleep(9)")]
    response = {"ok": True, "cwd": "/work", "threads": [{**thread, "frames": frames}]}
    assert stack_lines(response) == [
        "Thread MainThread (7, main):",
        '  File "prog.py", line 4, in run',
        "    time.sleep(9)",
        '  File "prog.py", line 10, in main',
        "    run()",
        "  ... 3 outer frames left out",
        "",
    ]


def test_paths_shorten_to_the_package_the_standard_library_or_the_programs_directory() -> None:
    cwd = "/home/dev/project"
    packages = "/home/dev/.venv/lib/python3.11/site-packages/tilelang/engine/lower.py"
    assert short_path(packages, cwd) == "tilelang/engine/lower.py"
    assert short_path("/usr/lib/python3/dist-packages/numpy/core/numeric.py", cwd) == "numpy/core/numeric.py"
    assert short_path("/usr/lib/python3.11/threading.py", cwd) == "threading.py"
    assert short_path("/home/dev/project/kernels/gemm.py", cwd) == "kernels/gemm.py"
    assert short_path("/home/dev/project-other/gemm.py", cwd) == "/home/dev/project-other/gemm.py"
    assert short_path("/opt/tools/gemm.py", cwd) == "/opt/tools/gemm.py"  # nothing to place it by: whole
    assert short_path("<frozen runpy>", cwd) == "<frozen runpy>"
    assert short_path("/home/dev/project/gemm.py", None) == "/home/dev/project/gemm.py"  # an agent that did not say


def test_a_stuck_compiles_frames_keep_their_line_numbers_within_100_columns() -> None:
    response = json.loads(STACKS.read_text(encoding="utf-8"))
    lines = stack_lines(response, include_agent=True)
    frames = [line for line in lines if line.startswith('  File "')]
    assert frames and all(len(line) <= 100 for line in frames), max(frames, key=len)
    main = lines.index(next(line for line in lines if line.startswith("Thread MainThread")))
    assert lines[main + 1] == '  File "iket_tui/demo/kernels.py", line 409, in run'  # innermost: the slowed pass
    assert '  File "iket_tui/demo/program.py", line 259, in <module>' in lines
