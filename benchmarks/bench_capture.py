"""Front-end throughput of capture: read -> parse -> reassemble, no dissector.

    python benchmarks/bench_capture.py [CAPTURE] [--profile]

Without CAPTURE it uses benchmarks/data/many-small-produce.pcap when present,
else writes a synthetic one (a real Produce conversation from the public
captures, replicated over many connections with advancing sequence numbers).
It then writes a 4x version (distinct client addresses per copy) and measures
both in fresh processes: packets/s, MB/s and peak RSS. Peak RSS staying flat
from 1x to 4x shows memory does not grow with the capture's size. Generated
files go to $TMPDIR/kafka-dissect-bench (reused on the next run).

Stages measured: ``read`` (records only), ``parse`` (+ link/IP/TCP headers),
``pipeline`` (+ flows, reassembly, Kafka detection, a no-op connection).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capture import CaptureOptions, Pipeline, open_capture
from capture.packet import parser_for

DATA = ROOT / "benchmarks" / "data"
WORK = Path(tempfile.gettempdir()) / "kafka-dissect-bench"
TEMPLATE = ROOT.parent / "shared" / "public-captures" / "deepflowio__deepflow__00-produce-v7-sw8.pcap"


class NullConnection:
    """Accepts bytes and produces nothing: isolates the front end from the dissector."""

    def __init__(self, mid_stream: bool = False) -> None:
        self.bytes = 0

    def feed(self, direction: object, data: bytes, ts: int) -> list:
        self.bytes += len(data)
        return []

    def gap(self, direction: object, ts: int, nbytes: int | None) -> list:
        return []

    def close(self, ts: int) -> list:
        return []


# -- capture files to measure --------------------------------------------------------------------

def _pcap_header(linktype: int) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype)


def _rewrite(frame: bytes, tcp_off: int, seq_delta: int, ack_delta: int, client_is_src: bool,
             client_ip: bytes, client_port: int) -> bytes:
    b = bytearray(frame)
    ip = tcp_off - ((b[14] & 15) * 4)
    src_ip, dst_ip = (ip + 12, ip + 16)
    if client_is_src:
        b[src_ip:src_ip + 4] = client_ip
        struct.pack_into("!H", b, tcp_off, client_port)
    else:
        b[dst_ip:dst_ip + 4] = client_ip
        struct.pack_into("!H", b, tcp_off + 2, client_port)
    seq, ack = struct.unpack_from("!II", b, tcp_off + 4)
    struct.pack_into("!II", b, tcp_off + 4, (seq + seq_delta) & 0xFFFFFFFF, (ack + ack_delta) & 0xFFFFFFFF)
    return bytes(b)


def synthesize(path: Path, connections: int, rounds: int, copy: int = 0) -> Path:
    """Each connection: the template's handshake, its data exchange ``rounds`` times, its FIN."""
    src = open_capture(TEMPLATE)
    recs = list(src)
    src.close()
    parse = parser_for(1)
    rows = []
    for ts, lt, data, wl in recs:
        seg = parse(data, wl)
        assert isinstance(seg, tuple)
        ip_off = 14
        tcp_off = ip_off + (data[ip_off] & 15) * 4
        rows.append((data, tcp_off, seg[1] != 36333, len(seg[6]), seg[5]))
    client_port0 = rows[0][1]
    hand = [r for r in rows if r[4] & 0x02]
    body = [r for r in rows if not (r[4] & 0x03)][1:]      # data + acks, after the handshake's ACK
    fin = [r for r in rows if r[4] & 0x01]
    per_round_c = sum(r[3] for r in body if r[2])
    per_round_s = sum(r[3] for r in body if not r[2])
    ts = 1_700_000_000_000_000_000 + copy * 10**15
    with open(path, "wb") as f:
        f.write(_pcap_header(1))
        for c in range(connections):
            ip = bytes([10, 1 + copy, (c >> 8) & 255, c & 255])
            port = 20000 + (c % 40000)
            out = []
            out += [(r, 0, 0) for r in hand + [rows[2]]]
            for k in range(rounds):
                out += [(r, k * per_round_c, k * per_round_s) for r in body]
            out += [(r, (rounds - 1) * per_round_c, (rounds - 1) * per_round_s) for r in fin]
            for (data, tcp_off, from_client, _, _), dc, ds in out:
                frame = _rewrite(data, tcp_off, dc if from_client else ds, ds if from_client else dc,
                                 from_client, ip, port)
                ts += 2000
                f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9 // 1000, len(frame), len(frame)))
                f.write(frame)
    del client_port0
    return path


def quadruple(src_path: Path, dst_path: Path) -> Path:
    """Four copies of a capture, each with its own client addresses, one after the other (streamed)."""
    first = last = None
    lt = 1
    src = open_capture(src_path)
    for ts, lt, _, _ in src:
        first = ts if first is None else first
        last = ts
    src.close()
    span = (last - first + 10**9) if first is not None and last is not None else 0
    parse = parser_for(lt)
    with open(dst_path, "wb") as f:
        f.write(_pcap_header(lt))
        for copy in range(4):
            src = open_capture(src_path)
            for ts, _, data, wl in src:
                b = bytearray(data)
                seg = parse(data, wl) if parse else None
                if isinstance(seg, tuple) and len(seg[0]) == 12:
                    # Shift the IPv4 addresses inside the frame: find them by the flow key.
                    at = data.find(seg[0][:8])
                    if at >= 0:
                        b[at + 3] = (b[at + 3] + 64 * copy) & 255
                        b[at + 7] = (b[at + 7] + 64 * copy) & 255
                t = ts + copy * span
                f.write(struct.pack("<IIII", t // 10**9, t % 10**9 // 1000, len(b), wl))
                f.write(bytes(b))
            src.close()
    return dst_path


# -- measuring -----------------------------------------------------------------------------------

def measure(path: str, stage: str, profile: bool = False, repeat: int = 3) -> dict:
    """Best of ``repeat`` runs (the machine may be shared); MB are of the file on disk."""
    def work() -> int:
        src = open_capture(path)
        n = 0
        if stage == "read":
            for _ in src:
                n += 1
        elif stage == "parse":
            last, parse = -1, None
            for ts, lt, data, wl in src:
                if lt != last:
                    parse, last = parser_for(lt), lt
                parse(data, wl)  # type: ignore[misc]
                n += 1
        else:
            p = Pipeline(CaptureOptions(), connection_factory=NullConnection)
            for _ in p.run(src):
                pass
            n = p.stats.packets
        src.close()
        return n

    size = os.path.getsize(path)
    if profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(work)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    best = cpu = float("inf")
    n = 0
    for _ in range(1 if profile else repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        n = work()
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return {"stage": stage, "packets": n, "MB": round(size / 1e6, 1), "seconds": round(best, 3),
            "cpu_seconds": round(cpu, 3), "packets_per_s": round(n / best), "packets_per_cpu_s": round(n / cpu), "MB_per_s": round(size / 1e6 / best, 1),
            "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "vm_hwm_MB": _vm_hwm()}


def _vm_hwm() -> float | None:
    """Peak RSS of this process image alone (getrusage's can include the parent's before exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def child(path: Path, stage: str) -> dict:
    out = subprocess.run([sys.executable, __file__, str(path), "--child", stage],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help="cProfile the pipeline stage instead")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.capture, args.child)))
        return
    WORK.mkdir(parents=True, exist_ok=True)
    if args.capture:
        path = Path(args.capture)
    elif (DATA / "many-small-produce.pcap").exists():
        path = DATA / "many-small-produce.pcap"
    else:
        path = WORK / "synthetic-produce.pcap"
        if not path.exists():
            synthesize(path, connections=500, rounds=200)
    if args.profile:
        print(measure(str(path), "pipeline", profile=True))
        return
    quad = WORK / (path.stem + "-x4.pcap")
    if not quad.exists() or quad.stat().st_mtime < path.stat().st_mtime:
        quadruple(path, quad)
    print(f"capture: {path} ({path.stat().st_size / 1e6:.1f} MB); 4x: {quad.stat().st_size / 1e6:.1f} MB")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (best of 3 runs each)")
    print(f"{'file':4} {'stage':9} {'packets':>9} {'MB':>6} {'wall s':>7} {'cpu s':>7} {'pkt/s':>9} "
          f"{'pkt/cpu-s':>9} {'MB/s':>6} {'peak RSS MB':>11} {'VmHWM MB':>9}")
    for label, p in (("1x", path), ("4x", quad)):
        for stage in ("read", "parse", "pipeline"):
            r = child(p, stage)
            print(f"{label:4} {stage:9} {r['packets']:>9} {r['MB']:>6} {r['seconds']:>7} {r['cpu_seconds']:>7} "
                  f"{r['packets_per_s']:>9} {r['packets_per_cpu_s']:>9} {r['MB_per_s']:>6} {r['peak_rss_MB']:>11} "
                  f"{r['vm_hwm_MB']:>9}")


if __name__ == "__main__":
    main()
