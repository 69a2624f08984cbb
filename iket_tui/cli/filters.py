"""``--passes GLOB`` and ``--depth N``: which passes a client asks its agent for.

The agent applies them to this client's stream only (another client of the same program may
filter differently, or not at all) and counts what it left out; see "Filters" in
``docs/protocol.md``. ``run``, ``attach`` and ``record`` take them.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

MAX_GLOBS: Final = 64
MAX_GLOB_CHARS: Final = 256
MAX_DEPTH: Final = 1_000_000
"""The agent's limits on a client's filter (:mod:`iket_tui.agent.pass_filter`)."""


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--passes`` and ``--depth`` to a command that reads a live agent."""
    parser.add_argument(
        "--passes",
        action=_AppendGlob,
        type=_glob,
        metavar="GLOB",
        help="show only the passes whose name matches GLOB (fnmatch, e.g. 'tl.*'); "
        "repeat it to keep any of several; the others are counted, not shown",
    )
    parser.add_argument(
        "--depth",
        type=_depth,
        metavar="N",
        help="show only passes nested at most N deep (0: top-level passes only); the others are counted",
    )


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    """The filter the parsed ``args`` ask for, as the agent reads it from a client's hello
    (empty: every pass)."""
    filters: dict[str, Any] = {}
    globs = getattr(args, "passes", None)
    if globs:
        filters["passes"] = list(dict.fromkeys(globs))
    depth = getattr(args, "depth", None)
    if depth is not None:
        filters["depth"] = depth
    return filters


class _AppendGlob(argparse.Action):
    """``--passes``, each one more glob, up to :data:`MAX_GLOBS` (a usage error beyond)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        globs = list(getattr(namespace, self.dest, None) or [])
        if values not in globs:
            globs.append(values)
        if len(globs) > MAX_GLOBS:
            parser.error(f"at most {MAX_GLOBS} different --passes globs")
        setattr(namespace, self.dest, globs)


def _glob(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty glob matches no pass")
    if len(text) > MAX_GLOB_CHARS:
        raise argparse.ArgumentTypeError(f"a glob longer than {MAX_GLOB_CHARS} characters")
    return text


def _depth(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"the depth must be 0 or more: {text!r}")
    return value
