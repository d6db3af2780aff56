"""Open a page in real headless chromium over the DevTools protocol and report what happened.

Not a test module: ``test_html_report`` drives it. Chromium runs with a fresh
profile and no background networking; the page's console errors, uncaught
exceptions and any request that is not for a local file are recorded from the
moment before navigation, so nothing the page logs early is missed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--remote-debugging-port=0"]

# Per chart div: how many plotly traces it drew with actual geometry, and its SVG's size.
CHARTS_JS = """
Array.from(document.querySelectorAll('.kd-chart')).map(function (div) {
  var svg = div.querySelector('svg.main-svg');
  var box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  var drawn = Array.from(div.querySelectorAll('g.trace')).filter(function (g) {
    return Array.from(g.querySelectorAll('path')).some(function (p) {
      var d = p.getAttribute('d') || '';
      return d.length > 4 && d !== 'M0,0Z' && p.getBoundingClientRect().width + p.getBoundingClientRect().height > 0;
    });
  }).length;
  return {id: div.id, svgs: div.querySelectorAll('svg').length, traces: drawn,
          width: Math.round(box.width), height: Math.round(box.height)};
})
"""


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    rendered: str | None = None                        # the page's data-kd-rendered mark
    charts: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)     # console errors, exceptions, error log entries
    external_requests: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    title: str = ""
    no_data: int = 0
    probe: Any = None                                   # what the caller's ``probe`` expression returned


class _Session:
    """One websocket to the browser; commands to the page go through a flat target session."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict[str, Any]] = []
        self.session_id: str | None = None
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            msg = json.loads(raw)
            fut = self.pending.pop(msg.get("id"), None) if "id" in msg else None
            if fut is not None:
                fut.set_result(msg)
            elif "method" in msg:
                self.events.append(msg)

    async def send(self, method: str, params: dict | None = None, *, page: bool = True,
                   timeout: float = 30) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if page and self.session_id:
            msg["sessionId"] = self.session_id
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send(json.dumps(msg))
        reply = await asyncio.wait_for(fut, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        res = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")


def _describe(event: dict[str, Any]) -> str | None:
    """A line for each event that means the page went wrong."""
    method, p = event["method"], event.get("params", {})
    if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
        return "console." + p["type"] + ": " + " ".join(
            str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
    if method == "Runtime.exceptionThrown":
        d = p.get("exceptionDetails", {})
        return "exception: " + str(d.get("exception", {}).get("description") or d.get("text"))
    if method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
        return "log: " + p["entry"].get("text", "")
    return None


async def _drive(ws_url: str, urls: list[str], width: int, height: int, timeout: float,
                 probe: str | None = None) -> list[PageReport]:
    import websockets

    reports = []
    async with websockets.connect(ws_url, max_size=None) as ws:
        for url in urls:
            reports.append(await _page(ws, url, width, height, timeout, probe))
        with contextlib.suppress(Exception):
            closing = _Session(ws)
            await closing.send("Browser.close", page=False, timeout=5)
            closing.reader.cancel()
    return reports


async def _page(ws: Any, url: str, width: int, height: int, timeout: float, probe: str | None) -> PageReport:
    """One page in its own target of the browser, its events recorded from before navigation."""
    report = PageReport()
    s = _Session(ws)
    target = await s.send("Target.createTarget", {"url": "about:blank"}, page=False)
    attached = await s.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                            page=False)
    s.session_id = attached["sessionId"]
    for domain in ("Runtime", "Log", "Page", "Network"):
        await s.send(f"{domain}.enable")
    await s.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    await s.send("Page.navigate", {"url": url})
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        with contextlib.suppress(RuntimeError):  # the document may not exist yet
            report.rendered = await s.evaluate("document.body && document.body.getAttribute('data-kd-rendered')")
        if report.rendered:
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)  # plotly finishes transitions after its promise resolves
    report.charts = await s.evaluate(CHARTS_JS) or []
    report.no_data = await s.evaluate("document.querySelectorAll('.nodata').length")
    report.title = await s.evaluate("document.title")
    if probe:
        report.probe = await s.evaluate(probe)
    metrics = await s.send("Page.getLayoutMetrics")
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = await s.send("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1}},
        timeout=60)
    report.screenshot = base64.b64decode(shot["data"])
    for e in s.events:
        if e.get("sessionId") != s.session_id:   # an earlier page's target, closing
            continue
        line = _describe(e)
        if line:
            report.errors.append(line)
        if e["method"] == "Network.requestWillBeSent":
            req = e["params"]["request"]["url"]
            if not req.startswith(("file:", "data:", "about:", "blob:")):
                report.external_requests.append(req)
    with contextlib.suppress(Exception):
        await s.send("Target.closeTarget", {"targetId": target["targetId"]}, page=False, timeout=5)
    s.reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await s.reader
    return report


def open_page(path: Path, *, width: int = 1400, height: int = 900, timeout: float = 60,
              probe: str | None = None) -> PageReport:
    """Load ``path`` in headless chromium, wait for the report's charts, and report on the page
    (``probe``: a JavaScript expression whose JSON value is returned as ``PageReport.probe``)."""
    return open_pages([path], width=width, height=height, timeout=timeout, probe=probe)[0]


def open_pages(paths: list[Path], *, width: int = 1400, height: int = 900, timeout: float = 60,
               probe: str | None = None) -> list[PageReport]:
    """:func:`open_page` for several pages, one after the other in one chromium (its start is most of
    a small page's time)."""
    binary = chromium_binary()
    if binary is None:
        raise FileNotFoundError("chromium not found: apt-get install chromium")
    profile = tempfile.mkdtemp(prefix="kd-chromium-")
    # Its own session, so that chromium's helper processes (zygote, renderers) can be stopped
    # with it: left running, they went on writing into the profile while it was being removed.
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        ws_url = None
        for line in proc.stderr:  # chromium prints its DevTools endpoint on stderr once it listens
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                ws_url = m.group(1)
                break
        if ws_url is None:
            raise RuntimeError(f"chromium did not start (exit {proc.poll()})")
        # Keep draining stderr so chromium never blocks on a full pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        return asyncio.run(_drive(ws_url, [p.resolve().as_uri() for p in paths], width, height, timeout, probe))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _remove(Path(profile))


def _remove(directory: Path) -> None:
    """Remove chromium's profile, waiting out helpers that were still exiting (up to 5 s)."""
    for _ in range(50):
        try:
            shutil.rmtree(directory)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    shutil.rmtree(directory, ignore_errors=True)
