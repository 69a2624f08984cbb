"""``iket-tui serve`` from the command line: its help, its one-line refusals, the program it
starts once for every tab, and the app that textual-serve runs for a tab getting past the
terminal check. The page itself, in a real browser, is tested in tests/web."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_no_traceback, assert_one_line_error, iket_command, run_iket, wait_until

from iket_tui.cli import main
from iket_tui.cli.serve import REFUSED_UNDER_SERVE
from iket_tui.sources.reading import read_recording

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-demo.msgpack"
needs_textual_serve = pytest.mark.skipif(
    importlib.util.find_spec("textual_serve") is None,
    reason="needs textual-serve: pip install -e '.[test]'",
)


def test_help_says_what_each_tab_gets_with_examples() -> None:
    result = run_iket("serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # wrapped to the terminal's width, wherever that falls
    assert "127.0.0.1 by default" in text
    assert "ssh -L 8000:127.0.0.1:8000" in text
    assert "each tab replays the file" in text
    assert "serve starts CMD with the agent once" in text
    assert "iket-tui serve replay run.msgpack --port 8000" in result.stdout  # an example: one line
    listed = run_iket("--help")
    assert "serve" in listed.stdout


def test_without_textual_serve_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if it were not installed
    assert main(["serve", "replay", str(EXAMPLE)]) == 2
    assert capsys.readouterr().err == "iket-tui: serve needs textual-serve: pip install 'iket-tui[serve]'\n"


@needs_textual_serve
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "serve needs a command: iket-tui serve replay FILE | attach TARGET | run -- CMD"),
        (("dump", str(EXAMPLE)), "serve shows replay, attach or run, not 'dump'"),
        (("replay", "missing.msgpack"), "missing.msgpack: no such file"),
        (("replay", str(EXAMPLE), "--port", "70000"), "argument --port: a port is between 1 and 65535"),
        (("replay", str(EXAMPLE), "--record", "x.msgpack"), "serve replay needs no --record"),
        (("run",), "serve run needs a command"),
        (("attach",), "serve attach needs a TARGET: a pid, a socket path, HOST:PID or HOST:"),
        (("attach", "1", "1"), "a TARGET is named twice"),
    ],
    ids=[
        "no-command",
        "not-a-ui-command",
        "missing-file",
        "bad-port",
        "record-a-replay",
        "run-nothing",
        "no-target",
        "a-target-twice",
    ],
)
def test_bad_input_is_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(run_iket("serve", *args), expected)


@needs_textual_serve
def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_iket("serve", "replay", str(EXAMPLE), "--port", str(port))
    assert_one_line_error(result, f"cannot listen on 127.0.0.1:{port}: Address already in use")


@needs_textual_serve
def test_run_starts_the_program_once_and_keeps_its_recording(tmp_path: Path) -> None:
    """The program runs under serve's own connection, not a tab's: it ends by itself, serve says
    that new tabs replay it, and Ctrl-C leaves the recording asked for."""
    recording = tmp_path / "run.msgpack"
    log = tmp_path / "serve.log"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    program = [sys.executable, "-c", "import time; time.sleep(0.5); print('done')"]
    with open(log, "w") as out:
        serve = subprocess.Popen(
            iket_command("serve", "--port", str(port), "--record", str(recording), "run", "--", *program),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ),
            text=True,
        )
        try:
            wait_until(lambda: "a new tab replays the recording" in log.read_text(), timeout=60)
            serve.send_signal(signal.SIGINT)
            assert serve.wait(timeout=30) == 0
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()
    said = log.read_text()
    assert_no_traceback(said)
    assert f"on http://127.0.0.1:{port}: each browser tab attaches to pid " in said
    assert "exited with code 0; tabs open now keep their view, and a new tab replays the recording" in said
    assert f"messages to {recording}" in said
    messages, _ = read_recording(recording)
    (hello,) = (msg for msg in messages if msg["type"] == "hello")
    assert hello["argv"][-1] == program[-1]


def test_the_app_textual_serve_runs_for_a_tab_gets_past_the_terminal_check() -> None:
    """textual-serve runs the app with pipes and names Textual's web driver; the app starts
    (the driver's first line), where a plain pipe is refused (tests/cli/test_cli_terminal.py)."""
    env = dict(os.environ, TEXTUAL_DRIVER="textual.drivers.web_driver:WebDriver")
    app = subprocess.Popen(
        iket_command("replay", str(EXAMPLE)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert app.stdout is not None
        assert app.stdout.readline() == b"__GANGLION__\n"
    finally:
        app.kill()
        app.wait()


def test_a_tab_asks_the_agent_for_the_filter_serve_records_with() -> None:
    from iket_tui.cli.filters import filters_of
    from iket_tui.cli.parser import build_parser
    from iket_tui.cli.serve import _filter_options

    args = build_parser().parse_args(["attach", "123", "--passes", "tl.*", "--passes", "tir.*", "--depth", "0"])
    options = _filter_options(filters_of(args))
    assert options == ["--passes", "tl.*", "--passes", "tir.*", "--depth", "0"]
    assert filters_of(build_parser().parse_args(["attach", "123", *options])) == filters_of(args)
    assert _filter_options({}) == []


@needs_textual_serve
@pytest.mark.parametrize(
    ("served", "option"),
    [(served, option) for served, options in sorted(REFUSED_UNDER_SERVE.items()) for option in sorted(options)],
)
def test_each_option_completion_leaves_out_under_serve_is_refused_by_serve(served: str, option: str) -> None:
    words = {"replay": [str(EXAMPLE)], "attach": [], "run": []}[served]
    value = ["x.msgpack"] if option == "--record" else []
    rest = ["--", "true"] if served == "run" else []
    result = run_iket("serve", served, *words, option, *value, *rest)
    assert result.returncode == 2, result.stderr
    assert_no_traceback(result.stderr)
    assert len(result.stderr.splitlines()) == 1
