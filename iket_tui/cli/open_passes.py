"""What ``dump`` adds after a recording's messages for each pass still open when the recording
ends: a ``pass_incomplete`` line, in the words the UI and ``export`` use for it ("never
finished: the recording ends here"), so that no pass is left without a closing line.

A pass closes with its ``pass_end`` or ``pass_incomplete``, with its compile's ``compile_end``,
or, in a recording of several processes, with the ``process`` line saying that its process's
stream ended (dump shows that line). Only the passes still open are kept, each with its start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from iket_tui.export.common import STREAM_END
from iket_tui.protocol import messages as m

NEVER_FINISHED: Final = f"never finished: {STREAM_END}"
"""The error of a pass the recording ends in, as the UI and ``export`` say it."""
_Key = tuple[Any, Any, Any]  # process, compile, seq


class OpenPasses:
    """Follows a stream's pass events for the passes it leaves open."""

    def __init__(self) -> None:
        self._open: dict[_Key, dict[str, Any]] = {}
        self._process: object = None  # whose messages these are: (host, pid), once a pid was named
        self._several = False
        self.last_t_ns = 0
        """The latest agent time the stream carried: its end."""

    def apply(self, msg: dict[str, Any]) -> None:
        """Take in one message of the stream."""
        t = msg.get("t_ns")
        if type(t) is int and t > self.last_t_ns:
            self.last_t_ns = t
        kind = msg.get("type")
        if kind == m.PASS_START:
            self._open[(self._process, msg.get("compile"), msg.get("seq"))] = msg
        elif kind in (m.PASS_END, m.PASS_INCOMPLETE):
            self._open.pop((self._process, msg.get("compile"), msg.get("seq")), None)
        elif kind == m.COMPILE_END:
            self._close(lambda key: key[0] == self._process and key[1] == msg.get("compile"))
        elif kind == m.PROCESS:
            process = (msg.get("host"), msg.get("pid"))  # pids of two hosts may be the same
            if self._process is not None and process != self._process:
                self._several = True
            self._process = process
            if msg.get("state") is not None:  # its stream ended: dump shows that line
                self._close(lambda key: key[0] == self._process)
        elif kind == m.HELLO and msg.get("role", "agent") == "agent" and self._process is None:
            self._process = (None, msg.get("pid"))
            for key in [key for key in self._open if key[0] is None]:  # passes seen before any pid was named
                self._open[(self._process, key[1], key[2])] = self._open.pop(key)

    def _close(self, closes: Callable[[_Key], bool]) -> None:
        for key in [key for key in self._open if closes(key)]:
            del self._open[key]

    def at_end(self) -> list[dict[str, Any]]:
        """One ``pass_incomplete`` map per pass still open, in the order they started; in a
        recording of several processes each names its process's pid (and its host, where it runs
        on another machine)."""
        found = []
        for (process, _, _), start in self._open.items():
            line = {**start, "type": m.PASS_INCOMPLETE, "t_ns": self.last_t_ns, "error": NEVER_FINISHED}
            if self._several and isinstance(process, tuple):
                host, line["pid"] = process
                if host is not None:
                    line["host"] = host
            found.append(line)
        return found
