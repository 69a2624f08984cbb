"""How a pass of the user's own was made, read from its running frame, so that a reproducer can
make it again: the factory that made it (a function, a method, or a class decorated with
``module_pass``) and the arguments it was called with, each as a Python expression, where the
running pass shows them; those it does not show are named, with why.

TileLang's own passes and most users' are made by a factory (``def stuck(seconds):
@module_pass(...) def p(mod, ctx): ...; return p``): the pass function is a local of the factory
(its ``__qualname__`` is ``stuck.<locals>.p``), and the factory's arguments that the pass reads
are its closure cells, which the running frame's locals hold. A class decorated with
``module_pass`` runs ``transform_module`` on an instance of it, whose attributes named as the
class's parameters are the arguments it was made with; a method's ``self`` is rebuilt the same way.

Read on a client's thread while the compiling thread runs: frame locals, module globals and
signatures only. No user code runs: no ``repr`` of the user's objects, only literals of built-in
types, and the module's own top-level definitions by name, become expressions.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any, Final

LOCALS: Final = "<locals>"
"""The part of a ``__qualname__`` that says the next name was defined inside a function."""

MAX_ITEMS: Final = 10_000
"""Items of containers an argument may hold, all together, to be written as a literal."""
MAX_TEXT: Final = 64 * 1024
"""The longest expression an argument is written as."""
MAX_DEPTH: Final = 3
"""How deep objects rebuilt from their attributes, and containers, may nest in an argument."""

_LITERALS: Final = (bool, int, str, bytes, type(None), complex)


class NoExpression(Exception):
    """A value that cannot be written as an expression; the message says why, as "a X ..."."""


def made_by(frame: FrameType) -> dict[str, Any] | None:
    """How the pass whose function runs in ``frame`` was made: ``factory`` (the dotted name of the
    function, method or class to call, in the pass's module; None when it cannot be called again,
    ``why`` then says why), ``arguments`` (parameter: Python expression, evaluated in the names of
    the pass's module), ``missing`` (parameter: why it was not captured) and ``defaults`` (the
    parameters the pass does not show, which have defaults). None for a pass function defined at
    a module's top level: the module holds the pass itself."""
    code = frame.f_code
    parts = code.co_qualname.split(".")
    names = frame.f_globals
    if LOCALS in parts:
        cut = len(parts) - 1 - parts[::-1].index(LOCALS)
        path = parts[:cut]
        seen = {name: frame.f_locals[name] for name in code.co_freevars if name in frame.f_locals}
    elif len(parts) > 1 and code.co_argcount > 0 and code.co_varnames[0] in frame.f_locals:
        path = parts[:-1]  # a method of a class: the class is called with what its instance holds
        attributes = _attributes(frame.f_locals[code.co_varnames[0]])
        if attributes is None:
            return {"factory": None, "why": f"{parts[0]}'s instance has no attributes to read its arguments from"}
        seen = attributes
    else:
        return None
    dotted = ".".join(path)
    if LOCALS in path:
        return {"factory": None, "why": f"it is made inside {dotted}, which is itself a function's local"}
    factory = _resolve(names, path)
    if factory is None:
        return {"factory": None, "why": f"{dotted} is not a name its module holds"}
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return {"factory": None, "why": f"{dotted} has no signature to call it by"}
    arguments: dict[str, str] = {}
    missing: dict[str, str] = {}
    defaults: list[str] = []
    for parameter in parameters:
        if parameter.name in seen:
            try:
                arguments[parameter.name] = expression(seen[parameter.name], names)
            except NoExpression as error:
                missing[parameter.name] = f"{error} has no literal form"
        elif parameter.default is not inspect.Parameter.empty or parameter.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            defaults.append(parameter.name)
        else:
            missing[parameter.name] = "the pass does not read it, so it was not seen"
    return {"factory": dotted, "arguments": arguments, "missing": missing, "defaults": defaults}


def expression(value: Any, names: dict[str, Any]) -> str:
    """``value`` as a Python expression that makes it again in a module whose names are ``names``:
    a literal of built-in types (non-finite floats as ``float('inf')``), a top-level definition or
    imported module by the name the module holds it under, or an instance of a class the module
    defines, called with its attributes named as the class's parameters. Raises
    :class:`NoExpression` otherwise."""
    budget = [MAX_ITEMS]
    text = _expression(value, names, MAX_DEPTH, budget)
    if len(text) > MAX_TEXT:
        raise NoExpression(f"{_a(value)} of {len(text):,} characters")
    return text


def _expression(value: Any, names: dict[str, Any], depth: int, budget: list[int]) -> str:
    budget[0] -= 1
    if budget[0] < 0 or depth < 0:
        raise NoExpression(f"{_a(value)} too big to write")
    kind = type(value)
    if kind is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if kind in _LITERALS:
        return repr(value)
    if kind in (list, tuple, set, frozenset):
        items = [_expression(item, names, depth - 1, budget) for item in value]
        if kind is list:
            return f"[{', '.join(items)}]"
        if kind is tuple:
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        inner = "{" + ", ".join(sorted(items)) + "}" if items else ""
        return f"{kind.__name__}({inner})" if kind is frozenset or not items else inner
    if kind is dict:
        pairs = [
            f"{_expression(key, names, depth - 1, budget)}: {_expression(item, names, depth - 1, budget)}"
            for key, item in value.items()
        ]
        return "{" + ", ".join(pairs) + "}"
    held = _held_as(value, names)
    if held is not None:
        return held
    if _held_as(kind, names) is not None:
        return _instance(value, kind, names, depth, budget)
    raise NoExpression(_a(value))


def _instance(value: Any, kind: type, names: dict[str, Any], depth: int, budget: list[int]) -> str:
    """An instance of a class of the module, as a call of the class with its attributes."""
    attributes = _attributes(value)
    try:
        parameters = list(inspect.signature(kind).parameters.values())
    except (TypeError, ValueError):
        raise NoExpression(f"{_a(value)} (a class without a signature)") from None
    if attributes is None:
        raise NoExpression(f"{_a(value)} (an object without attributes)")
    given = []
    for parameter in parameters:
        if parameter.name in attributes:
            given.append(f"{parameter.name}={_expression(attributes[parameter.name], names, depth - 1, budget)}")
        elif parameter.default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            raise NoExpression(f"{_a(value)} (whose {parameter.name} it does not keep as an attribute)")
    return f"{kind.__name__}({', '.join(given)})"


def _held_as(value: Any, names: dict[str, Any]) -> str | None:
    """The top-level name the module holds ``value`` under, if it is a function, class or module
    (a definition or an import, which a reproducer keeps), else None."""
    if not (inspect.isfunction(value) or inspect.isclass(value) or isinstance(value, ModuleType)):
        return None
    for name, held in list(names.items()):
        if held is value and name.isidentifier():
            return name
    return None


def _attributes(value: Any) -> dict[str, Any] | None:
    """An object's own attributes (its ``__dict__``), None if it has none."""
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None
    return dict(attributes) if isinstance(attributes, dict) else None


def _resolve(names: dict[str, Any], path: list[str]) -> Callable[..., Any] | None:
    """What ``a.b`` names among a module's globals (a top-level function, a class or its method)."""
    if not path or path[0] not in names:
        return None
    found: Any = names[path[0]]
    for part in path[1:]:
        if not inspect.isclass(found):
            return None
        owner = found
        try:
            found = inspect.getattr_static(owner, part)
        except AttributeError:
            return None
        if isinstance(found, classmethod):
            found = found.__get__(None, owner)
        elif isinstance(found, staticmethod):
            found = found.__func__
    return found if callable(found) else None


def _a(value: Any) -> str:
    """``a threading.Event``: what a value is, in words."""
    kind = type(value)
    name = (
        kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"
    )
    return f"an {name}" if name[:1].lower() in "aeio" else f"a {name}"
