"""``iket-tui run`` in a real terminal, its program's agent vanishing in the middle of a
message: the UI says the source failed (not that the target exited), and once it closes the
error is one line after it, the program's exit code kept.

``run`` follows the program's children, so even this one process is read through the merged
stream of several: its failure must still be the stream's. The agent is the fake one, started
by a shell, with the real agent's start-up hook kept out of the way.
"""

from __future__ import annotations

import re
import shlex
import sys

from cli_helpers import FAKE_AGENT_PATH, Terminal


def test_run_shows_the_source_failed_and_says_why_after_the_ui() -> None:
    agent = f"env IKET_TUI= {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT_PATH))} vanish"
    terminal = Terminal("run", "--", "sh", "-c", f"exec {agent}")
    terminal.wait_for(b"disappeared in the middle of a message")  # the header: the source's error
    terminal.read_for(0.5)
    shown = terminal.output
    terminal.press(b"q")
    assert terminal.wait_exit() == 9
    assert not re.search(rb"pid \d+: pid \d+ disappeared", shown), "the source's error, not one process's note"
    after = terminal.output[len(shown) :].decode(errors="replace")
    said = re.findall(r"iket-tui: [^\r\n]*", after)
    assert said and re.fullmatch(r"iket-tui: pid \d+ disappeared in the middle of a message \(.*\)", said[0]), after
