"""What came of an abort, in words: for the UI's abort pane and for ``iket-tui abort``.

No Textual here: the command prints the same lines without starting the UI.
"""

from __future__ import annotations

from iket_tui.protocol import messages as m


def abort_lines(answer: m.Message) -> list[str]:
    """One line when the compile failed with the abort; otherwise where the compiling thread is
    and what can be done next (an exception waits for a thread inside native code). A line is a
    paragraph, never cut inside a sentence: the pane and the terminal wrap it to their width."""
    compile_id, name, pid = answer.get("compile"), answer.get("name"), answer.get("pid")
    state = answer.get("state")
    if state == m.ABORT_ABORTED:
        return [f"compile {compile_id} failed: {answer.get('compile_error')}; the program goes on"]
    if state == m.ABORT_ENDED:
        how = answer.get("compile_error") or "it finished"
        return [f"compile {compile_id} ended before the abort took effect ({how})"]
    if state == m.ABORT_RAISED:
        return [
            f"compile {compile_id}: CompileAborted was raised in its thread, in {name}, but the compile has not ended "
            "yet: it is still unwinding, or code on its stack caught the exception.",
            f"`iket-tui stacks {pid}` (S in the UI) shows where the thread is now.",
        ]
    return [
        f"compile {compile_id} is inside native code: its thread has run no Python since the abort was asked.",
        f"It is in {name}; its innermost Python frame: {answer.get('where') or 'unknown'}",
        "The abort waits there: CompileAborted is raised as soon as the thread runs Python again (the native call "
        "returns, or a signal handler of the program runs). A call that never returns cannot be stopped from "
        "inside the process.",
        f"Next: `iket-tui stacks {pid} --native` shows where it is (S, then n, in the UI); ending the process "
        f"(kill {pid}) is your call.",
    ]
