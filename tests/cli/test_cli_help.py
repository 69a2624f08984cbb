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
    assert parser.description.splitlines()[0] in shown
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
