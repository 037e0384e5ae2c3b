"""A small Chrome DevTools Protocol client over a hand-written WebSocket (RFC 6455: the
handshake, masked client frames, text and continuation frames), standard library only, for
driving Debian's headless chromium in the viewer tests. No dependency is needed for the
two dozen calls the tests make.

    with Browser() as b:            # None of chromium: Browser.available() is False
        page = b.page()
        page.call("Page.navigate", url="file:///...")
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--remote-debugging-port=0", "--window-size=1200,800"]


class WebSocket:
    def __init__(self, url: str, timeout: float) -> None:
        m = re.fullmatch(r"ws://([^:/]+):(\d+)(/.*)", url)
        if m is None:
            raise ValueError(f"not a ws:// URL: {url}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket"
                           f"\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the connection in the handshake")
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n")[0]:
            raise ConnectionError(f"handshake refused: {status[:200]!r}")
        self.buf = rest

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytearray([0x81])   # FIN, text
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(head) + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)   # the server never masks
            op = b0 & 0x0F
            if op == 0x8:
                raise ConnectionError("the browser closed the WebSocket")
            if op in (0x9, 0xA):      # ping/pong: not part of a message
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def pending(self) -> bool:
        return bool(self.buf) or bool(select.select([self.sock], [], [], 0)[0])

    def close(self) -> None:
        self.sock.close()


class Page:
    """One page target: ``call`` a method and get its result; events are kept in
    ``events`` (method, params) as they arrive."""

    def __init__(self, ws_url: str, timeout: float) -> None:
        self.ws = WebSocket(ws_url, timeout)
        self.timeout = timeout
        self.next_id = 0
        self.events: list[tuple[str, dict[str, Any]]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append((msg["method"], msg.get("params", {})))
        raise TimeoutError(f"{method}: no answer in {self.timeout} s")

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        seen = 0
        while time.monotonic() < deadline:
            for name, params in self.events[seen:]:
                if name == method:
                    return params
            seen = len(self.events)
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append((msg["method"], msg.get("params", {})))
        raise TimeoutError(f"no {method} in {self.timeout} s")

    def drain(self) -> None:
        while self.ws.pending():
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append((msg["method"], msg.get("params", {})))

    def eval(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        self.drain()
        out = []
        for name, p in self.events:
            if name == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails", {}).get("text")))
            elif name == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in p.get("args", [])))
            elif name == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        self.drain()
        return [p["request"]["url"] for name, p in self.events
                if name == "Network.requestWillBeSent"]


class Browser:
    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.profile = tempfile.mkdtemp(prefix="dfg-chromium-")

    @staticmethod
    def available() -> bool:
        return CHROMIUM is not None

    def __enter__(self) -> Browser:
        assert CHROMIUM is not None
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + self.timeout
        self.port = None
        assert self.proc.stderr is not None
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("chromium exited before it listened")
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            raise TimeoutError("chromium did not start listening")
        return self

    def page(self) -> Page:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                        timeout=self.timeout) as r:
                targets = json.load(r)
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return Page(pages[0]["webSocketDebuggerUrl"], self.timeout)
            time.sleep(0.05)
        raise TimeoutError("chromium has no page")

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
