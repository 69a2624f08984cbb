"""What a hang reproducer takes from the file that defines a pass of the user's own, and what
it is told of the capture: from a program's main script only the pass's definition, the
script's imports and the top-level names the pass uses (never the program); a module of a
package by its dotted name; the pass context as captured; the default timeout from how long the
pass had run. The TileLang runs of these reproducers are in tests/e2e/test_hangs.py."""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest

from iket_tui.repro import DEFAULT_OPT_LEVEL, MIN_HANG_TIMEOUT_S, package_of, pass_definitions, write_hang
from iket_tui.repro.hang_script import call_of, made_again

SCRIPT = textwrap.dedent(
    '''\
    """A program with its own pass and no main guard."""
    from __future__ import annotations

    import json
    from pathlib import Path

    NAME = "mine.Spin"
    START = 7
    UNUSED = Path("/nonexistent").read_text()  # the program's own work: never run by a reproducer
    step = 2
    seen.append("the program ran")  # a statement, not a definition
    Path(OUT).write_text("the program ran")


    def pass_decorator(name):
        def wrap(function):
            function.pass_name = name
            return function
        return wrap


    def helper(value):
        return value + step


    @pass_decorator(NAME)
    def my_spin(mod, ctx):
        turns = helper(START)
        return json.dumps([mod, turns])


    def my_spin(mod, ctx):  # redefined further down: the one around the captured line counts
        return "the later one"


    if __name__ == "__main__":
        seen.append("guarded")
    '''
)


def _kept(tree: ast.Module) -> list[str]:
    return [ast.unparse(node).splitlines()[0] for node in tree.body]


def test_of_a_main_script_only_the_pass_and_what_it_uses_are_kept_at_their_own_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(SCRIPT)
    line = SCRIPT.splitlines().index("    turns = helper(START)") + 1
    tree = pass_definitions(SCRIPT, str(path), "my_spin", line, "mine.Spin")
    assert _kept(tree) == [
        "from __future__ import annotations",
        "import json",
        "from pathlib import Path",
        "NAME = 'mine.Spin'",
        "START = 7",
        "step = 2",
        "def pass_decorator(name):",
        "def helper(value):",
        "@pass_decorator(NAME)",
    ]
    namespace: dict[str, object] = {"__name__": "__pass_source__"}
    exec(compile(tree, str(path), "exec"), namespace)  # no program ran: UNUSED, OUT and seen are never touched
    my_spin = namespace["my_spin"]
    assert callable(my_spin) and my_spin.pass_name == "mine.Spin"  # type: ignore[attr-defined]
    assert my_spin("mod", None) == '["mod", 9]'
    assert my_spin.__code__.co_filename == str(path)
    assert my_spin.__code__.co_firstlineno == SCRIPT.splitlines().index("@pass_decorator(NAME)") + 1

    # Without the line, every top-level definition of the function is kept, in order: the last one wins.
    later = pass_definitions(SCRIPT, str(path), "my_spin", None, "mine.Spin")
    assert _kept(later)[-2:] == ["@pass_decorator(NAME)", "def my_spin(mod, ctx):"]


def test_a_pass_made_by_a_call_or_held_in_a_class_is_found_by_its_name() -> None:
    made = textwrap.dedent(
        """\
        import tvm
        def body(mod, ctx):
            return mod
        spin = tvm.transform.module_pass(body, opt_level=0, name="mine.Spin")
        run_the_program()
        """
    )
    assert _kept(pass_definitions(made, "made.py", "elsewhere", None, "mine.Spin")) == [
        "import tvm",
        "def body(mod, ctx):",
        "spin = tvm.transform.module_pass(body, opt_level=0, name='mine.Spin')",
    ]
    held = textwrap.dedent(
        """\
        import tvm
        LEVEL = 0
        @tvm.transform.module_pass(opt_level=LEVEL, name="mine.Spin")
        class Spin:
            def transform_module(self, mod, ctx):
                return mod
        Spin()(None)
        """
    )
    assert _kept(pass_definitions(held, "held.py", "transform_module", 5, "mine.Spin")) == [
        "import tvm",
        "LEVEL = 0",
        "@tvm.transform.module_pass(opt_level=LEVEL, name='mine.Spin')",
    ]
    with pytest.raises(LookupError, match=r"^other\.py has no top-level definition of my_spin or of mine\.Spin$"):
        pass_definitions("import os\nos.getcwd()\n", "other.py", "my_spin", 2, "mine.Spin")


PROGRAM = textwrap.dedent(
    """\
    def build():
        seen.append("the program ran")
        return {"main": "the program's module"}
    """
)
"""The program's work, at the top of each script below: a reproducer that kept a statement calling
``build()`` would run it (and say so in ``seen``)."""


def _run_pass(script: str, function: str) -> tuple[list[str], list[str], object]:
    """What ``pass_definitions`` keeps of ``script`` for ``function`` (whose definition holds the
    line ``# the pass``), what running the kept code said in ``seen``, and what the pass returns
    for the module ``{"main": 5}``."""
    source = PROGRAM + textwrap.dedent(script)
    line = next(number for number, text in enumerate(source.splitlines(), 1) if "# the pass" in text)
    tree = pass_definitions(source, "mine.py", function, line, "mine.Pass")
    seen: list[str] = []
    namespace: dict[str, object] = {"__name__": "__pass_source__", "seen": seen}
    exec(compile(tree, "mine.py", "exec"), namespace)
    the_pass = namespace[function]
    assert callable(the_pass)
    return _kept(tree), seen, the_pass({"main": 5}, None)


def test_a_parameter_or_local_named_as_the_programs_module_keeps_nothing_of_the_program() -> None:
    """The clash the hang reproducer met: the pass's ``mod`` and ``func`` are its own, the
    script's top-level ``mod = build()`` and ``func = compile(mod)`` the program's."""
    kept, seen, returned = _run_pass(
        """\
        import json

        def my_slow_pass(mod, ctx):  # the pass
            func = mod["main"]
            return json.dumps([func, func])

        mod = build()
        func = compile(mod, "mine.py", "exec")
        print("more program")
        """,
        "my_slow_pass",
    )
    assert kept == ["import json", "def my_slow_pass(mod, ctx):"]
    assert (seen, returned) == ([], "[5, 5]")


def test_a_parameter_shadowing_a_global_is_the_pass_s_own_but_its_default_value_is_the_module_s() -> None:
    kept, seen, returned = _run_pass(
        """\
        LIMIT = 3

        def my_pass(mod, ctx, limit=LIMIT, build=None):  # the pass
            return [mod["main"], limit, build]

        limit = build()
        """,
        "my_pass",
    )
    assert kept == ["LIMIT = 3", "def my_pass(mod, ctx, limit=LIMIT, build=None):"]
    assert (seen, returned) == ([], [5, 3, None])


def test_a_local_assigned_before_use_is_the_pass_s_own_wherever_it_is_assigned() -> None:
    kept, seen, returned = _run_pass(
        """\
        def my_pass(mod, ctx):  # the pass
            result = [mod["main"]]
            for item in range(2):
                result.append(item)
            with memoryview(b"ab") as handle:
                first = handle.nbytes
            try:
                pass
            except ValueError as error:
                result.append(error)
            import json as coder
            return coder.dumps(result + [total := first + 1, total])

        result = build()
        item, handle = build(), build()
        first: dict = build()
        error = coder = total = build()
        """,
        "my_pass",
    )
    assert kept == ["def my_pass(mod, ctx):"]
    assert (seen, returned) == ([], "[5, 0, 1, 3, 3]")


def test_a_global_statement_in_the_pass_keeps_the_top_level_name_it_needs() -> None:
    kept, seen, returned = _run_pass(
        """\
        calls = 0
        only_read = 10
        mod = build()

        def my_pass(mod, ctx):  # the pass
            global calls
            calls += 1
            return [calls, only_read, mod["main"]]
        """,
        "my_pass",
    )
    assert kept == ["calls = 0", "only_read = 10", "def my_pass(mod, ctx):"]
    assert (seen, returned) == ([], [1, 10, 5])


def test_names_of_nested_functions_lambdas_and_comprehensions_resolve_as_python_does() -> None:
    """A nested function's free names are the pass's locals unless nothing around binds them;
    a comprehension's variable is its own; a lambda's parameter is its own; a top-level helper
    kept for the pass brings what it reads of the module, and not its own locals; a decorator
    and its arguments are read at the top level."""
    kept, seen, returned = _run_pass(
        """\
        def pass_decorator(name):
            def wrap(function):
                function.pass_name = name
                return function
            return wrap

        def scale(value):
            step = FACTOR * value
            return step

        FACTOR = 2
        NAME = "mine.Pass"

        @pass_decorator(NAME)
        def my_pass(mod, ctx):  # the pass
            limit = 3

            def visit(node):
                return scale(node) + limit

            double = lambda x: visit(x) * 2
            return [visit(mod["main"]), double(1), [step * 2 for step in range(limit)], {x for x in [limit]}]

        limit = build()
        step = build()
        x = build()
        node = build()
        """,
        "my_pass",
    )
    assert kept == [
        "def pass_decorator(name):",
        "def scale(value):",
        "FACTOR = 2",
        "NAME = 'mine.Pass'",
        "@pass_decorator(NAME)",
    ]
    assert (seen, returned) == ([], [13, 10, [0, 2, 4], {3}])


def test_a_module_of_a_package_is_imported_by_its_dotted_name(tmp_path: Path) -> None:
    package = tmp_path / "top" / "mypkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "passes.py", "sub/__init__.py", "sub/deep.py"):
        (package / name).write_text("")
    (tmp_path / "lone.py").write_text("")
    assert package_of(package / "passes.py", "mypkg.passes") == (tmp_path / "top", "mypkg.passes")
    assert package_of(package / "sub" / "deep.py", None) == (tmp_path / "top", "mypkg.sub.deep")
    assert package_of(package / "sub" / "__init__.py", "__main__") == (tmp_path / "top", "mypkg.sub")
    # A namespace package (no __init__.py) is told by the captured name alone.
    (tmp_path / "ns" / "pkg").mkdir(parents=True)
    assert package_of(tmp_path / "ns" / "pkg" / "p.py", "pkg.p") == (tmp_path / "ns", "pkg.p")
    assert package_of(tmp_path / "lone.py", "lone") is None
    assert package_of(tmp_path / "lone.py", "__main__") is None


CONFIG_JSON = json.dumps(
    {
        "root_index": 3,
        "nodes": [
            {"type": "ffi.String", "data": "tl.disable_tma_lower"},
            {"type": "None"},
            {"type": "ir.IntImm", "data": {"span": 1, "dtype": "bool", "value": 1}},
            {"type": "ffi.Map", "data": [0, 2]},
        ],
        "metadata": {"tvm_version": "0.25.dev0"},
    }
)


def _capture(**fields: object) -> dict[str, object]:
    return {
        "compile": 4,
        "seq": 30,
        "name": "tl.InjectSoftwarePipeline",
        "running_ns": 24_300_000_000,
        "target": '{"kind": "cuda", "arch": "sm_90a"}',
        "config_json": CONFIG_JSON,
        "ir_script": "# the module\n",
        "ir_json": '{"root_index": 0, "nodes": [{"type": "None"}], "metadata": {}}',
        "ir_missing": None,
        "pass_source": None,
        "frames": [],
        **fields,
    }


def _constant(script: str, name: str) -> object:
    (line,) = [line for line in script.splitlines() if line.startswith(f"{name} = ")]
    return ast.literal_eval(line.removeprefix(f"{name} = "))


def test_a_hang_reproducer_waits_twice_what_the_pass_ran_in_the_same_pass_context(tmp_path: Path) -> None:
    found = write_hang(
        _capture(opt_level=2, required_pass=["tl.Required"], disabled_pass=["tl.Disabled", "tl.Other"]), tmp_path
    )
    assert found.note == (
        f"python {tmp_path / 'repro.py'} runs tl.InjectSoftwarePipeline alone on the module it was given, for 48.6 s"
    )
    script = (tmp_path / "repro.py").read_text()
    assert _constant(script, "DEFAULT_TIMEOUT_S") == 48.6 > MIN_HANG_TIMEOUT_S
    assert _constant(script, "CONTEXT") == {
        "opt_level": 2,
        "required_pass": ["tl.Required"],
        "disabled_pass": ["tl.Disabled", "tl.Other"],
    }
    assert "with tvm.transform.PassContext(config=config, **CONTEXT):" in script
    assert (tmp_path / "config.json").read_text() == CONFIG_JSON  # the configuration, not an empty map
    ast.parse(script)  # the helpers copied into it are whole


def test_a_capture_without_its_pass_context_gets_the_old_default(tmp_path: Path) -> None:
    """Captures made before the pass context was captured, or of an aborted compile's failure."""
    write_hang(_capture(running_ns=1_000_000_000), tmp_path)
    script = (tmp_path / "repro.py").read_text()
    assert _constant(script, "CONTEXT") == {"opt_level": DEFAULT_OPT_LEVEL}
    assert _constant(script, "DEFAULT_TIMEOUT_S") == MIN_HANG_TIMEOUT_S


def test_the_note_says_when_the_pass_is_in_the_programs_main_script(tmp_path: Path) -> None:
    where = {"file": "/work/mine.py", "line": 10, "function": "my_spin", "module": "__main__"}
    found = write_hang(_capture(name="my.Spin", pass_source=where), tmp_path)
    assert found.runnable
    assert found.note == (
        "my.Spin is a pass of your own, in /work/mine.py (my_spin): /work/mine.py is the program's main script: only "
        "the pass's definition and the script's imports are taken from it, never the program itself; "
        f"python {tmp_path / 'repro.py'} needs that file too (--pass-source FILE where it lives elsewhere)"
    )
    script = (tmp_path / "repro.py").read_text()
    assert _constant(script, "PASS_SOURCE") == {**where, "qualname": "my_spin"}
    assert _constant(script, "MADE_BY") is None
    assert re.search(r"the program's main script\. Of it, it runs only what defines the pass", script)


MADE_BY = {
    "factory": "Maker.make",
    "arguments": {"self": "Maker(size=SIZE)", "seconds": "600.0"},
    "missing": {"event": "a threading.Event has no literal form"},
    "defaults": ["unread"],
}


def test_a_factory_is_called_again_with_the_captured_arguments_and_those_given() -> None:
    source = textwrap.dedent(
        """\
        import threading
        SIZE = 4

        class Maker:
            def __init__(self, size):
                self.size = size

            def make(self, seconds, event, /, *more, unread=3, **options):
                return ["made", self.size, seconds, event.is_set(), more, unread, options]

        run_the_program()
        """
    )
    kept = pass_definitions(source, "mine.py", "make", None, "mine.Pass", also={"SIZE"})
    assert _kept(kept) == ["import threading", "SIZE = 4", "class Maker:"]
    names: dict[str, object] = {}
    exec(compile(kept, "mine.py", "exec"), names)

    with pytest.raises(LookupError) as raised:
        made_again(names, MADE_BY, {}, "mine.py")
    assert str(raised.value) == (
        "Maker.make(self=Maker(size=SIZE), seconds=600.0, event=?) made the pass, and event was not captured "
        "(event: a threading.Event has no literal form): give it with --arg event=EXPR, EXPR a Python expression "
        "among the names of mine.py"
    )
    given = {"event": "threading.Event()", "more": "(1, 2)", "options": "{'k': 5}"}
    assert made_again(names, MADE_BY, given, "mine.py") == ["made", 4, 600.0, False, (1, 2), 3, {"k": 5}]
    assert call_of(MADE_BY, {"event": "E"}) == "Maker.make(self=Maker(size=SIZE), seconds=600.0, event=E)"
    with pytest.raises(LookupError, match=r"^Maker\.make takes no argument named nothing$"):
        made_again(names, MADE_BY, {"event": "None", "nothing": "1"}, "mine.py")
    with pytest.raises(LookupError, match=r"^mine\.py has no Gone\.make to make the pass with$"):
        made_again(names, {**MADE_BY, "factory": "Gone.make", "missing": {}}, {}, "mine.py")


def test_how_a_pass_was_made_is_believed_only_as_names_and_expressions(tmp_path: Path) -> None:
    """A recording that lies cannot name a factory that is no dotted name, nor give an argument
    that is no expression, nor a parameter that is no name: the reproducer never sees them."""
    where = {"file": "/work/mine.py", "line": 10, "function": "p", "module": "__main__", "qualname": "stuck.<locals>.p"}
    lying = {
        "factory": "stuck",
        "arguments": {"seconds": "600", "tag": "import os", "not a name": "1", "count": 3},
        "missing": {"x": "why", "1x": "why"},
        "defaults": ["unread", 5],
    }
    found = write_hang(_capture(name="mine.Stuck", pass_source={**where, "made_by": lying}), tmp_path / "lying")
    script = (tmp_path / "lying" / "repro.py").read_text()
    assert _constant(script, "MADE_BY") == {
        "factory": "stuck",
        "arguments": {"seconds": "600"},
        "missing": {"x": "why"},
        "defaults": ["unread"],
    }
    assert not found.runnable and found.note.endswith(
        "; it makes the pass as the program did, by stuck(seconds=600, x=?) (unread left to its default), but x "
        "could not be captured (x: why): it needs --arg x=EXPR"
    )
    code = {**where, "made_by": {"factory": "os.system('x')", "arguments": {}}}
    found = write_hang(_capture(name="mine.Stuck", pass_source=code), tmp_path / "code")
    assert found.note.endswith("; it may not make the pass again as the program did: it cannot be called again")
    made = _constant((tmp_path / "code" / "repro.py").read_text(), "MADE_BY")
    assert made == {"factory": None, "why": "it cannot be called again", "arguments": {}, "missing": {}, "defaults": []}
