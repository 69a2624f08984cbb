"""The iket-tui agent: runs inside the watched process and serves its compiler events to clients.

Start it with :func:`start` in code, with ``IKET_TUI=1`` in the environment at interpreter
start (see :mod:`iket_tui.agent.autostart`), or with ``iket-tui run -- CMD``. It never imports
TileLang or TVM: it begins watching TileLang compiles when the program imports TileLang, and
plain Apache TVM compiles when it imports TVM without TileLang (:mod:`iket_tui.agent.tvm_hook`).

A compile aborted from outside (``iket-tui abort``, or the UI's abort key) raises
:class:`CompileAborted` from the compile call (``tilelang.compile``, ``tvm.compile``, ...); it is an
``Exception``, as a failed compile's is, so a program that goes on after a failed compile goes on
after an abort.
"""

from iket_tui.agent import lifecycle, tvm_hook
from iket_tui.agent.abort import CompileAborted
from iket_tui.agent.kernel_options import KernelOptions
from iket_tui.agent.lifecycle import Agent, current, stop
from iket_tui.agent.registry import ClientStats

start = tvm_hook.watching_tvm(lifecycle.start)

__all__ = ["Agent", "ClientStats", "CompileAborted", "KernelOptions", "current", "start", "stop"]
