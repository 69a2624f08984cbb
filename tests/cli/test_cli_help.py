"""Every command's ``--help`` says what it does, shows examples that are real command lines,
and explains every argument."""

from __future__ import annotations

import argparse
import shlex
import sys

import pytest

from iket_tui.cli import main
from iket_tui.cli.parser import build_parser

SHELL_SYNTAX = {"|", ">", ">>", "&&", ";", "<"}


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """The program's parser and every subcommand's, by the words that reach them."""
    parser = build_parser()
    found = [("iket-tui", parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"iket-tui {name}", sub) for name, sub in action.choices.items()]
    return found


PARSERS = _parsers()


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:\n"), epilog
    return [line.strip() for line in epilog.splitlines()[1:] if line.strip()]


def test_every_subcommand_is_checked() -> None:
    names = {words.removeprefix("iket-tui ") for words, _ in PARSERS[1:]}
    expected = {"run", "attach", "record", "replay", "dump", "export", "stacks", "ir", "repro", "abort", "ls", "demo"}
    assert expected | {"serve", "completion"} <= names


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=[words for words, _ in PARSERS])
def test_help_has_a_description_and_examples_of_the_command(words: str, parser: argparse.ArgumentParser) -> None:
    assert parser.description and len(parser.description) > 40
    examples = _examples(parser)
    assert examples and all(f"{example} ".startswith(f"{words} ") for example in examples), examples
    shown = parser.format_help()
    assert " ".join(parser.description.split()[:8]) in " ".join(shown.split())
    for example in examples:
        assert example in shown  # kept as written, not rewrapped


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=[words for words, _ in PARSERS])
def test_every_argument_has_help(words: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                assert choice.help, f"{words} {choice.dest}"
            continue
        name = action.option_strings[-1] if action.option_strings else str(action.metavar or action.dest)
        assert action.help and action.help != argparse.SUPPRESS, f"{words}: {name} has no help"
        assert name in parser.format_help()


@pytest.mark.parametrize(("words", "parser"), PARSERS, ids=[words for words, _ in PARSERS])
def test_the_examples_are_command_lines_the_parser_takes(words: str, parser: argparse.ArgumentParser) -> None:
    for example in _examples(parser):
        tokens = shlex.split(example, comments=True)
        cut = next((i for i, token in enumerate(tokens) if token in SHELL_SYNTAX), len(tokens))
        args = build_parser().parse_args(tokens[1:cut])
        assert args.handler is not None, example


def test_a_subcommands_help_prints_its_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "examples:\n  iket-tui record 12345 -o run.msgpack\n" in shown
    option = "-o, --output FILE " if sys.version_info >= (3, 13) else "-o FILE, --output FILE\n"  # as argparse lists it
    assert option in shown and "- for standard output" in shown


def _description_lines(parser: argparse.ArgumentParser) -> list[str]:
    """The lines ``--help`` shows for a parser's description: after the usage, before the arguments."""
    shown = parser.format_help().split("\n\n")
    headings = ("options:", "positional arguments:", "commands:", "examples:")
    body = [part for part in shown[1:] if not part.startswith(headings)]
    return [line for part in body for line in part.splitlines()]


@pytest.mark.parametrize("columns", [60, 160])
def test_descriptions_wrap_to_the_terminals_width(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    for words, parser in _parsers():
        lines = _description_lines(parser)
        assert lines, words
        assert max(len(line) for line in lines) <= columns - 2, (words, lines)
        if len(parser.description or "") > 400:  # long enough to fill several lines at any width
            assert max(len(line) for line in lines) > columns - 20, (words, lines)
        for example in _examples(parser):
            assert f"\n  {example}\n" in parser.format_help() + "\n"  # one command a line, whatever the width


def test_a_list_in_a_description_keeps_its_terms_aligned_at_any_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    serve = dict(_parsers())["iket-tui serve"]
    lines = _description_lines(serve)
    item = next(i for i, line in enumerate(lines) if line.startswith("  attach TARGET   "))
    assert lines[item - 2 : item] == ["  replay FILE     each tab replays the file from the", " " * 18 + "start."]
    text_column = len("  attach TARGET   ")
    continued = lines[item + 1 : item + 4]
    assert all(line.startswith(" " * text_column) and line[text_column] != " " for line in continued), continued


def test_words_left_over_after_a_command_point_to_that_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "a.msgpack", "b.msgpack"]) == 2
    said = capsys.readouterr().err
    assert said == "iket-tui: unrecognized arguments: b.msgpack (see `iket-tui replay --help`)\n"
    assert main(["--no-such-option"]) == 2
    assert capsys.readouterr().err.endswith("(see `iket-tui --help`)\n")
