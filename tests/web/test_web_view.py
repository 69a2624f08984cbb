"""``iket-tui serve`` in a real headless browser: the page loads without the internet, the pass
tree of a replay appears, keys typed into the page fold and unfold it, and a page of another
site cannot drive the app.

The browser is Debian's Chromium, driven by Playwright (never its own browser downloads); both
are installed by .ci/run, and the browser test skips, saying which is missing, elsewhere.
``IKET_TUI_SCREENSHOTS=1`` also writes the screenshot to screenshots/web-view.png.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "h200-demo.msgpack"
SCREENSHOT = ROOT / "screenshots" / "web-view.png"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_S = 60.0
T = TypeVar("T")

# textual.js keeps its xterm.js terminal in an object that also sets ``fitAddon``; catch that
# object as the page builds it, so that the test reads the terminal's text as the browser has it.
FIND_TERMINAL = """
Object.defineProperty(Object.prototype, "fitAddon", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "fitAddon", {value, writable: true, configurable: true, enumerable: true});
    window.iketPage = this;
  },
});
"""
SCREEN_TEXT = """() => {
  const terminal = window.iketPage && window.iketPage.terminal;
  if (!terminal) return null;
  const lines = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = terminal.buffer.active.getLine(y);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
}"""

needs_textual_serve = pytest.mark.skipif(
    importlib.util.find_spec("textual_serve") is None, reason="needs textual-serve: pip install -e '.[test]'"
)
NO_BROWSER = " and ".join(
    missing
    for missing, absent in [
        ("Playwright (pip install -e '.[test]')", importlib.util.find_spec("playwright") is None),
        ("Chromium (apt-get install chromium)", not os.access(CHROMIUM, os.X_OK)),
    ]
    if absent
)
needs_browser = pytest.mark.skipif(bool(NO_BROWSER), reason=f"needs {NO_BROWSER}")


@dataclass
class Served:
    port: int
    said: Callable[[], str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``iket-tui serve replay`` of the bundled recording, as a real process on a free port."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "iket_tui", "serve", "replay", str(EXAMPLE), "--port", str(port)]
    with open(log, "w") as out:
        serve = subprocess.Popen(
            [*command, "--speed", "max"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    served = Served(port, log.read_text)
    try:
        _wait(lambda: "Ctrl-C stops" in served.said() or serve.poll() is not None, "serve to listen", served.said)
        assert serve.poll() is None, served.said()
        yield served
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 0, served.said()
        assert "Traceback" not in served.said(), served.said()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


@needs_textual_serve
@needs_browser
def test_the_pass_tree_in_a_browser_folds_and_unfolds_with_keys(served: Served, tmp_path: Path) -> None:
    from playwright.sync_api import Route, sync_playwright

    asked: list[str] = []

    def only_this_server(route: Route) -> None:
        asked.append(route.request.url)
        if route.request.url.startswith(served.url):
            route.continue_()
        else:
            route.abort()  # as on a machine without the internet

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.add_init_script(FIND_TERMINAL)
            page.route("**/*", only_this_server)
            page.goto(served.url)

            screen = _wait_for(page, "1,534 events")  # the whole recording, following the newest compile
            assert "recording h200-demo.msgpack of pid 471" in screen
            assert "compile vector_add" in screen
            assert re.search(r"✓ (tl|tirx|s_tir)\.[A-Za-z]+ ", screen), screen  # rows of passes

            page.locator("textarea.xterm-helper-textarea").focus()  # where xterm.js takes its keys
            page.keyboard.press("c")  # collapse all
            tree = _tree(_wait_for(page, "▶ ✓ vector_add stage=jit-lower"))
            assert "9 compiles, 2 failed" in tree
            assert "pass context" not in tree
            assert "▶ ✗ layout_conflict InternalError: Layout infer" in tree

            page.keyboard.press("Home")
            page.keyboard.press("ArrowDown")
            page.keyboard.press("Enter")  # unfold the first compile
            tree = _tree(_wait_for(page, "▼ ✓ vector_add stage=jit-lower"))
            assert "▼ ✓ pass context 0 88 passes" in tree
            assert "✓ tirx.BindTarget" in tree

            assert page.evaluate("document.fonts.check('16px \"Roboto Mono\"')"), "the packaged font did not load"
            shot = tmp_path / "web-view.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()

    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("IKET_TUI_SCREENSHOTS"):
        shutil.copyfile(shot, SCREENSHOT)
    elsewhere = [url for url in asked if not url.startswith(served.url)]
    assert not elsewhere, f"the page asked the internet for {elsewhere}"
    assert any(url.endswith(".ttf") for url in asked), asked


@needs_textual_serve
def test_a_page_of_another_site_cannot_drive_the_app(served: Served) -> None:
    """Any web page may open a WebSocket to localhost: only this server's own page gets the app."""
    import aiohttp

    async def handshake(headers: dict[str, str]) -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(f"{served.url}ws?width=80&height=24", headers=headers) as websocket:
                    await websocket.close()
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    assert asyncio.run(handshake({"Origin": f"http://127.0.0.1:{served.port}"})) == 101
    assert (
        asyncio.run(handshake({"Origin": f"http://localhost:{served.port}", "Host": f"localhost:{served.port}"})) == 101
    )
    assert asyncio.run(handshake({"Origin": "https://example.com"})) == 403
    rebound = f"rebound.example:{served.port}"  # a name of another site made to point at 127.0.0.1
    assert asyncio.run(handshake({"Origin": f"http://{rebound}", "Host": rebound})) == 403


def _wait_for(page: Page, text: str) -> str:
    """The page's screen once it shows ``text``."""

    def showing() -> str | None:
        screen = _screen(page)
        return screen if text in screen else None

    return _wait(showing, repr(text), lambda: _screen(page))


def _tree(screen: str) -> str:
    """The pass tree's side of the screen, left of the detail pane's border."""
    return "\n".join(line.partition("▏")[0] for line in screen.splitlines())


def _screen(page: Page) -> str:
    text: str | None = page.evaluate(SCREEN_TEXT)
    return text or ""


def _wait(found: Callable[[], T | None], what: str, shown: Callable[[], str]) -> T:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {TIMEOUT_S:g} s; last seen:\n{shown()}")


@needs_textual_serve
@needs_browser
def test_a_replay_in_a_browser_has_its_timeline_bar_and_a_click_on_it_jumps(served: Served) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.add_init_script(FIND_TERMINAL)
            page.goto(served.url)
            bar = _bar(_wait_for(page, "29.5 / 29.5 s"))  # the whole recording played, at full speed
            assert bar.count("✗") == 2, bar  # its two failed compiles marked
            left, right = bar.index("│") + 1, bar.rindex("│")
            box = page.locator(".xterm-screen").bounding_box()
            assert box is not None
            columns, rows = page.evaluate("[window.iketPage.terminal.cols, window.iketPage.terminal.rows]")
            cell_w, cell_h = box["width"] / columns, box["height"] / rows
            column = left + (right - left) // 4  # a quarter of the way: about 7.4 s
            page.mouse.click(box["x"] + (column + 0.5) * cell_w, box["y"] + 1.5 * cell_h)
            jumped = _wait(
                lambda: (label := _bar(_screen(page)).split("/")[0].strip()) != "29.5" and label,
                "a jump",
                lambda: _screen(page),
            )
            assert 6.0 < float(jumped) < 9.0, _screen(page)
        finally:
            browser.close()


def _bar(screen: str) -> str:
    """The timeline bar's line: the one under the header."""
    lines = screen.splitlines()
    return lines[1] if len(lines) > 1 else ""
