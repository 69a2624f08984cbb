"""Helpers to drive the app in tests: start it over a fake source and wait for what it shows."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any

from textual.pilot import Pilot

from iket_tui.model.nodes import Node
from iket_tui.ui.app import IketApp

WAIT_S = 60.0


async def wait_until(pilot: Pilot[int], condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Let the app run until ``condition`` holds (generous timeout for a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause()


async def wait_for_batches(pilot: Pilot[int], app: IketApp, count: int) -> None:
    await wait_until(pilot, lambda: app.batches_received >= count, f"{count} batches applied")


def screen_lines(app: IketApp) -> list[str]:
    """The tree's rows as the user sees them on screen, trailing blanks removed."""
    view = app.view
    return [view.render_line(y).text.rstrip() for y in range(view.size.height)]


def tree_text(app: IketApp) -> str:
    return "\n".join(screen_lines(app))


def cursor_row(app: IketApp) -> str:
    view = app.view
    return view.render_line(view.cursor_line - view.scroll_offset.y).text.strip()


def node_line(app: IketApp, node: Node) -> int | None:
    return app.rows.index_of(node)


def app_test(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async app test on its own event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run
