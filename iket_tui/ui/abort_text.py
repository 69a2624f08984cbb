"""What came of an abort, in words: for the UI's abort pane and for ``iket-tui abort``.

No Textual here: the command prints the same lines without starting the UI.
"""

from __future__ import annotations

from iket_tui.protocol import messages as m


def abort_lines(answer: m.Message) -> list[str]:
    """One line when the compile failed with the abort; otherwise where the compiling thread is
    and what can be done next (an exception waits for a thread inside native code). A line is a
    paragraph, never cut inside a sentence: the pane and the terminal wrap it to their width.
    The processes the thread waits on are named, where the agent says (older agents do not)."""
    compile_id, name, pid = answer.get("compile"), answer.get("name"), answer.get("pid")
    state = answer.get("state")
    waits = _processes(answer.get("children"))
    if state == m.ABORT_ABORTED:
        failed = f"compile {compile_id} failed: {answer.get('compile_error')}; the program goes on"
        return [failed, f"It was waiting on {waits}, which the abort left running."] if waits else [failed]
    if state == m.ABORT_ENDED:
        how = answer.get("compile_error") or "it finished"
        return [f"compile {compile_id} ended before the abort took effect ({how})"]
    if state == m.ABORT_RAISED:
        return [
            f"compile {compile_id}: CompileAborted was raised in its thread, in {name}, but the compile has not ended "
            "yet: it is still unwinding, or code on its stack caught the exception (it is raised again at the "
            "compile's next pass).",
            f"`iket-tui stacks {pid}` (S in the UI) shows where the thread is now.",
        ]
    main = answer.get("main_thread")
    if main is False:
        first = (
            f"compile {compile_id} runs on thread {answer.get('thread')}, not the main thread, and is inside native "
            "code: its thread has run no Python since the abort was asked, and a wait there cannot be interrupted."
        )
        waiting = "CompileAborted is raised as soon as the thread runs Python again (the native call returns)."
    elif main is True:
        first = (
            f"compile {compile_id} is inside native code: the abort's signal did not bring its thread, the main "
            "thread, back to Python (a C++ pass, say)."
        )
        waiting = "CompileAborted is raised as soon as the thread runs Python again (the native call returns)."
    else:  # an agent that does not say which thread
        first = f"compile {compile_id} is inside native code: its thread has run no Python since the abort was asked."
        waiting = (
            "CompileAborted is raised as soon as the thread runs Python again (the native call returns, or a signal "
            "handler of the program runs)."
        )
    lines = [
        first,
        f"It is in {name}; its innermost Python frame: {answer.get('where') or 'unknown'}",
        f"The abort waits there: {waiting} A call that never returns cannot be stopped from inside the process.",
    ]
    if waits:
        lines.append(
            f"It waits on {waits}: ending that (kill {_pids(answer.get('children'))}) lets the thread go on, "
            "and the abort then takes effect."
        )
    lines.append(
        f"Next: `iket-tui stacks {pid} --native` shows where it is (S, then n, in the UI); ending the process "
        f"(kill {pid}) is your call."
    )
    return lines


def _waited(children: object) -> list[dict[str, object]]:
    """The processes the thread waits on themselves (children of the program), of an answer's ``children``."""
    if not isinstance(children, list):
        return []
    found = [child for child in children if isinstance(child, dict) and isinstance(child.get("pid"), int)]
    below = {child.get("pid") for child in found}
    return [child for child in found if child.get("ppid") not in below]


def _processes(children: object) -> str:
    """``process 1234 (sleep 600)``, ``processes 1234 (nvcc ...) and 1240 (ptxas ...)``, or empty."""
    waited = _waited(children)
    named = [f"{child['pid']} ({child.get('command') or child.get('name') or '?'})" for child in waited]
    if not named:
        return ""
    return f"process {named[0]}" if len(named) == 1 else f"processes {', '.join(named[:-1])} and {named[-1]}"


def _pids(children: object) -> str:
    return " ".join(str(child["pid"]) for child in _waited(children))
