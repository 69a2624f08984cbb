"""A program whose passes of its own are made in every way a program makes them: by a factory
function (as TileLang makes its own), by a factory in a module it imports, by a factory method
of an object, by a factory over the arguments it was called with, by a class decorated with
``module_pass``, by ``module_pass(fn, ...)`` over a closure, and by a factory over an object that
has no literal form (a ``threading.Event``); and one by a factory that a function made, which
cannot be called again. Each is run in a lowering of the demo's GEMM of its own, on a thread of
its own, just before software pipelining, and each hangs: it sleeps for the ten minutes its
factory was told, or waits on an event nobody sets. The program says ``hanging``
once every compile has started, and waits for the file ``IKET_TEST_GATE``; it has no main guard.
A reproducer must rebuild each pass as the program made it, without running the program."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import made_elsewhere
import tilelang.transform
from tilelang import tvm

from iket_tui.demo import kernels

MINUTES = 600.0

print("the program runs", flush=True)  # a reproducer that ran this script would say so too


def stuck() -> Any:
    """The shape TileLang's own passes have: a function that makes the pass."""

    @tvm.transform.module_pass(opt_level=0, name="made.Factory")
    def p(mod: Any, ctx: Any) -> Any:
        threading.Event().wait()  # the factory's pass waits forever
        return mod

    return p


def sleep_for(seconds: float, tag: str, unread: int = 3) -> Any:
    """A pass over its factory's arguments (``unread`` it never reads: its default is used)."""

    @tvm.transform.module_pass(opt_level=0, name="made.Closure")
    def sleeping(mod: Any, ctx: Any) -> Any:
        time.sleep(seconds)  # the closure's pass sleeps as told
        return mod.with_attr("made_tag", tag)

    return sleeping


class Passes:
    """An object whose method makes a pass from what the object holds."""

    def __init__(self, seconds: float, label: str = "passes") -> None:
        self.seconds = seconds
        self.label = label

    def sleeper(self, extra: float) -> Any:
        @tvm.transform.module_pass(opt_level=0, name="made.Method")
        def method_pass(mod: Any, ctx: Any) -> Any:
            time.sleep(self.seconds + extra)  # the method's pass sleeps as its object says
            return mod

        return method_pass


@tvm.transform.module_pass(opt_level=0, name="made.Class")
class SleepingClass:
    """A pass that is a class, made by calling it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def transform_module(self, mod: Any, ctx: Any) -> Any:
        time.sleep(self.seconds)  # the class's pass sleeps as it was made to
        return mod


def called(seconds: float) -> Any:
    """A pass made by calling ``module_pass`` on a function."""

    def body(mod: Any, ctx: Any) -> Any:
        time.sleep(seconds)  # the called module_pass sleeps as told
        return mod

    return tvm.transform.module_pass(body, opt_level=0, name="made.Call")


def waiting_on(event: threading.Event) -> Any:
    """A pass over an object that has no literal form."""

    @tvm.transform.module_pass(opt_level=0, name="made.Event")
    def wait_for_event(mod: Any, ctx: Any) -> Any:
        event.wait()  # waits for an event nobody sets
        return mod

    return wait_for_event


def outer(seconds: float) -> Any:
    """A factory that makes the factory of a pass: no name of the module makes the pass again."""

    def inner() -> Any:
        @tvm.transform.module_pass(opt_level=0, name="made.Nested")
        def nested(mod: Any, ctx: Any) -> Any:
            time.sleep(seconds)  # the nested factory's pass sleeps as told
            return mod

        return nested

    return inner


PASSES = {
    "made.Factory": lambda: stuck(),
    "made.Elsewhere": lambda: made_elsewhere.sleeper(MINUTES),
    "made.Method": lambda: Passes(MINUTES, label="mine").sleeper(0.5),
    "made.Closure": lambda: sleep_for(MINUTES, tag="a"),
    "made.Class": lambda: SleepingClass(seconds=MINUTES),
    "made.Call": lambda: called(MINUTES),
    "made.Event": lambda: waiting_on(threading.Event()),
    "made.Nested": lambda: outer(MINUTES)(),
}
"""Each pass by its name, made as the program makes it, in the order the compiles begin."""

hangs = threading.local()
original = tilelang.transform.InjectSoftwarePipeline


def with_hang(*args: Any, **kwargs: Any) -> Any:
    """Software pipelining with this thread's hanging pass first."""
    return tvm.transform.Sequential([hangs.made, original(*args, **kwargs)], opt_level=0, name="made.Pipelining")


def compiling(name: str, started: threading.Event) -> None:
    hangs.made = PASSES[name]()
    started.set()
    kernels.lower("gemm")


tilelang.transform.InjectSoftwarePipeline = with_hang
for name in PASSES:
    started = threading.Event()
    threading.Thread(target=compiling, args=(name, started), name=name, daemon=True).start()
    started.wait()
print("hanging", flush=True)
gate = Path(os.environ["IKET_TEST_GATE"])
while not gate.exists():
    time.sleep(0.02)
