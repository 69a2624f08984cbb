"""A target that prints ``ready`` and then waits to be sent SIGTERM; ``IKET_TEST_MODE`` says how.

- ``sleeping``: in ``time.sleep``, SIGTERM's disposition left as it was;
- ``waiting``: in ``threading.Event().wait()``;
- ``native``: in one long native call that releases the GIL and never comes back to Python
  code before it ends (as a long C++ pass does);
- ``own-before``: with its own SIGTERM handler (it prints ``own handler ran`` and exits with 7),
  installed before it starts the agent itself (run it without IKET_TUI=1);
- ``own-after``: the same handler, installed after the agent started (IKET_TUI=1);
- ``ignored``: SIGTERM ignored before it starts the agent itself; it then waits for the file
  IKET_TEST_GATE and exits with 0;
- ``compile-end``: lowers the layout_conflict kernel, which fails in ``tl.LayoutInference``, and
  is sent SIGTERM by itself while the agent writes that compile's failure capture.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

mode = os.environ["IKET_TEST_MODE"]


def own_handler(signum: int, _frame: FrameType | None) -> None:
    # os.write, not print: the signal may come while print("ready") still holds stdout's buffer
    # (the test reads "ready" as soon as it is written), and print would raise there.
    os.write(sys.stdout.fileno(), b"own handler ran\n")
    sys.exit(7)


if mode == "own-before":
    signal.signal(signal.SIGTERM, own_handler)
    import iket_tui.agent

    iket_tui.agent.start(wait_for_client_s=120)
elif mode == "own-after":
    signal.signal(signal.SIGTERM, own_handler)
elif mode == "ignored":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import iket_tui.agent

    iket_tui.agent.start(wait_for_client_s=120)

if mode == "compile-end":
    import kernels
    import tilelang

    from iket_tui.agent.tilelang_tool import CompileWatcher

    captured = CompileWatcher._captured_failure

    def terminated_meanwhile(self: CompileWatcher, compile_id: int) -> dict[str, Any] | None:
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next line of Python, inside the capture
        return captured(self, compile_id)

    CompileWatcher._captured_failure = terminated_meanwhile  # type: ignore[method-assign]
    tilelang.disable_cache()
    print("ready", flush=True)
    kernels.lower(kernels.layout_conflict())
    print("the compile's failure came back", flush=True)
    sys.exit(0)

print("ready", flush=True)
if mode == "waiting":
    threading.Event().wait()
elif mode == "native":
    hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 10**9)  # minutes in C, the GIL released
elif mode == "ignored":
    gate = Path(os.environ["IKET_TEST_GATE"])
    while not gate.exists():
        time.sleep(0.01)
    sys.exit(0)
else:
    while True:
        time.sleep(0.05)
