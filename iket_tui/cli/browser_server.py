"""The web server behind ``iket-tui serve``: textual-serve's, with a page that needs no internet
and a WebSocket that only this server's own page may drive.

Imported only by ``serve``, since textual-serve (an optional extra) brings aiohttp with it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import jinja2
import textual_serve
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from iket_tui.cli.errors import say

TAB_EXIT_S = 5.0
_CDN_LINK = re.compile(r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>")
_PACKAGED_FONT = """\
    <link rel="preload" href="{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf" as="font"
      type="font/ttf" crossorigin />
    <style>
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
      }
    </style>
</head>"""


class BrowserServer(Server):
    """textual-serve's server, running ``command`` for each browser tab.

    Its page comes whole from this machine, its links are made from the address the browser
    used (so that a port forwarded under another number works), and pages of other sites are
    kept from driving the app. :attr:`command` may change while it serves: a tab takes the
    command of the moment it opens. When it stops, it closes the open tabs and waits for their
    apps to exit.
    """

    def __init__(self, command: str, *, host: str, port: int, title: str, what: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.what = what
        self._page = jinja2.Environment(autoescape=True).from_string(offline_page())
        self._tabs: set[web.WebSocketResponse] = set()

    def initialize_logging(self) -> None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("iket-tui serve: %(message)s"))
        served = logging.getLogger("textual-serve")
        served.handlers[:] = [handler]
        served.setLevel(logging.WARNING)
        served.propagate = False

    async def on_startup(self, app: web.Application) -> None:
        say(f"serving {self.title} on {url(self.host, self.port)}: {self.what}; Ctrl-C stops")

    async def handle_index(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        socket_scheme = "wss" if request.scheme == "https" else "ws"
        html = self._page.render(
            font_size=_int(request.query.get("fontsize"), 16),
            app_websocket_url=f"{socket_scheme}://{request.host}/ws",
            config={"static": {"url": f"{base}/static/"}},
            application={"name": self.title},
            ping_url="",
        )
        return web.Response(text=html, content_type="text/html")

    async def on_shutdown(self, app: web.Application) -> None:
        for websocket in list(self._tabs):
            await websocket.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"iket-tui serve stopped")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One browser tab: its own app process, driven by the tab's keys and mouse until either ends."""
        if not self._same_site(request):
            raise web.HTTPForbidden(text="iket-tui serve: a page of another site may not drive this app")
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)

        async def close() -> None:
            await websocket.close()

        tab = _TabApp(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
            debug=self.debug,
        )
        self._tabs.add(websocket)
        try:
            await tab.start(_int(request.query.get("width"), 80), _int(request.query.get("height"), 24))
            await self._process_messages(websocket, tab)
        finally:
            self._tabs.discard(websocket)
            await tab.stop()
        return websocket

    def _same_site(self, request: web.Request) -> bool:
        """Whether the tab comes from this server's own page: any web page may open a WebSocket
        to localhost, and on loopback a name that only points here (DNS rebinding) is refused."""
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            return False
        if is_loopback(self.host):
            return is_loopback(urlsplit(f"//{request.host}").hostname or "")
        return True


class _TabApp(AppService):
    """The app process of one tab; stopping it waits until the process has exited (killed
    after a while), so that none outlives the server."""

    async def stop(self) -> None:
        await super().stop()
        process = self._process
        if process is None or process.returncode is not None:
            return
        try:
            await asyncio.wait_for(process.wait(), TAB_EXIT_S)
        except TimeoutError:
            process.kill()
            await process.wait()


def offline_page() -> str:
    """textual-serve's page template without what it loads from the internet (a Google Fonts
    stylesheet, which stalls the page where there is no internet); its font comes from the
    package instead."""
    template = Path(textual_serve.__file__).parent / "templates" / "app_index.html"
    page = _CDN_LINK.sub("", template.read_text(encoding="utf-8"))
    return page.replace("</head>", _PACKAGED_FONT, 1)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (an address of 127.0.0.0/8 or ::1, or localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url(host: str, port: int) -> str:
    """The address to open in a browser: on this machine's name when it listens on every address."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
