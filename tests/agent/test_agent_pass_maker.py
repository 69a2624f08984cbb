"""How a running pass of the user's own was made (``made_by`` of ``pass_source``): the factory
to call again and its arguments as Python expressions, read from the pass's own running frame.

Real frames of a real module: each pass function below reads its frame while it runs, as a
client's thread reads the compiling thread's. The same through TileLang and a reproducer that
runs the factory again is in tests/e2e/test_made_passes.py."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest

from iket_tui.agent.pass_maker import made_by

PASSES = """
import sys
import threading
from dataclasses import dataclass

import json


def module_pass(function):  # stands in for tvm.transform.module_pass: the pass is the function
    return function


def sleeper(seconds, tag, unread=3, *more, **options):
    @module_pass
    def p(mod, ctx):
        return made_by(sys._getframe()), seconds, tag
    return p


def needs(limit, shape):
    @module_pass
    def p(mod, ctx):
        return made_by(sys._getframe()), shape
    return p


def over(value):
    def body(mod, ctx):
        return made_by(sys._getframe()), value
    return body


@dataclass
class Options:
    size: int
    names: tuple


class Opaque:
    def __init__(self, size):
        self._size = size


class Passes:
    def __init__(self, seconds, label="passes"):
        self.seconds = seconds
        self.label = label

    def sleeper(self, extra):
        def method_pass(mod, ctx):
            return made_by(sys._getframe()), self.seconds + extra
        return method_pass

    @classmethod
    def of_class(cls, count):
        def p(mod, ctx):
            return made_by(sys._getframe()), cls, count
        return p

    @staticmethod
    def static(count):
        def p(mod, ctx):
            return made_by(sys._getframe()), count
        return p


class ClassPass:
    def __init__(self, seconds, tag="a"):
        self.seconds = seconds

    def transform_module(self, mod, ctx):
        return made_by(sys._getframe())


def outer(seconds):
    def inner_factory():
        def p(mod, ctx):
            return made_by(sys._getframe()), seconds
        return p
    return inner_factory


def top_level(mod, ctx):
    return made_by(sys._getframe())
"""


@pytest.fixture(scope="module")
def passes(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    path = tmp_path_factory.mktemp("made") / "user_made.py"
    path.write_text(textwrap.dedent(PASSES))
    spec = importlib.util.spec_from_file_location("user_made", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.made_by = made_by  # type: ignore[attr-defined]
    sys.modules["user_made"] = module
    spec.loader.exec_module(module)
    return module


def _made(the_pass: Any) -> Any:
    found = the_pass("mod", "ctx")
    return found[0] if isinstance(found, tuple) else found


def test_a_factory_s_arguments_are_its_closure_and_defaults_where_unread(passes: ModuleType) -> None:
    assert _made(passes.sleeper(600.0, "a", 4, 5, key=6)) == {
        "factory": "sleeper",
        "arguments": {"seconds": "600.0", "tag": "'a'"},
        "missing": {},
        "defaults": ["unread", "more", "options"],
    }


def test_literals_of_every_builtin_kind_are_written_to_evaluate_back(passes: ModuleType) -> None:
    values = [
        {"a": (1,), "b": [2.5, None, True], "c": frozenset({1}), "d": set(), "e": b"x", 3: 1j},
        float("inf"),
        float("nan"),
        (),
        "it's",
    ]
    for value in values:
        text = _made(passes.over(value))["arguments"]["value"]
        again = eval(text)
        assert again == value or (value != value and again != again), text  # nan is nan


def test_an_argument_without_a_literal_form_is_named_with_what_it_is(passes: ModuleType) -> None:
    assert _made(passes.needs(3, passes.threading.Event())) == {
        "factory": "needs",
        "arguments": {},
        "missing": {
            "limit": "the pass does not read it, so it was not seen",
            "shape": "a threading.Event has no literal form",
        },
        "defaults": [],
    }
    opaque = _made(passes.over(passes.Opaque(3)))["missing"]["value"]
    assert opaque == "a user_made.Opaque (whose size it does not keep as an attribute) has no literal form"
    assert _made(passes.over([object()]))["missing"]["value"] == "an object has no literal form"
    assert "too big" in _made(passes.over(list(range(20_000))))["missing"]["value"]


def test_objects_of_the_module_and_its_definitions_are_written_by_their_names(passes: ModuleType) -> None:
    options = passes.Options(size=3, names=("x", "y"))
    assert _made(passes.over(options))["arguments"] == {"value": "Options(size=3, names=('x', 'y'))"}
    assert _made(passes.over(passes.json))["arguments"] == {"value": "json"}
    assert _made(passes.over(passes.top_level))["arguments"] == {"value": "top_level"}
    assert _made(passes.over(sys))["arguments"] == {"value": "sys"}


def test_a_method_s_factory_is_called_on_its_object_rebuilt_from_its_attributes(passes: ModuleType) -> None:
    made = _made(passes.Passes(600.0, label="mine").sleeper(0.5))
    assert made == {
        "factory": "Passes.sleeper",
        "arguments": {"self": "Passes(seconds=600.0, label='mine')", "extra": "0.5"},
        "missing": {},
        "defaults": [],
    }
    assert _made(passes.Passes.of_class(2))["factory"] == "Passes.of_class"
    assert _made(passes.Passes.of_class(2))["arguments"] == {"count": "2"}  # cls is the class itself
    assert _made(passes.Passes.static(4))["arguments"] == {"count": "4"}


def test_a_class_pass_is_called_with_its_instance_s_attributes(passes: ModuleType) -> None:
    assert _made(passes.ClassPass(600.0, tag="b").transform_module) == {
        "factory": "ClassPass",
        "arguments": {"seconds": "600.0"},
        "missing": {},
        "defaults": ["tag"],
    }


def test_a_pass_that_cannot_be_made_again_says_why_and_a_top_level_one_needs_nothing(passes: ModuleType) -> None:
    assert _made(passes.outer(5)()) == {
        "factory": None,
        "why": "it is made inside outer.<locals>.inner_factory, which is itself a function's local",
    }
    assert _made(passes.top_level) is None
