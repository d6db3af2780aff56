#!/usr/bin/env python3
"""Record real Kafka 0.7 clients (PyPI's brod and samsa) talking to a scripted 0.7 broker.

    sudo python samples/v07/record.py [--out samples/v07] [--src DIR]

No Kafka 0.7 broker is available (it ran on Scala 2.8 and ZooKeeper 3.3), so
the broker side is a small responder on 127.0.0.1 that answers from the wire
format: it keeps each partition's log as the bytes of the message sets
produced to it, answers FETCH with the log's bytes from the requested byte
offset up to MAX_SIZE (cutting a message at the end, as 0.7's log did),
OFFSETS with byte offsets, MULTIFETCH with one (length, error, set) per
partition, and 0.7's error codes (1 for an offset past the log end, 3 for a
partition that does not exist). The *requests* are the clients' own bytes.

brod 0.4.3 and samsa 0.3.11 are Python 2 code. Their sdists are fetched with
pip, converted with the standard library's lib2to3, and given the smallest
shims that let them run on Python 3 without changing what they send (see
SHIMS: bytes where Python 2 had ``str``, and a signed CRC-32 as Python 2's
``zlib.crc32`` returned). Each client runs in a child process against the
responder while tcpdump captures the port; the child writes what the client
itself returned (fetched offsets and payloads, offsets, raised errors) and
that becomes ``clients.expected.json``; nothing in it comes from the capture.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLIENTS = {"brod": "0.4.3", "samsa": "0.3.11"}
PARTITIONS = 2                      # per topic; a larger partition number gets WrongPartition (3)

# (file, old text, new text): the Python 3 shims, applied after lib2to3.
_SIGNED_CRC = ("\ndef _signed_crc32(data):\n    import zlib\n    v = zlib.crc32(bytes(data))\n"
               "    return v - (1 << 32) if v >= 1 << 31 else v   # Python 2's zlib.crc32 was signed\n")
SHIMS = [
    ("brod/base.py", "from io import StringIO", "from io import BytesIO as StringIO"),
    ("brod/base.py", "        return binascii.crc32(value)", "        return _signed_crc32(value)"),
    ("brod/base.py", "VERSION_0_7 = False", "VERSION_0_7 = False\n" + _SIGNED_CRC),
    ("brod/base.py", "if raw_message_length == '':", "if raw_message_length == b'':"),
    ("brod/blocking.py", "self._overflow = ''", "self._overflow = b''"),
    ("brod/blocking.py", "read_data = ''", "read_data = b''"),
    ("samsa/client.py", "from zlib import crc32",
     "crc32 = None  # replaced below\n" + _SIGNED_CRC + "crc32 = _signed_crc32\n\n"
     "def buffer(obj, offset=0, size=None):\n    mv = memoryview(obj)\n"
     "    return mv[offset:] if size is None else mv[offset:offset + size]\n"),
    ("samsa/utils/socket.py", "return struct.unpack_from(buffer(bytea))", "return struct.unpack_from(bytes(bytea))"),
    ("samsa/client.py", "self._socket.sendall(str(request.wrap(4)))",
     "self._socket.sendall(request.wrap(4).getvalue())"),
    ("samsa/utils/structuredio.py", """        if isinstance(value, StructuredBytesIO):
            value = str(value)""", """        if isinstance(value, StructuredBytesIO):
            value = value.getvalue()"""),
    ("samsa/utils/structuredio.py", """    def frame(self, size, value):
        value = str(value)""", """    def frame(self, size, value):
        value = value.getvalue() if isinstance(value, StructuredBytesIO) else (
            value.encode() if isinstance(value, str) else value)"""),
]


# --------------------------------------------------------------------------
# The clients, converted

def prepare_clients(src: Path | None, work: Path) -> Path:
    """Unpacked, lib2to3-converted, shimmed brod and samsa under ``work/lib``; returns that path."""
    dl = work / "sdist"
    dl.mkdir(parents=True, exist_ok=True)
    if src is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                        "-d", str(dl)] + [f"{n}=={v}" for n, v in CLIENTS.items()], check=True)
        src = dl
    lib = work / "lib"
    lib.mkdir(exist_ok=True)
    for name, version in CLIENTS.items():
        with tarfile.open(src / f"{name}-{version}.tar.gz") as tf:
            tf.extractall(work / "x", filter="data")
        shutil.copytree(work / "x" / f"{name}-{version}" / name, lib / name, dirs_exist_ok=True)
    subprocess.run([sys.executable, "-W", "ignore", "-m", "lib2to3", "-w", "-n", "-j", "2", str(lib)],
                   check=True, capture_output=True)
    for rel, old, new in SHIMS:
        path = lib / rel
        text = path.read_text()
        if old not in text:
            raise SystemExit(f"shim does not apply to {rel}: {old!r}")
        path.write_text(text.replace(old, new, 1))
    # samsa's package imports ZooKeeper (kazoo) parts; the low-level client needs none of them.
    (lib / "samsa" / "__init__.py").write_text("__version__ = '0.3.11'\n")
    return lib


# --------------------------------------------------------------------------
# The scripted 0.7 broker

class Responder:
    """Answers 0.7 requests on 127.0.0.1:port, one connection at a time per thread."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.logs: dict[tuple[str, int], bytearray] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    size = struct.unpack(">i", self._read(conn, 4))[0]
                    answer = self.handle(self._read(conn, size))
                    if answer is not None:
                        conn.sendall(struct.pack(">i", len(answer)) + answer)
            except (EOFError, ConnectionError):
                return

    def handle(self, req: bytes) -> bytes | None:
        kind = struct.unpack_from(">h", req)[0]
        if kind in (2, 3):                                  # MULTIFETCH, MULTIPRODUCE
            count = struct.unpack_from(">h", req, 2)[0]
            pos, sets = 4, []
            for _ in range(count):
                pos, answer = self._single(kind - 1 if kind == 2 else 0, req, pos)
                if answer is not None:
                    sets.append(answer)
            if kind == 3:
                return None
            return struct.pack(">h", 0) + b"".join(struct.pack(">i", len(s)) + s for s in sets)
        _, answer = self._single(kind, req, 2)
        return answer

    def _single(self, kind: int, req: bytes, pos: int) -> tuple[int, bytes | None]:
        n = struct.unpack_from(">h", req, pos)[0]
        topic = req[pos + 2:pos + 2 + n].decode()
        partition = struct.unpack_from(">i", req, pos + 2 + n)[0]
        pos += 6 + n
        with self.lock:
            log = self.logs.setdefault((topic, max(partition, 0)), bytearray())
            if kind == 0:                                       # PRODUCE: append the message set
                size = struct.unpack_from(">i", req, pos)[0]
                if 0 <= partition < PARTITIONS or partition == -1:
                    log += req[pos + 4:pos + 4 + size]
                return pos + 4 + size, None
            a, b = struct.unpack_from(">qi", req, pos)
            pos += 12
            if not 0 <= partition < PARTITIONS:
                return pos, struct.pack(">h", 3) + (struct.pack(">i", 0) if kind == 4 else b"")
            if kind == 1:                                       # FETCH: bytes from the offset, up to max size
                if a > len(log) or a < 0:
                    return pos, struct.pack(">h", 1)
                return pos, struct.pack(">h", 0) + bytes(log[a:a + b])
            values = [len(log)] if a == -1 else [0]             # OFFSETS: latest / earliest (one segment)
            return pos, struct.pack(">hi", 0, len(values[:b])) + b"".join(struct.pack(">q", v) for v in values[:b])


# --------------------------------------------------------------------------
# What each client does (run in a child process: ``--client NAME --port P``)

def run_brod(port: int) -> dict:
    import brod
    from brod.base import OffsetOutOfRange, WrongPartitionCode

    k = brod.Kafka("127.0.0.1", port)
    report: dict = {"library": "brod", "library_version": CLIENTS["brod"], "topic": "brod-events"}
    k.produce("brod-events", [b"hello from brod", b"a second message"], partition=0)
    k.produce("brod-events", [b"to partition one"], partition=1)
    time.sleep(0.2)
    report["earliest"] = k.offsets(b"brod-events", -2, 1, partition=0)
    report["latest"] = k.offsets(b"brod-events", -1, 1, partition=0)
    report["fetched"] = [[o, m.decode()] for o, m in k.fetch("brod-events", 0, partition=0, max_size=1024)]
    report["fetched_p1"] = [[o, m.decode()] for o, m in k.fetch("brod-events", 0, partition=1, max_size=1024)]
    report["fetched_cut"] = [[o, m.decode()] for o, m in k.fetch("brod-events", 0, partition=0, max_size=30)]
    errors = []
    for offset, partition in ((100_000, 0), (0, 5)):
        try:
            k.fetch("brod-events", offset, partition=partition)
            errors.append(None)
        except (OffsetOutOfRange, WrongPartitionCode) as exc:
            errors.append(type(exc).__name__)
    report["errors"] = errors
    return report


def run_samsa(port: int) -> dict:
    from samsa.client import Client
    from samsa.handlers import ThreadingHandler

    c = Client("127.0.0.1", ThreadingHandler(), port=port)
    report: dict = {"library": "samsa", "library_version": CLIENTS["samsa"], "topic": "samsa-events"}
    c.produce("samsa-events", 0, [b"samsa one", b"samsa two"])
    c.multiproduce([("samsa-events", 0, [b"multi a"]), ("samsa-events", 1, [b"multi b", b"multi c"])])
    c.produce("samsa-events", 1, [b"magic one"], version=1, compression=0)
    report["latest"] = c.offsets("samsa-events", 0, -1, 1)
    report["earliest"] = c.offsets("samsa-events", 1, -2, 1)
    report["fetched"] = [[m.offset, bytes(m.payload).decode()] for m in c.fetch("samsa-events", 0, 0, 1024)]
    multi, error = [], None
    try:
        for messages in c.multifetch([("samsa-events", 0, 0, 1024), ("samsa-events", 1, 0, 1024),
                                      ("samsa-events", 7, 0, 100)]):
            multi.append([[m.offset, bytes(m.payload).decode()] for m in messages])
    except Exception as exc:  # noqa: BLE001 - samsa raises its error class without the .reason it reads
        error = f"{type(exc).__name__}: {exc}"
    report["multifetched"] = multi
    report["multifetch_error"] = error
    c.disconnect()
    return report


# --------------------------------------------------------------------------

def record(out: Path, src: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="kd-v07-") as tmp:
        work = Path(tmp)
        lib = prepare_clients(src, work)
        responder = Responder()
        pcap = work / "clients.pcap"
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "262144", "-w", str(pcap),
                                 f"tcp port {responder.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert dump.stderr is not None
            dump.stderr.readline()                           # "listening on lo ..."
            time.sleep(0.5)
            reports = []
            env = {**os.environ, "PYTHONPATH": str(lib)}
            for name in CLIENTS:
                proc = subprocess.run([sys.executable, __file__, "--client", name, "--port", str(responder.port)],
                                      env=env, capture_output=True, text=True, timeout=120)
                if proc.returncode:
                    raise SystemExit(f"{name} failed:\n{proc.stderr}")
                reports.append(json.loads(proc.stdout))
                time.sleep(0.3)
            size = -1
            while pcap.stat().st_size != size:               # stopped only once the file stops growing
                size = pcap.stat().st_size
                time.sleep(0.5)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=10)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(pcap, out / "clients.pcap")
        expected = {"pcap": "clients.pcap", "broker": "scripted 0.7 responder (samples/v07/record.py)",
                    "port": responder.port, "python": sys.version.split()[0], "clients": reports,
                    "shims": [f"{rel}: {old!r} -> {new!r}" for rel, old, new in SHIMS]}
        (out / "clients.expected.json").write_text(json.dumps(expected, indent=1) + "\n")
        print(f"wrote {out / 'clients.pcap'} ({(out / 'clients.pcap').stat().st_size} bytes)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--src", type=Path, help="a directory holding brod-0.4.3.tar.gz and samsa-0.3.11.tar.gz")
    ap.add_argument("--client", choices=list(CLIENTS))
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    if args.client:
        report = {"brod": run_brod, "samsa": run_samsa}[args.client](args.port)
        print(json.dumps(report))
        return 0
    record(args.out, args.src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
