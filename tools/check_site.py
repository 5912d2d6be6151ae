"""Open the built documentation site in headless Chromium and fail on any console error.

The site is served over HTTP from its folder; each page given is loaded in a fresh tab through
the DevTools protocol (a small WebSocket client on the standard library), which reports every
console message, uncaught exception and failed resource load. A screenshot of each page is
written to the artifacts folder.

Usage:
    python tools/check_site.py build/site --pages / api/state/ --screenshots build/artifacts

Exit code 0 when every page loaded with no error, 1 otherwise (the errors are printed), 2 when
Chromium cannot be found.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SETTLE = 1.0
"""Seconds to keep listening after the load event, for errors raised by late scripts."""


class DevTools:
    """One WebSocket connection to a DevTools target (RFC 6455, client side, text frames)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        rest = url.split("://", 1)[1]
        host_port, path = rest.split("/", 1)
        host, port = host_port.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += self.sock.recv(4096)
        head, self.buffer = answer.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"DevTools refused the WebSocket upgrade: {head[:200]!r}")
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def _frame(self) -> tuple[bool, int, bytes]:
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        return bool(first & 0x80), first & 0x0F, self._read(length)

    def receive(self) -> dict[str, Any]:
        """The next message (fragments joined; pings and pongs skipped)."""
        payload = b""
        while True:
            final, opcode, data = self._frame()
            if opcode == 8:
                raise ConnectionError("DevTools closed the connection")
            if opcode in (0, 1, 2):
                payload += data
                if final:
                    return dict(json.loads(payload))

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call ``method`` and return its result; events that arrive meanwhile are kept."""
        self.next_id += 1
        message = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(message) < 126:
            header += bytes([0x80 | len(message)])
        elif len(message) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(message))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(message))
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(message))
        self.sock.sendall(header + mask + masked)
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method} failed: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float) -> None:
        """Keep events until ``method`` arrives or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not any(event.get("method") == method for event in self.events):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {method} within {timeout:.0f} s")
            self.sock.settimeout(remaining)
            self.events.append(self.receive())

    def drain(self, seconds: float) -> None:
        """Keep every event that arrives during ``seconds``."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self.sock.settimeout(remaining)
            try:
                self.events.append(self.receive())
            except TimeoutError:
                return


def errors(events: list[dict[str, Any]]) -> list[str]:
    """The console errors, uncaught exceptions and failed loads among DevTools events."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description") or details.get("text")
            found.append(f"uncaught exception: {description}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [str(arg.get("value", arg.get("description", ""))) for arg in params["args"]]
            found.append(f"console.{params['type']}: {' '.join(texts)}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}")
    return found


def find_browser() -> str | None:
    """The path of a Chromium-like browser on PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``folder`` on a free loopback port in a daemon thread."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without a log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start_browser(browser: str, profile: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start headless Chromium with DevTools on a free port; return it and its HTTP address."""
    process = subprocess.Popen(
        [
            browser,
            "--headless=new",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--window-size=1280,900",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{browser} did not open its DevTools port (exit {process.poll()})")
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    return process, f"http://127.0.0.1:{port}"


def check_page(devtools_http: str, url: str, screenshot: Path) -> list[str]:
    """Load ``url`` in a new tab; return its errors and write its screenshot."""
    request = urllib.request.Request(f"{devtools_http}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(request, timeout=30) as response:
        target = json.load(response)
    tab = DevTools(target["webSocketDebuggerUrl"])
    try:
        for domain in ("Page", "Runtime", "Log"):
            tab.send(f"{domain}.enable")
        tab.send("Page.navigate", url=url)
        tab.wait_for("Page.loadEventFired", timeout=60)
        tab.drain(SETTLE)
        heading = tab.send(
            "Runtime.evaluate", expression="document.querySelector('h1')?.textContent ?? ''"
        )
        found = errors(tab.events)
        if not heading.get("result", {}).get("value"):
            found.append("the page has no <h1>: it did not render")
        shot = tab.send("Page.captureScreenshot", format="png")
        screenshot.write_bytes(base64.b64decode(shot["data"]))
    finally:
        tab.sock.close()
    return found


def main(argv: list[str] | None = None) -> int:
    """Check each page of the built site; print what failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="The folder mkdocs built.")
    parser.add_argument("--pages", nargs="+", default=["/"], help="Paths under the site root.")
    parser.add_argument("--screenshots", type=Path, default=Path("build/artifacts"))
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        print(f"check_site: {args.site} has no index.html; build the site first.", file=sys.stderr)
        return 1
    browser = find_browser()
    if browser is None:
        print(f"check_site: none of {', '.join(BROWSERS)} is on PATH; install chromium.")
        return 2
    args.screenshots.mkdir(parents=True, exist_ok=True)
    server, root = serve(args.site)
    failed = False
    with tempfile.TemporaryDirectory(prefix="check-site-") as profile:
        process, devtools_http = start_browser(browser, Path(profile))
        try:
            for page in args.pages:
                name = page.strip("/").replace("/", "_") or "home"
                shot = args.screenshots / f"site_{name}.png"
                found = check_page(devtools_http, root + page.lstrip("/"), shot)
                status = "ok" if not found else f"{len(found)} error(s)"
                print(f"check_site: {page}: {status}; screenshot {shot}")
                for line in found:
                    print(f"  {line}")
                failed = failed or bool(found)
        finally:
            process.kill()
            process.wait()
            server.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
