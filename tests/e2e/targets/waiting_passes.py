"""Lowers the demo's GEMM once for each wait named on the command line, with a pass of its own
that waits that way just before TileLang's software pipelining, catching ``Exception`` around
each compile as an autotuner skipping failing configurations does; then lowers vector_add, and
raises its own signals to see its handlers still run. Waits for the file ``IKET_TEST_GATE``
before it ends.

The waits: ``event`` (``threading.Event().wait()``), ``lock`` (a lock it already holds),
``sleep`` (``time.sleep(600)``), ``select`` (a pipe nobody writes to), ``communicate`` (a child
``sleep 600``), ``suspend`` (``sigsuspend`` letting no signal in but SIGUSR1: native code that
no other signal interrupts), ``swallow`` (an event, with ``except Exception`` around it: the pass goes on);
``nvcc`` compiles vector_add with ``tilelang.compile`` instead, whose codegen runs the nvcc that
``CUDA_HOME`` names.
With ``--thread``, the compiles run on a thread of their own, not the main thread.

The program has handlers of its own for SIGUSR1, SIGUSR2, SIGALRM and SIGRTMAX, the highest
real-time signal, which the agent would take were it free."""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import hang_passes
from tilelang import tvm

from iket_tui.demo import kernels

libc = ctypes.CDLL(None, use_errno=True)
OWN_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGRTMAX)
handled: list[str] = []


def on_signal(signum: int, frame: object) -> None:
    handled.append(signal.Signals(signum).name)


def wait(how: str) -> None:
    if how == "event":
        threading.Event().wait()
    elif how == "lock":
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    elif how == "sleep":
        time.sleep(600)
    elif how == "select":
        read, _ = os.pipe()
        select.select([read], [], [])
    elif how == "communicate":
        child = subprocess.Popen(["sleep", "600"])
        print(f"child {child.pid}", flush=True)
        child.communicate()
    elif how == "suspend":  # native code that lets no signal in but SIGUSR1, until one comes
        mask = ctypes.create_string_buffer(128)  # a sigset_t
        libc.sigfillset(mask)
        libc.sigdelset(mask, signal.SIGUSR1)
        libc.sigsuspend(mask)
    elif how == "swallow":
        try:
            threading.Event().wait()
        except Exception as exc:
            print(f"swallowed {type(exc).__name__}", flush=True)


def waiting(how: str) -> Any:
    @tvm.transform.module_pass(opt_level=0, name="wait_test.Wait")
    def wait_here(mod: Any, ctx: Any) -> Any:
        own = signal.getsignal(signal.SIGRTMAX) is on_signal
        print(f"waiting: {how} (SIGRTMAX the program's: {own})", flush=True)
        wait(how)
        return mod

    return wait_here


def compiles(waits: list[str]) -> None:
    for how in waits:
        if how == "nvcc":
            try:
                kernels.compile("vector_add")
                print("vector_add compiled", flush=True)
            except Exception as exc:  # its message holds the whole generated source: one JSON line
                print(f"caught {type(exc).__name__}: {json.dumps(str(exc))}", flush=True)
            continue
        with hang_passes.before_pipelining(waiting(how)):
            try:
                kernels.lower("gemm")
                print("gemm lowered", flush=True)
            except Exception as exc:
                print(f"caught {type(exc).__name__}: {exc}", flush=True)
    kernels.lower("vector_add")
    print("vector_add lowered", flush=True)


for own in OWN_SIGNALS:
    signal.signal(own, on_signal)
waits = [arg for arg in sys.argv[1:] if arg != "--thread"]
if "--thread" in sys.argv:
    thread = threading.Thread(target=compiles, args=(waits,), name="tuning")
    thread.start()
    thread.join()
else:
    compiles(waits)
for own in OWN_SIGNALS:
    os.kill(os.getpid(), own)
while len(set(handled)) < len(OWN_SIGNALS):
    time.sleep(0.01)
print(f"handled {' '.join(dict.fromkeys(handled))}", flush=True)
others = [
    signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
    for number in range(signal.SIGRTMIN, signal.SIGRTMAX)
    if signal.getsignal(number) != signal.SIG_DFL
]
print(f"other real-time handlers: {others}", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
