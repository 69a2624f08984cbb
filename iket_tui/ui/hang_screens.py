"""The two ways out of a stuck compile, from the pass tree: ``R`` writes a reproducer of the
running pass (the agent captures the module it was given), ``A`` aborts the compile after a
confirmation (the agent raises ``CompileAborted`` in its thread). Both ask the target through
the app and show what came of it in a small pane that ``escape`` closes."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from iket_tui.outputs import OutputError
from iket_tui.protocol import messages as m
from iket_tui.repro import Repro, ReproError, write_hang
from iket_tui.sources.base import SourceError
from iket_tui.ui import units
from iket_tui.ui.abort_text import abort_lines
from iket_tui.ui.messages import AskTarget, ResponseArrived

CAPTURE_WAIT_S = 30.0
ABORT_WAIT_S = 30.0
"""The agent answers an abort within about 11 s: it waits to see what came of it."""


@dataclass(frozen=True)
class StuckPass:
    """The pass a key acts on: where it is and how long it has been running."""

    compile: int
    seq: int
    name: str
    kernel: str | None
    running_ns: int
    pid: int | None = None
    """In a session of several processes, the process it runs in (compile numbers are each
    process's own); ``None`` in a session of one."""
    who: str = ""
    """That process in the user's words (``rank 3``, ``pid 123``)."""

    @property
    def what(self) -> str:
        kernel = f", {self.kernel}" if self.kernel else ""
        where = f" in {self.who}" if self.who else ""
        return f"{self.name} (pass {self.seq} of compile {self.compile}{kernel}{where})"


class HangPane(ModalScreen[None]):
    """A pane of a few lines over the pass tree; escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    DEFAULT_CSS = """
    HangPane { align: center middle; }
    HangPane > #hang-pane { width: 100; max-width: 100%; height: auto; border: round $accent;
                            padding: 1 2; background: $panel; }
    HangPane #hang-title { text-style: bold; }
    HangPane #hang-keys { color: $text-muted; padding-top: 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="hang-pane"):
            yield Static(id="hang-title", markup=False)
            yield Static(id="hang-body", markup=False)
            yield Static("escape closes", id="hang-keys", markup=False)

    def show(self, title: str, body: str = "", keys: str = "escape closes") -> None:
        self.query_one("#hang-title", Static).update(title)
        self.query_one("#hang-body", Static).update(body)
        self.query_one("#hang-keys", Static).update(keys)

    def text(self) -> str:
        """Everything the pane says, as the user reads it."""
        parts = (str(self.query_one(f"#hang-{part}", Static).render()) for part in ("title", "body", "keys"))
        return "\n".join(part for part in parts if part)

    def action_close(self) -> None:
        self.dismiss(None)


class ReproPane(HangPane):
    """Asks the target for what a reproducer of the running pass needs and writes it to a directory."""

    def __init__(
        self,
        ask: AskTarget,
        stuck: StuckPass,
        *,
        save_dir: Path | None = None,
        program: str = "",
        recording: Path | None = None,
    ) -> None:
        super().__init__()
        self.ask = ask
        self.stuck = stuck
        self.save_dir = save_dir or Path.cwd()
        self.program = program
        """What the target is (``pid N: COMMAND``), for the reproducer's docstring."""
        self.recording = recording
        """The file this session's stream is in (replayed, or written by --record), named in the
        command that reads a capture from it where the target cannot be asked."""
        self.written: Repro | None = None
        self._asked: int | None = None

    @property
    def directory(self) -> Path:
        stuck = self.stuck
        process = f"-pid{stuck.pid}" if stuck.pid is not None else ""
        return self.save_dir / f"iket-repro{process}-c{stuck.compile}-p{stuck.seq}"

    def on_mount(self) -> None:
        stuck = self.stuck
        try:
            self._asked = self.ask(m.WHAT_STUCK, timeout_s=CAPTURE_WAIT_S, compile=stuck.compile, seq=stuck.seq)
        except SourceError as exc:
            where = shlex.quote(str(self.recording)) if self.recording is not None else "RECORDING"
            self.show(
                f"no reproducer of {stuck.what}",
                f"{exc}; iket-tui repro {where} --stuck -o DIR reads a capture a recording holds",
            )
            return
        self.show(f"asking the target for the module {stuck.what} was given ...")

    @on(ResponseArrived)
    def _answered(self, message: ResponseArrived) -> None:
        answer = message.answer
        if answer.request_id != self._asked:
            return
        self._asked = None
        found, why = message.outcome(unsaid="not captured")
        if found is None:
            self.show(f"no reproducer of {self.stuck.what}", why)
            return
        self.show(f"writing a reproducer of {self.stuck.what} to {self.directory} ...")
        self._write(found)

    @work(thread=True, exclusive=True, exit_on_error=False, group="repro", description="write a reproducer")
    def _write(self, capture: m.Message) -> None:
        try:
            written: Repro | str = write_hang(capture, self.directory, source=self.program)
        except (ReproError, OutputError) as exc:
            written = str(exc)
        except OSError as exc:
            written = f"cannot write {self.directory}: {exc.strerror or exc}"
        self.app.call_from_thread(self._written, capture, written)

    def _written(self, capture: m.Message, written: Repro | str) -> None:
        title = f"a reproducer of {self.stuck.what}"
        if isinstance(written, str):
            self.show(f"no reproducer of {self.stuck.what}", written)
            return
        self.written = written
        running = units.duration(capture.get("running_ns") if isinstance(capture.get("running_ns"), int) else None)
        lines = [f"written to {written.directory}, the pass running for {running} when captured:", written.note]
        if written.runnable:
            lines.append(f"python {written.directory / 'repro.py'} --timeout S")
        self.show(title, "\n".join(lines))


class AbortPane(HangPane):
    """Asks before aborting a compile (``y``), then asks the target and says what came of it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "abort", "Abort the compile"),
        Binding("escape,n,q", "close", "Keep it running"),
    ]

    def __init__(self, ask: AskTarget, stuck: StuckPass) -> None:
        super().__init__()
        self.ask = ask
        self.stuck = stuck
        self.answer: m.Message | None = None
        self._asked: int | None = None
        self._confirming = True

    def on_mount(self) -> None:
        stuck = self.stuck
        self.show(
            f"Abort compile {stuck.compile}?",
            f"It has been in {stuck.name} (pass {stuck.seq}) for {units.duration(stuck.running_ns)}.\n"
            "The agent raises CompileAborted in the compiling thread: the compile fails as a failing compile "
            "does, and the program goes on (it may catch the exception). A wait of the main thread is "
            "interrupted, and the compiler's processes a codegen step waits on are ended; another thread inside "
            "native code takes it only once it runs Python again.",
            "y aborts the compile · escape or n keeps it running",
        )

    def action_abort(self) -> None:
        if not self._confirming:
            return
        self._confirming = False
        try:
            self._asked = self.ask(m.WHAT_ABORT, timeout_s=ABORT_WAIT_S, compile=self.stuck.compile)
        except SourceError as exc:
            self.show(f"compile {self.stuck.compile} was not aborted", str(exc))
            return
        self.show(f"aborting compile {self.stuck.compile} ...", "waiting for the target to say what came of it")

    @on(ResponseArrived)
    def _answered(self, message: ResponseArrived) -> None:
        answer = message.answer
        if answer.request_id != self._asked:
            return
        self._asked = None
        found, why = message.outcome(unsaid="it could not")
        if found is None:
            self.show(f"compile {self.stuck.compile} was not aborted", why)
            return
        self.answer = found
        state = found.get("state")
        title = f"compile {self.stuck.compile} aborted" if state == m.ABORT_ABORTED else f"compile {self.stuck.compile}"
        self.show(title, "\n".join(abort_lines(found)))
