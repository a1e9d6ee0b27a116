"""Headless Chromium driven over WebDriver (chromedriver's HTTP API), with nothing but the standard library.

Used by the report's browser tests and by scripts/screenshot_report.py to open report.html,
read the browser's console, run a line of JavaScript and take screenshots. It lives with the tests:
dtfx builds reports without a browser. Needs the `chromium` and `chromium-driver` Debian packages (or a Chrome and a
matching chromedriver on PATH).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# Flags for a headless browser run as root in a container: no sandbox (root cannot use it), no GPU,
# and no background traffic, so that a test sees only what the page itself loads.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    """Chromium or chromedriver is missing, did not start, or answered a WebDriver command with an error."""


def find_chromium() -> tuple[str, str] | None:
    """(chromium, chromedriver) executables found on PATH, or None when either is missing."""
    chromium = next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Chromium:
    """A headless Chromium session: `with Chromium() as browser: browser.open(path)`.

    Each session gets a fresh, temporary profile (--user-data-dir), removed on exit together
    with the chromedriver process this object started.
    """

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60.0):
        found = find_chromium()
        if not found:
            raise BrowserError("chromium and chromedriver are needed: apt-get install chromium chromium-driver")
        self.chromium, self.chromedriver = found
        self.width, self.height, self.timeout = width, height, timeout
        self._driver: subprocess.Popen | None = None
        self._profile: str | None = None
        self._base = ""
        self._session = ""

    def __enter__(self) -> Chromium:
        self._profile = tempfile.mkdtemp(prefix="dtfx-chromium-")
        port = _free_port()
        self._base = f"http://127.0.0.1:{port}"
        self._driver = subprocess.Popen(
            [self.chromedriver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            self._wait_ready()
            options = {
                "binary": self.chromium,
                "args": [*CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}"],
            }
            capabilities = {
                "browserName": "chrome",
                "goog:chromeOptions": options,
                "goog:loggingPrefs": {"browser": "ALL"},  # keeps console messages for console_messages()
            }
            answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
            self._session = answer["sessionId"]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        if self._session:
            try:
                self._call("DELETE", f"/session/{self._session}")
            except (BrowserError, OSError):
                pass  # the browser is gone already; the driver is stopped below anyway
            self._session = ""
        if self._driver is not None:
            self._driver.terminate()
            try:
                self._driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._driver.kill()
                self._driver.wait()
            self._driver = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._driver.poll() is not None:
                raise BrowserError(f"chromedriver exited at start with code {self._driver.returncode}")
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except (OSError, BrowserError):
                pass
            time.sleep(0.1)
        raise BrowserError(f"chromedriver did not answer within {self.timeout:.0f} s")

    def _call(self, method: str, path: str, payload: dict | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(self._base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            try:
                detail = json.load(error).get("value", {})
            except ValueError:
                detail = {}
            raise BrowserError(f"{method} {path}: {detail.get('error', error.code)}: {detail.get('message', '')}") from None
        return answer.get("value")

    def _command(self, method: str, path: str, payload: dict | None = None) -> Any:
        return self._call(method, f"/session/{self._session}{path}", payload)

    def open(self, target: str | os.PathLike) -> None:
        """Loads a URL, or a local file by its path, and waits until it has loaded."""
        url = str(target)
        if "://" not in url:
            url = Path(url).resolve().as_uri()
        self._command("POST", "/url", {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        """Runs `source` (a function body; `return` gives the result) in the page."""
        return self._command("POST", "/execute/sync", {"script": source, "args": list(args)})

    def console_messages(self) -> list[dict[str, Any]]:
        """The browser console's messages since the last call: [{level, message, source, timestamp}].

        Includes JavaScript errors and refused loads (SEVERE), and console.log output.
        """
        return self._command("POST", "/se/log", {"type": "browser"}) or []

    def _set_viewport(self, width: int, height: int) -> None:
        """Sizes the window so that the page itself (the viewport, without the browser's frame) is width x height."""
        self._command("POST", "/window/rect", {"width": width, "height": height})
        inner_width, inner_height = self.script("return [window.innerWidth, window.innerHeight];")
        if (inner_width, inner_height) != (width, height):
            self._command("POST", "/window/rect", {"width": 2 * width - inner_width, "height": 2 * height - inner_height})

    def screenshot(self, full_page: bool = True) -> bytes:
        """A PNG of the page at the session's width: the whole document when `full_page`, else `height` pixels of it."""
        self._set_viewport(self.width, self.height)
        if full_page:
            height = int(self.script("return Math.ceil(document.documentElement.scrollHeight);"))
            self._set_viewport(self.width, max(height, 100))
        return base64.b64decode(self._command("GET", "/screenshot"))
