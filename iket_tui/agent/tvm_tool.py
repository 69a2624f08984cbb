"""How the agent watches plain Apache TVM: each compile becomes a
:class:`~iket_tui.agent.tvm_compile.TvmCompile`, which sees its passes through TVM's own pass instruments.

A compile is one call of ``tvm.compile``, ``tvm.relax.build``, ``tvm.tirx.build`` or ``tvm.build``
made outside any other: the calls it makes itself (``tvm.compile`` calls ``relax.build``, which
calls ``tirx.build``) belong to it and name the phase of the passes they run. It is labelled by
what it compiles (the module's or the function's name) and the target. While the agent watches,
three things of TVM's are wrapped, and :func:`unregister` puts them back:

- the compile entry points above;
- ``PassContext.__init__``: every pass context made from then on carries one more instrument
  after the user's own, whose callbacks are those of a :class:`ContextTap`. It notes the passes
  of that context (:mod:`~iket_tui.agent.pass_notes`) while a compile runs on the thread, and
  nothing otherwise. TVM asks only instruments that define ``should_run`` whether a pass runs
  and calls the others in order, so the user's instruments see what they see without the agent;
- ``codegen_build``: each ``target.build.<kind>`` call of a compile is a codegen step.

A compile run in TVM's default pass context (no ``with PassContext``), or in one made before the
agent watched and without instruments, runs in a copy of that context that has a tap (the same
optimisation level, required and disabled passes and configuration). A context made before the
agent watched that has instruments of its own is left as it is and its passes are not seen:
a copy would run those instruments' enter and exit callbacks once more.

The tap's callbacks hold the tap, never the TVM object that carries them: TVM keeps a Python
instrument alive as long as its callbacks, so an instrument whose callbacks are its own bound
methods outlives its pass context forever. Nothing here may raise into the compiler: a failure of
the watcher is counted in the registry and the compile goes on.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any, Final

from tvm import transform
from tvm.ir.instrument import pass_instrument

from iket_tui.agent import abort
from iket_tui.agent.registry import Registry
from iket_tui.agent.tvm_compile import TvmCompile, TvmPassNotes

ENTRY_POINTS: Final = (
    ("tvm", "compile", "tvm.compile"),
    ("tvm", "build", "tvm.build"),
    ("tvm.relax", "build", "relax.build"),
    ("tvm.tirx", "build", "tirx.build"),
    ("tvm.tir", "build", "tir.build"),
)
"""(module, attribute, the name a compile is labelled with) of every compile entry point."""

CODEGEN_MODULES: Final = ("tvm.tirx.build", "tvm.tir.build")
"""The modules whose ``codegen_build`` turns a lowered module into a runtime module."""

_WATCHING: Final = "_iket_tui_watching"

_thread = threading.local()
"""Per thread: ``compile``, the compile running there; ``entry``, its innermost entry point running;
``entered``, the taps of the pass contexts entered there and not yet left, innermost last."""


def register(registry: Registry) -> None:
    """Watch every plain TVM compile that starts from now on (once: a second call does nothing)."""
    context_class = transform.PassContext
    if getattr(context_class.__init__, _WATCHING, False):
        return
    context_class.__init__ = _with_tap(context_class.__init__, registry)
    for module_name, attribute, entry in ENTRY_POINTS:
        module = sys.modules.get(module_name)
        function = getattr(module, attribute, None)
        if callable(function) and not getattr(function, _WATCHING, False):
            setattr(module, attribute, _compiling(function, entry, registry))
    for module_name in CODEGEN_MODULES:
        module = sys.modules.get(module_name)
        function = getattr(module, "codegen_build", None)
        if callable(function) and not getattr(function, _WATCHING, False):
            module.codegen_build = _generating(function)  # type: ignore[union-attr]
    try:
        abort.register_with_tvm()
    except Exception:
        registry.observer_errors += 1


def unregister() -> None:
    """Put TVM's own functions back (those that something else wrapped after the agent stay)."""
    context_class = transform.PassContext
    if getattr(context_class.__init__, _WATCHING, False):
        context_class.__init__ = context_class.__init__.__wrapped__
    places = [(name, attribute) for name, attribute, _entry in ENTRY_POINTS]
    places += [(name, "codegen_build") for name in CODEGEN_MODULES]
    for module_name, attribute in places:
        module = sys.modules.get(module_name)
        function = getattr(module, attribute, None)
        if getattr(function, _WATCHING, False):
            setattr(module, attribute, function.__wrapped__)  # type: ignore[union-attr]


def _watching(registry: Registry) -> bool:
    """Whether an agent runs in this process (none in a child made by ``fork`` until it starts one)."""
    return registry.agent is not None


# The pieces of TVM that are wrapped


def _with_tap(
    init: Callable[..., None], registry: Registry, tapped: Callable[[], bool] | None = None
) -> Callable[..., None]:
    """``PassContext.__init__``, adding a tap after the instruments the caller gave (only where
    ``tapped`` says so, when it is given)."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def init_with_tap(self: Any, *args: Any, **kwargs: Any) -> None:
        if _watching(registry) and (tapped is None or tapped()):
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError:
                bound = None  # TVM's own call below says what is wrong
            instruments = bound.arguments.get("instruments") if bound is not None else None
            if bound is not None and (instruments is None or isinstance(instruments, list | tuple)):
                try:
                    bound.arguments["instruments"] = [*(instruments or ()), _new_tap(registry)]
                    args, kwargs = bound.args[1:], bound.kwargs
                except Exception:
                    registry.observer_errors += 1
        init(self, *args, **kwargs)

    setattr(init_with_tap, _WATCHING, True)
    return init_with_tap


def _compiling(function: Callable[..., Any], entry: str, registry: Registry) -> Callable[..., Any]:
    """A compile entry point that, called outside any compile, makes the call one compile."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def compiling(*args: Any, **kwargs: Any) -> Any:
        outer_entry = getattr(_thread, "entry", None)
        _thread.entry = entry
        try:
            if getattr(_thread, "compile", None) is not None or not _watching(registry):
                return function(*args, **kwargs)
            compile = _begin(registry, entry, signature, args, kwargs)
            if compile is None:
                return function(*args, **kwargs)
            return _run(compile, function, args, kwargs)
        finally:
            _thread.entry = outer_entry

    setattr(compiling, _WATCHING, True)
    return compiling


def _run(compile: TvmCompile, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    error: BaseException | None = None
    _thread.compile = compile
    try:
        with _pass_scope(compile):
            try:
                return function(*args, **kwargs)
            except BaseException as exc:
                error = exc
                compile.failed(exc)
                raise
    finally:
        _thread.compile = None
        compile.finish(error)


def _begin(
    registry: Registry, entry: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> TvmCompile | None:
    """A compile of what ``args`` name, announced; None if the watcher cannot tell (counted)."""
    try:
        given = signature.bind_partial(*args, **kwargs).arguments
        compile = TvmCompile(registry, entry, given.get("mod"), given.get("target"), _phase_now)
        compile.announce()
        return compile
    except Exception:
        registry.observer_errors += 1
        return None


def _generating(codegen_build: Callable[..., Any]) -> Callable[..., Any]:
    """``codegen_build``, a codegen step of the compile running on this thread, if any."""

    @functools.wraps(codegen_build)
    def generating(mod: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        compile: TvmCompile | None = getattr(_thread, "compile", None)
        if compile is None:
            return codegen_build(mod, target, *args, **kwargs)
        name = f"target.build.{_kind(target)}"
        started = compile.codegen_began(name)
        try:
            result = codegen_build(mod, target, *args, **kwargs)
        except BaseException as exc:
            compile.codegen_ended(name, started, exc)
            raise
        compile.codegen_ended(name, started, None)
        return result

    setattr(generating, _WATCHING, True)
    return generating


# One pass context's instrument


class ContextTap:
    """The instrument callbacks of one pass context: they note its passes into the notes of the
    compile running on the thread that entered it, and do nothing while no compile runs there."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.handle = 0
        """The address of the TVM instrument that carries the tap."""
        self.notes: TvmPassNotes | None = None
        self.thread: int | None = None
        """The thread whose compile the notes are of (a context may be entered by several)."""

    def bind(self, notes: TvmPassNotes) -> None:
        """Note this context's passes, on this thread, into ``notes`` from now on, and enter them."""
        self.notes = notes
        self.thread = threading.get_ident()
        notes.enter_pass_ctx()

    def unbind(self) -> None:
        """Leave the notes bound (their context is left) and note nothing more."""
        notes, self.notes = self.notes, None
        self.thread = None
        if notes is not None:
            notes.exit_pass_ctx()

    def enter_pass_ctx(self) -> None:
        try:
            _entered().append(self)
            compile: TvmCompile | None = getattr(_thread, "compile", None)
            if compile is not None and self.notes is None:
                self.bind(compile.new_context())
        except Exception:
            self.registry.observer_errors += 1

    def exit_pass_ctx(self) -> None:
        try:
            entered = _entered()
            if entered and entered[-1] is self:
                entered.pop()
            if self.notes is not None and self.thread == threading.get_ident():
                self.unbind()
        except Exception:
            self.registry.observer_errors += 1

    def run_before_pass(self, mod: Any, info: Any) -> None:
        notes = self.notes
        if notes is not None and self.thread == threading.get_ident():
            notes.run_before_pass(mod, info)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        notes = self.notes
        if notes is not None and self.thread == threading.get_ident():
            notes.run_after_pass(mod, info)


@pass_instrument
class IketTuiInstrument:
    """The TVM instrument of a :class:`ContextTap`: its callbacks are the tap's, so that TVM, which
    holds the callbacks, holds the tap and not this object (see the module's docstring)."""

    def __init__(self, tap: ContextTap) -> None:
        self.enter_pass_ctx = tap.enter_pass_ctx  # type: ignore[method-assign]
        self.exit_pass_ctx = tap.exit_pass_ctx  # type: ignore[method-assign]
        self.run_before_pass = tap.run_before_pass  # type: ignore[method-assign]
        self.run_after_pass = tap.run_after_pass  # type: ignore[method-assign]

    # Declared so that TVM asks the instance for them; the instance's own are the tap's.
    def enter_pass_ctx(self) -> None: ...

    def exit_pass_ctx(self) -> None: ...

    def run_before_pass(self, mod: Any, info: Any) -> None: ...

    def run_after_pass(self, mod: Any, info: Any) -> None: ...


def _new_tap(registry: Registry) -> Any:
    """A new tap, as the TVM instrument that carries it."""
    tap = ContextTap(registry)
    instrument: Any = IketTuiInstrument(tap)
    tap.handle = instrument.__chandle__()
    return instrument


def _entered() -> list[ContextTap]:
    entered: list[ContextTap] | None = getattr(_thread, "entered", None)
    if entered is None:
        entered = _thread.entered = []
    return entered


def _tap_of(context: Any) -> ContextTap | None:
    """The tap of ``context``, the pass context in force on this thread, if it has one."""
    entered = _entered()
    if not entered:
        return None
    innermost = entered[-1]
    return (
        innermost if any(instrument.__chandle__() == innermost.handle for instrument in context.instruments) else None
    )


def _copy_with_tap(context: Any) -> Any:
    """A new pass context with the settings of ``context`` (the made one carries a tap)."""
    return transform.PassContext(
        opt_level=context.opt_level,
        required_pass=list(context.required_pass),
        disabled_pass=list(context.disabled_pass),
        config=dict(context.config.items()),
    )


@contextmanager
def _pass_scope(compile: TvmCompile) -> Generator[None, None, None]:
    """Run the compile's passes where a tap sees them: the context in force if it has one,
    else a copy of it that has (see the module's docstring)."""
    tap, copy = None, None
    try:
        current = transform.PassContext.current()
        tap = _tap_of(current)
        if tap is None and not list(current.instruments):
            copy = _copy_with_tap(current)
        elif tap is not None and tap.notes is None:
            tap.bind(compile.new_context())
        else:
            tap = None  # noting another thread's compile, or a context the agent leaves alone
    except Exception:
        compile.registry.observer_errors += 1
    if copy is not None:
        with copy:
            yield
    elif tap is not None:
        try:
            yield
        finally:
            try:
                tap.unbind()
            except Exception:
                compile.registry.observer_errors += 1
    else:
        yield


def _kind(target: Any) -> str:
    try:
        return str(target.kind.name)
    except Exception:
        return "unknown"


def _phase_now() -> str | None:
    """The innermost compile entry point running on this thread (``relax.build``, ``tirx.build``)."""
    entry: str | None = getattr(_thread, "entry", None)
    return entry
