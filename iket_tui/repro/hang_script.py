"""The code of a hang reproducer's ``repro.py``, which runs where iket-tui may not be installed:
its body, and the functions copied into it that take a pass of the user's own from its file (of a
program's main script only what defines the pass, never the program)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The functions below are copied into a hang reproducer's script (which must not need
# iket-tui): they use nothing but the standard library, imported inside them.


def package_of(path: Path, module: str | None) -> tuple[Path, str] | None:
    """The directory to put on ``sys.path`` and the dotted name to import for the Python file
    ``path`` when it is a module of a package (so that its relative imports work), else None:
    by ``module``, its captured name, when the file's path ends with it; else by the
    ``__init__.py`` files of the directories around it."""
    from pathlib import Path

    stem = path.parent if path.name == "__init__.py" else path.with_suffix("")
    parts = module.split(".") if module and module != "__main__" else []
    if len(parts) > 1 and list(stem.parts[-len(parts) :]) == parts:
        return Path(*stem.parts[: -len(parts)]), ".".join(parts)
    names = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory != directory.parent:
        names.insert(0, directory.name)
        directory = directory.parent
    return (directory, ".".join(names)) if len(names) > 1 else None


def pass_definitions(
    source: str, filename: str, function: str, line: int | None, pass_name: str, also: Iterable[str] = ()
) -> ast.Module:
    """Of a program's main script, only what defines a pass of its own: the top-level definition
    that holds the pass's ``function`` (a def or class, with its decorators; the one around
    ``line`` where there are several), top-level definitions and assignments that name the pass
    (``pass_name``), the script's top-level imports, and the top-level definitions and plain
    assignments (to names only) these use, or that bind a name of ``also`` (what the arguments of
    the pass's factory name), in the script's order and at their own lines. Nothing else of the
    program runs. Raises LookupError when the script holds no such definition.

    What a kept statement uses are the module's names it reads: at the top level (decorators,
    default values, base classes, the right-hand side) and, inside the functions, classes, lambdas
    and comprehensions it defines, only the names that resolve to the module (Python's own scoping,
    through ``symtable``). A parameter or local variable of the pass that shares its name with a
    top-level assignment (``mod`` beside ``mod = build()``) keeps no part of the program; a name
    the pass declares ``global`` is the module's, and kept, since ``X += 1`` reads it."""
    import ast
    import symtable

    body = ast.parse(source, filename).body
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def first_line(node: ast.stmt) -> int:
        decorators = node.decorator_list if isinstance(node, definitions) else []
        return min([node.lineno, *(decorator.lineno for decorator in decorators)])

    def bound(node: ast.stmt) -> set[str]:
        if isinstance(node, definitions):
            return {node.name}
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value
            else []
        )
        names: set[str] = set()
        for target in targets:
            inner = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not inner or not all(isinstance(name, ast.Name) for name in inner):
                return set()
            names.update(name.id for name in inner if isinstance(name, ast.Name))
        return names

    def holds_function(node: ast.stmt) -> bool:
        return isinstance(node, definitions) and any(
            isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name == function
            for inner in ast.walk(node)
        )

    def names_pass(node: ast.stmt) -> bool:
        return bool(bound(node)) and any(
            isinstance(inner, ast.Constant) and inner.value == pass_name for inner in ast.walk(node)
        )

    holding = [node for node in body if holds_function(node)]
    around = [node for node in holding if line is not None and first_line(node) <= line <= (node.end_lineno or 0)]
    kept = {id(node) for node in (around or holding)} | {id(node) for node in body if names_pass(node)}
    if not kept:
        raise LookupError(f"{filename} has no top-level definition of {function} or of {pass_name}")

    def reads_module(symbol: symtable.Symbol, top: bool) -> bool:
        if top:
            return symbol.is_referenced()
        return symbol.is_global() and (symbol.is_referenced() or symbol.is_declared_global())

    def module_names(table: symtable.SymbolTable) -> set[str]:
        top = table.get_type() == "module"
        names = {symbol.get_name() for symbol in table.get_symbols() if reads_module(symbol, top)}
        for child in table.get_children():
            names |= module_names(child)
        return names

    read: set[int] = set()
    needed: set[str] = set(also)
    while True:
        for node in body:
            if id(node) in kept and id(node) not in read:
                alone = ast.unparse(ast.Module(body=[node], type_ignores=[]))
                needed |= module_names(symtable.symtable(alone, filename, "exec"))
                read.add(id(node))
        more = {id(node) for node in body if id(node) not in kept and bound(node) & needed}
        if not more:
            break
        kept.update(more)
    chosen = [node for node in body if id(node) in kept or isinstance(node, (ast.Import, ast.ImportFrom))]
    return ast.Module(body=chosen, type_ignores=[])


def call_of(made_by: dict[str, Any], given: dict[str, str]) -> str:
    """How the pass's factory is called, in one line: ``stuck(seconds=600.0, event=?)``, the
    arguments ``given`` on the command line in place of those captured, ``?`` for one missing."""
    arguments = {**made_by["arguments"], **{name: "?" for name in made_by["missing"]}, **given}
    return f"{made_by['factory']}({', '.join(f'{name}={text}' for name, text in arguments.items())})"


def made_again(names: dict[str, Any], made_by: dict[str, Any], given: dict[str, str], where: str) -> Any:
    """What the pass's factory returns when called again as the program called it: the factory
    ``made_by["factory"]`` (a dotted name among ``names``, the globals of the pass's module),
    called with the captured arguments and those ``given`` (parameter: Python expression, each
    evaluated among ``names``). Raises LookupError, in one line, when an argument is missing
    (what it is, and how to give it: ``--arg NAME=EXPR``) or the factory is not there."""
    import inspect

    missing = {name: why for name, why in made_by["missing"].items() if name not in given}
    if missing:
        said = "; ".join(f"{name}: {why}" for name, why in missing.items())
        options = " ".join(f"--arg {name}=EXPR" for name in missing)
        one = len(missing) == 1
        raise LookupError(
            f"{call_of(made_by, given)} made the pass, and {', '.join(missing)} {'was' if one else 'were'} not "
            f"captured ({said}): give {'it' if one else 'them'} with {options}, EXPR a Python expression among the "
            f"names of {where}"
        )
    factory: Any = None
    for number, part in enumerate(made_by["factory"].split(".")):
        factory = names.get(part) if number == 0 else getattr(factory, part, None)
        if factory is None:
            raise LookupError(f"{where} has no {made_by['factory']} to make the pass with")
    values = {name: eval(text, names) for name, text in {**made_by["arguments"], **given}.items()}
    positional, keywords = [], {}
    for parameter in inspect.signature(factory).parameters.values():
        if parameter.name not in values:
            continue
        value = values.pop(parameter.name)
        if parameter.kind is parameter.POSITIONAL_ONLY:
            positional.append(value)
        elif parameter.kind is parameter.VAR_POSITIONAL:
            positional.extend(value)
        elif parameter.kind is parameter.VAR_KEYWORD:
            keywords.update(value)
        else:
            keywords[parameter.name] = value
    if values:
        raise LookupError(f"{made_by['factory']} takes no argument named {', '.join(values)}")
    return factory(*positional, **keywords)


HANG_BODY = """
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path

#IMPORTS

HERE = Path(__file__).resolve().parent
#CONSTANTS


class CannotMake(Exception):
    pass


def arguments():
    parser = argparse.ArgumentParser(description=f"Run {PASS} alone on the module it was given: does it return?")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"how long to let it run (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--pass-source", type=Path, metavar="FILE", help="the file that defines the pass, if not "
                        + (PASS_SOURCE["file"] if PASS_SOURCE else "known"))
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=EXPR",
                        help="an argument of the factory that makes the pass, in place of the one captured or where "
                        "none was: EXPR is a Python expression among the names of the pass's file (repeatable)")
    args = parser.parse_args()
    if not 0 < args.timeout < float("inf"):
        parser.error(f"--timeout must be a positive number of seconds, not {args.timeout}")
    args.given = {}
    for given in args.arg:
        name, equals, text = given.partition("=")
        try:
            ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            equals = ""
        if not (equals and name.strip().isidentifier()):
            parser.error(f"--arg takes NAME=EXPR, a Python expression, not {given!r}")
        args.given[name.strip()] = text.strip()
    return args


def names_read(texts):
    return {node.id for text in texts for node in ast.walk(ast.parse(text, mode="eval")) if isinstance(node, ast.Name)}


#HELPERS


def failed(error, path):
    text = str(error).strip().splitlines()
    said = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    if isinstance(error, SyntaxError) and error.filename == str(path):
        lines.append(error.lineno)
    return said + (f" (line {lines[-1]})" if lines and lines[-1] else "")


def load(path):
    module = PASS_SOURCE["module"] if PASS_SOURCE else None
    package = package_of(path, module)
    sys.path.insert(0, str(path.parent))
    if package is not None:
        sys.path.insert(0, str(package[0]))
    main_script = PASS_SOURCE is not None and path == Path(PASS_SOURCE["file"]).resolve()
    if module == "__main__" and (main_script or package is None):
        function, line = PASS_SOURCE["function"], (PASS_SOURCE["line"] if main_script else None)
        try:
            also = set()
            if MADE_BY and MADE_BY["factory"]:
                texts = [*MADE_BY["arguments"].values(), *args.given.values()]
                also = names_read(texts) | {MADE_BY["factory"].partition(".")[0]}
            found = pass_definitions(path.read_text(), str(path), function, line, PASS, also)
        except LookupError as error:
            raise CannotMake(f"{error}: give the file that defines the pass with --pass-source FILE") from None
        script = types.ModuleType("__pass_source__")
        script.__file__ = str(path)
        if package is not None:
            script.__package__ = package[1].rpartition(".")[0]
        sys.modules[script.__name__] = script
        exec(compile(found, str(path), "exec"), vars(script))
        return script
    if package is not None:
        return importlib.import_module(package[1])
    spec = importlib.util.spec_from_file_location(path.stem, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def own_pass(path):
    if not path.is_file():
        raise CannotMake(f"{PASS} is defined in {path}, which is not here: give its file with --pass-source FILE")
    outcome["loading"] = path
    try:
        module = load(path.resolve())
    except CannotMake:
        raise
    except (Exception, SystemExit) as error:
        raise CannotMake(f"loading {path} to make {PASS} failed: {failed(error, path.resolve())}") from None
    if MADE_BY and MADE_BY["factory"]:
        try:
            made = made_again(vars(module), MADE_BY, args.given, path.name)
        except LookupError as error:
            raise CannotMake(str(error)) from None
        if isinstance(made, tvm.transform.Pass) and str(made.info.name) == PASS:
            return made
        what = f"the pass {made.info.name}" if isinstance(made, tvm.transform.Pass) else f"a {type(made).__name__}"
        raise CannotMake(f"{call_of(MADE_BY, args.given)} made {what}, not the pass {PASS}")
    for value in list(vars(module).values()):
        if isinstance(value, tvm.transform.Pass) and str(value.info.name) == PASS:
            return value
    factory = getattr(module, PASS.rpartition(".")[2], None)
    made = factory() if callable(factory) else None
    if isinstance(made, tvm.transform.Pass) and str(made.info.name) == PASS:
        return made
    function = getattr(module, PASS_SOURCE["function"], None) if PASS_SOURCE else None
    if PASS_SOURCE and PASS_SOURCE["qualname"] == PASS_SOURCE["function"] and callable(function):
        return tvm.transform.module_pass(function, opt_level=0, name=PASS)  # as module_pass(fn, ...) made it
    if MADE_BY and MADE_BY.get("why"):
        raise CannotMake(f"{path} defines no pass named {PASS}, and {PASS_SOURCE['qualname']}, which runs it, "
                         f"cannot be made again: {MADE_BY['why']}")
    raise CannotMake(f"{path} defines no pass named {PASS}")


def make_pass(args):
    namespace, _, short = PASS.partition(".") if "." in PASS else ("", "", PASS)
    if args.pass_source is None and namespace in NAMESPACES:
        factory = getattr(importlib.import_module(NAMESPACES[namespace]), short, None)
        if factory is not None:
            return factory()
    if args.pass_source is not None:
        return own_pass(args.pass_source)
    if PASS_SOURCE is not None:
        return own_pass(Path(PASS_SOURCE["file"]))
    raise CannotMake(f"{PASS} is not {OWNER}: give the file that defines it with --pass-source FILE")


def load_module():
    if (HERE / "module.json").exists():
        return tvm.ir.load_json((HERE / "module.json").read_text())
    return tvm.script.from_source((HERE / "before.py").read_text())


args = arguments()
mod = load_module()
config = {}
if (HERE / "config.json").exists():
    config = dict(tvm.ir.load_json((HERE / "config.json").read_text()).items())
target = tvm.target.Target(TARGET) if TARGET else None
made = threading.Event()
outcome = {}


def run():
    try:
        the_pass = make_pass(args)
    except CannotMake as error:
        outcome["cannot"] = str(error)
    except (Exception, SystemExit) as error:
        outcome["cannot"] = f"making {PASS} failed: {failed(error, None)}"
    finally:
        outcome["started"] = time.monotonic()
        made.set()
    if "cannot" in outcome:
        return
    try:
        with tvm.transform.PassContext(config=config, **CONTEXT):
            if target is not None:
                with target:
                    the_pass(mod)
            else:
                the_pass(mod)
    except BaseException as error:
        outcome["error"] = error


def stack():
    frame = sys._current_frames().get(runner.ident)
    return "".join(traceback.format_stack(frame)).rstrip() if frame is not None else "  (it has just ended)"


def leave(code):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the pass's thread cannot be stopped: leave without waiting for it


runner = threading.Thread(target=run, name=PASS, daemon=True)
runner.start()
if not made.wait(args.timeout):
    loading = f"loading {outcome['loading']} to make {PASS}" if "loading" in outcome else f"making {PASS}"
    print(f"repro: {loading} still runs after {args.timeout:g} s, before the pass runs (a longer --timeout "
          "lets a slow import finish). Where it is (innermost last):", file=sys.stderr)
    print(stack(), file=sys.stderr)
    leave(1)
if "cannot" in outcome:
    sys.exit(f"repro: {outcome['cannot']}")
runner.join(args.timeout)
if runner.is_alive():
    print(f"still running after {args.timeout:g} s: reproduced")
    print(f"{PASS} has not returned. Its Python stack (innermost last):")
    print(stack())
    leave(HANG_EXIT)
took = time.monotonic() - outcome["started"]
if "error" in outcome:
    print(f"repro: {PASS} raised after {took:.1f} s instead of running on:", file=sys.stderr)
    error = outcome["error"]
    traceback.print_exception(type(error), error, error.__traceback__)
    sys.exit(1)
print(f"{PASS} returned after {took:.1f} s: the hang did not reproduce here")
sys.exit(0)
"""
