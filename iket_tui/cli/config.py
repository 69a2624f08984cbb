"""The config file: UI defaults that a user sets once instead of on every command line.

``$XDG_CONFIG_HOME/iket-tui/config.toml`` (``~/.config/iket-tui/config.toml`` by default)
holds top-level keys named as the flags they stand for (``stuck-after = 10``); a flag given on
the command line wins over the file. A file that cannot be used (bad TOML, a key it does not
know, a value the flag would refuse) is one line naming the file, the key and the problem, from
the commands that read it (:func:`reads_config`).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from iket_tui.cli.errors import UsageError

THEME: Final = "theme"
"""The key of the UI's colour theme, which no flag sets."""


@dataclass(frozen=True)
class Key:
    """One key of the file: the option's destination and how its value is checked and converted
    (the flag's own type function, given the value as text)."""

    dest: str
    convert: Callable[[str], Any]
    what: str


def config_path() -> Path:
    """Where the config file is read from."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "iket-tui" / "config.toml"


def read_config(keys: dict[str, Key], path: Path | None = None) -> dict[str, Any]:
    """The file's values by key, converted; empty where there is no file. Raises
    :class:`UsageError` (one line: the file, the key, what is wrong) for a file that cannot be
    used."""
    path = config_path() if path is None else path
    try:
        with path.open("rb") as file:
            table = tomllib.load(file)
    except FileNotFoundError:
        return {}
    except PermissionError:
        if not os.access(path.parent, os.X_OK):
            return {}  # a directory this user may not enter (another user's home): none of its files are theirs
        raise UsageError(f"{path}: cannot be read: permission denied") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    values: dict[str, Any] = {}
    for name, value in table.items():
        key = keys.get(name)
        if key is None:
            raise UsageError(f"{path}: unknown key {name!r}; the keys are {', '.join(sorted(keys))}")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise UsageError(f"{path}: {name}: must be {key.what}, not a TOML {type(value).__name__}")
        try:
            values[name] = key.convert(str(value))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"{path}: {name}: {exc}") from None
    return values


def apply_config(parser: argparse.ArgumentParser, keys: dict[str, Key], path: Path | None = None) -> dict[str, Any]:
    """Make the file's values the defaults of every command's options they stand for (so that a
    flag given still wins), and say so in those options' help; the values, by key."""
    path = config_path() if path is None else path
    values = read_config(keys, path)
    if not values:
        return values
    by_dest = {keys[name].dest: (name, value) for name, value in values.items()}
    for sub in _subparsers(parser):
        for action in sub._actions:
            if action.dest in by_dest and action.option_strings:
                name, value = by_dest[action.dest]
                action.default = value
                said = f"{path} sets {name} = {value!r}".replace("%", "%%")  # argparse formats help with %
                action.help = f"{action.help or ''}; {said}".lstrip("; ")
    return values


def reads_config(parser: argparse.ArgumentParser, keys: dict[str, Key], argv: Sequence[str]) -> bool:
    """Whether the command ``argv`` names reads the file: one with an option the file may set,
    ``config`` and ``serve`` (whose command does); the others (``ls``, ``dump``, completion's
    questions, ...) run whatever the file holds."""
    chosen = next((word for word in argv if not word.startswith("-")), None)
    commands = {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }
    if chosen not in commands:
        return False
    if chosen in ("config", "serve"):
        return True
    dests = {key.dest for key in keys.values()}
    return any(action.dest in dests for action in commands[chosen]._actions if action.option_strings)


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command's parser."""
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]


def config_keys() -> dict[str, Key]:
    """The keys the file may hold: the UI's defaults and kernel tracing's, checked as their flags
    check them, and the theme."""
    from iket_tui.cli import parser as flags

    seconds = "a positive number of seconds"
    return {
        "stuck-after": Key("stuck_after", flags._positive, seconds),
        "kernel-stuck-after": Key("kernel_stuck_after", flags._positive, seconds),
        "max-passes": Key("max_passes", flags._max_passes, "a whole number of passes"),
        "speed": Key("speed", flags._speed, "a replay speed (a number, or 'max')"),
        "drain-hz": Key("drain_hz", flags._drain_hz, "a rate in Hz"),
        "ring-size": Key("ring_size", flags._ring_size, "a size such as '256M'"),
        "ring-chunks": Key("ring_chunks", flags._ring_chunks, "a power of two"),
        THEME: Key(THEME, _theme, "the name of a theme"),
    }


def _theme(text: str) -> str:
    """A theme of Textual's (``textual-dark``, ``nord``, ``gruvbox``, ...)."""
    from textual.theme import BUILTIN_THEMES

    if text not in BUILTIN_THEMES:
        raise ValueError(f"no theme {text!r}; the themes are {', '.join(sorted(BUILTIN_THEMES))}")
    return text


def ui_theme() -> str | None:
    """The theme the config file names, if any (the file was checked as the command started)."""
    return read_config(config_keys()).get(THEME)


def cmd_config(args: argparse.Namespace) -> int:
    """Say where the config file is read from, what it sets, and the keys it may hold."""
    path = config_path()
    values = read_config(config_keys(), path)
    print(f"config file: {path} ({'read' if path.exists() else 'none there'})")
    keys = config_keys()
    width = max(len(name) for name in keys)
    for name, key in keys.items():
        said = f"= {values[name]!r}" if name in values else "not set"
        flag = f"--{name}" if name != THEME else "no flag"
        print(f"  {name:<{width}}  {said}  ({key.what}; {flag})")
    print("flags given on the command line win over the file")
    return 0
