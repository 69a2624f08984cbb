"""A target that starts one child process the way ``sys.argv[1]`` names (``fork``, ``spawn``,
``forkserver`` or ``subprocess``); the child lowers the add kernel, the parent compiles nothing.

It prints ``{"child": PID, "exitcode": CODE}`` once the child is done.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import kernels
import tilelang


def lower_add() -> None:
    tilelang.disable_cache()
    kernels.lower(kernels.add())


if __name__ == "__main__":
    method = sys.argv[1]
    if method == "subprocess":
        code = "import children; children.lower_add()"
        child = subprocess.Popen([sys.executable, "-c", code])
        child.wait()
        print(json.dumps({"child": child.pid, "exitcode": child.returncode}), flush=True)
    else:
        worker = multiprocessing.get_context(method).Process(target=lower_add)
        worker.start()
        worker.join()
        print(json.dumps({"child": worker.pid, "exitcode": worker.exitcode}), flush=True)
