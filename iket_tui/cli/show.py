"""The live UI over a source, from the command line: it runs until the user quits or a signal closes it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from iket_tui.cli.config import ui_theme
from iket_tui.cli.errors import UsageError
from iket_tui.cli.signals import watch_signals
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES
from iket_tui.outputs import STDOUT
from iket_tui.sources.base import EventSource
from iket_tui.sources.replay import RecordingSource

if TYPE_CHECKING:
    from textual.app import App

UI_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what textual-serve names in TEXTUAL_DRIVER


def show(
    source: EventSource,
    stuck_after_s: float,
    *,
    sample_kernels: Path | None = None,
    by_rank: bool = False,
    kernel_stuck_after_s: float = 2.0,
    hint: str | None = None,
    max_passes: int | None = None,
    recording: Path | None = None,
) -> tuple[int, int | None]:
    """The live UI over ``source`` until the user quits, or a signal (SIGINT, SIGTERM, SIGHUP)
    asks it to close; its exit code and that signal. ``by_rank``: the processes are ranks
    (``run --ranks``), named and ordered by rank. ``kernel_stuck_after_s``: the kernels screen
    marks a launch quiet once one of its unfinished warps has run no event for that long.
    ``max_passes``: passes the tree keeps (its default when None). ``recording``: the file the
    stream is written to (``--record``); a replayed recording is that file itself. The detail
    pane names it in its reproducer commands.

    ``hint``: what to try first, which the UI shows as it starts (the demo's tour).

    Textual is imported here, so that only the commands that show the UI pay for it.
    """
    require_terminal()
    try:
        from iket_tui.ui.app import IketApp
    except ImportError as exc:
        raise UsageError(f"the UI cannot start: {exc}") from None
    app = IketApp(
        source,
        stuck_after_s=stuck_after_s,
        kernel_stuck_after_s=kernel_stuck_after_s,
        follow=True,
        sample_kernels=sample_kernels,
        by_rank=by_rank,
        max_passes=DEFAULT_MAX_PASSES if max_passes is None else max_passes,
        hint=hint,
    )
    if recording is None and isinstance(source, RecordingSource):
        recording = source.path
    app.detail.recording = None if recording == STDOUT else recording
    theme = ui_theme()
    if theme is not None:
        app.theme = theme
    caught: list[int] = []
    ended = threading.Event()

    def on_signal(signum: int) -> None:
        if not caught:
            caught.append(signum)
            _close_app(app, source, ended)

    with watch_signals(on_signal, UI_STOP_SIGNALS):
        try:
            code = app.run()
        finally:
            ended.set()
    return (code if code is not None else 0), (caught[0] if caught else None)


def require_terminal() -> None:
    """Refuse, in one line, to draw the UI where nobody can see it: a UI writing escape codes
    into a pipe or a file would never end by itself. Textual's web driver is let through: its
    pipes lead to a browser, through ``iket-tui serve``."""
    if os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER:
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the UI needs a terminal on stdin and stdout; without one, `iket-tui record TARGET -o FILE`"
            " keeps the stream (`iket-tui run --no-ui` follows a program) and `iket-tui dump FILE` prints it"
        )


def _close_app(app: App[int], source: EventSource, ended: threading.Event) -> None:
    """Close the source (so the app's reader thread ends), then the app; ask again every
    second until it has ended, since a request that comes while it is still starting is lost."""
    source.close()
    while not ended.is_set():
        with contextlib.suppress(Exception):  # the app may not run yet, or not any more
            app.call_from_thread(app.exit)
        ended.wait(1.0)
