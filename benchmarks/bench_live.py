"""Live capture under load: the highest zero-loss rates, and how decoding falls behind and catches up.

    sudo python benchmarks/bench_live.py [--baseline REV] [--small 2000,5000,10000] [--large 10,20,40]
                                         [--seconds 5] [--catchup RATE]

For each version (the working tree, and with ``--baseline`` a git revision of
this repository, e.g. the commit before the spool) and each rate, a tansu broker
on a free loopback port takes librdkafka Produce traffic at that rate for
``--seconds`` while ``kdissect live -i lo --ports PORT`` captures it; then SIGINT.
A run is *zero-loss* when the dataset's Produce records equal the delivery
reports, no packet was dropped, and there is no ``gap`` anomaly.

* small: 100-byte messages, linger 0 (many small Produce exchanges), rate in messages/s;
* large: 100 KB messages, linger 20 ms (large batches, 64 KB frames), rate in MB/s.

``--catchup RATE`` (small messages/s, working tree only) runs one rate above the
decoder's speed and reports the spool backlog when the capture stopped and how
long decoding took to finish it. The machine is shared: the load average is
printed with every figure.

    sudo python benchmarks/bench_live.py --replay benchmarks/data/many-small-produce.pcap --pps 5000,20000

``--metrics`` measures the working tree twice per rate, alternating, without and with
``kdissect live --metrics`` (a thread here scrapes ``/metrics`` every second, as Prometheus would):
what live metrics cost of the highest zero-loss rate. ``--fold-cost CAPTURE`` measures the decoding
side alone, in this process: exchanges/s of decoding the capture into the dataset without and with
the metric fold, alternating (``--repeat`` times each); with ``--instructions``, the instructions
both take under valgrind's callgrind, which the shared machine's load does not change.

Clients and broker on this machine cannot produce more than ~1,500 small Produce
exchanges/s, so ``--replay`` pushes a recorded capture (``make_capture.py``) at a
fixed packet rate, as tcpreplay does, into one end of a veth pair in a private
network namespace while ``kdissect live -i`` the other end captures it. Zero-loss
means the same exchanges as ``kdissect decode`` of the file and no drop.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _produce(bootstrap: str, topic: str, kind: str, rate: float, seconds: float) -> None:
    """Child mode: produce at ``rate`` for ``seconds``; print 'delivered N failed M'."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=15).values():
        f.result(timeout=30)
    size = 100 if kind == "small" else 100_000
    per_s = rate if kind == "small" else rate * 1e6 / size
    conf = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0 if kind == "small" else 20,
            "message.max.bytes": 8 << 20, "batch.size": 4 << 20, "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 2 << 20}
    p = Producer(conf)
    done = [0, 0]

    def report(err: object, msg: object) -> None:
        done[0 if err is None else 1] += 1
    value = os.urandom(size)
    start = time.monotonic()
    n = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = int((now - start) * per_s) + 1
        while n < due:
            try:
                p.produce(topic, value=value, on_delivery=report)
                n += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        time.sleep(0.001)
    p.flush(120)
    print(f"delivered {done[0]} failed {done[1]} seconds {time.monotonic() - start:.2f}", flush=True)


def _tree(rev: str | None, work: Path) -> Path:
    """The source tree to run: the working tree, or ``git archive REV`` unpacked."""
    if rev is None:
        return ROOT
    dest = work / f"tree-{rev}"
    if not dest.exists():
        data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(dest)
    return dest


def _records(out: Path) -> tuple[int, int, int]:
    """Produce records and Produce exchanges in the dataset, and its gap anomalies."""
    import pyarrow.dataset as ds
    parts = ds.dataset(out / "partitions", format="parquet").to_table().to_pandas()
    ex = ds.dataset(out / "exchanges", format="parquet").to_table(columns=["api_key"]).to_pandas()
    an = ds.dataset(out / "anomalies", format="parquet").to_table().to_pandas()
    produced = parts[(parts.api_key == 0) & (parts.direction == "request")].record_count.fillna(0).sum()
    return int(produced), int((ex.api_key == 0).sum()), int((an.kind == "gap").sum())


def wait_packet_socket(pid: int, timeout: float = 60.0) -> None:
    """Block until process ``pid`` holds an open packet socket (both versions: the capture has begun)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/net/packet") as f:
                inodes = {line.split()[-1] for line in f.readlines()[1:]}
            # The spool version hands the socket to its capture process: look at the children too.
            children = open(f"/proc/{pid}/task/{pid}/children").read().split()
            for p in [str(pid), *children]:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    link = os.readlink(f"/proc/{p}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError("kdissect live did not open its packet socket")


@contextmanager
def _metrics(on: bool) -> Iterator[list[str]]:
    """``kdissect live`` arguments serving metrics (and a thread scraping them every second), or none."""
    if not on:
        yield []
        return
    from tests.brokers import free_port
    port = free_port()
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            except OSError:
                pass
    t = threading.Thread(target=scrape, daemon=True)
    t.start()
    try:
        yield ["--metrics", f"127.0.0.1:{port}"]
    finally:
        stop.set()
        t.join()


def run_once(tree: Path, kind: str, rate: float, seconds: float, work: Path, metrics: bool = False) -> dict:
    from tests.brokers import free_port, run_tansu
    port = free_port()
    out = work / f"out-{kind}-{rate}-{port}"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with run_tansu(port) as bootstrap, _metrics(metrics) as extra:
        live = subprocess.Popen([sys.executable, "-m", "kdissect", "live", "-i", "lo", "--ports", str(port),
                                 "-o", str(out), *extra], cwd=tree, env=env, stderr=subprocess.PIPE, text=True)
        wait_packet_socket(live.pid)   # the baseline prints nothing when its socket is open
        t0 = time.monotonic()
        prod = subprocess.run([sys.executable, __file__, "--produce", bootstrap, f"bench-{kind}", kind, str(rate),
                               str(seconds)], capture_output=True, text=True, env={**os.environ,
                                                                                     "PYTHONPATH": str(ROOT)})
        produced_for = time.monotonic() - t0
        m = re.search(r"delivered (\d+) failed (\d+)", prod.stdout)
        if not m:
            live.send_signal(signal.SIGINT)
            live.wait(60)
            raise RuntimeError(prod.stderr[-2000:])
        stop = time.monotonic()
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=600)
        exit_after = time.monotonic() - stop
    delivered = int(m.group(1))
    records, produces, gaps = _records(out)
    packets = re.search(r"^live lo: ([\d,]+) packets", err, re.M)
    # "lost N packets dropped by the kernel ..." (spool) or "kernel dropped N packets" (before it)
    kernel = re.findall(r"([\d,]+) packets dropped by the kernel|kernel dropped ([\d,]+)", err)
    drops = sum(int(g.replace(",", "")) for pair in kernel for g in pair if g)
    spool = re.search(r"([\d,]+) dropped with the spool full", err)
    drops += int(spool.group(1).replace(",", "")) if spool else 0
    backlog = re.search(r"backlog +(.*)", err)
    shutil.rmtree(out, ignore_errors=True)
    return {"kind": kind, "rate": rate, "metrics": metrics, "delivered": delivered, "failed": int(m.group(2)), "records": records,
            "produce_exchanges_per_s": round(produces / seconds),
            "packets": int(packets.group(1).replace(",", "")) if packets else None, "gaps": gaps, "drops": drops, "zero_loss": records == delivered and not drops and not gaps,
            "produce_s": round(produced_for, 1), "exit_after_stop_s": round(exit_after, 1),
            "backlog": backlog.group(1) if backlog else "", "load": open("/proc/loadavg").read().split()[0]}


def _replay(pcap: str, iface: str, pps: float) -> None:
    """Child mode (inside the namespace): send the capture's frames out of ``iface`` at ``pps``."""
    import socket
    from capture import open_capture
    src = open_capture(pcap)
    frames = [rec[2] for rec in src]
    src.close()
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    send = sock.send
    start = time.monotonic()
    sent = 0
    burst = max(1, int(pps / 1000))
    for i in range(0, len(frames), burst):
        for f in frames[i:i + burst]:
            send(f)
        sent += len(frames[i:i + burst])
        ahead = sent / pps - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    took = time.monotonic() - start
    print(f"sent {sent} in {took:.2f} s ({sent / took:.0f} pps)", flush=True)


def expected_packets(pcap: Path) -> int:
    from capture import open_capture
    src = open_capture(pcap)
    n = sum(1 for _ in src)
    src.close()
    return n


def run_replay(tree: Path, pcap: Path, pps: float, work: Path, expected: int, tcpreplay: bool = False,
               loops: int = 1, metrics: bool = False) -> dict:
    from tests.brokers import in_netns
    ns = f"kd-bench-{os.getpid()}"
    out = work / f"replay-{pps}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        # A veth pair: frames sent out of kdb1 arrive on kdb0, where the IP stack drops them (127/8 on a
        # non-loopback device), so nothing answers and the capture sees exactly the recorded frames.
        subprocess.run(["ip", "-n", ns, "link", "add", "kdb0", "type", "veth", "peer", "kdb1"], check=True)
        for dev in ("kdb0", "kdb1"):
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        # In the namespace the metrics port is the namespace's: served on its loopback, scraped from there.
        extra = ["--metrics", "127.0.0.1:9464"] if metrics else []
        live = subprocess.Popen(in_netns(ns, [sys.executable, "-m", "kdissect", "live", "-i", "kdb0", "-o", str(out),
                                              *extra]),
                                cwd=tree, env=env, stderr=subprocess.PIPE, text=True)
        scraper = subprocess.Popen(in_netns(ns, [sys.executable, __file__, "--scrape", "127.0.0.1:9464"]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if metrics else None
        wait_packet_socket(live.pid)
        if tcpreplay:   # faster than Python's sendto; pps 0 = as fast as it goes
            rate = ["--topspeed"] if not pps else [f"--pps={int(pps)}"]
            rep = subprocess.run(in_netns(ns, ["tcpreplay", "-i", "kdb1", *rate, f"--loop={loops}", str(pcap)]),
                                 capture_output=True, text=True)
            rated = re.search(r"Rated: .*?([\d.]+) pps", rep.stdout)
            rep.stdout = f"tcpreplay: {rated.group(1) if rated else '?'} pps"
        else:
            rep = subprocess.run(in_netns(ns, [sys.executable, __file__, "--replay-child", str(pcap), "kdb1",
                                               str(pps)]),
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        stop = time.monotonic()
        # Frames the veth itself dropped (receive backlog full) never reach any capture.
        link = subprocess.run(in_netns(ns, ["cat", "/sys/class/net/kdb0/statistics/rx_dropped",
                                            "/sys/class/net/kdb1/statistics/tx_dropped"]),
                              capture_output=True, text=True).stdout.split()
        link = sum(int(x) for x in link)
        time.sleep(0.5)
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=900)
        exit_after = time.monotonic() - stop
        if scraper is not None:
            scraper.kill()
            scraper.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    import pyarrow.dataset as ds
    exchanges = ds.dataset(out / "exchanges", format="parquet").count_rows()
    packets = re.search(r"^live \S+: ([\d,]+) packets", err, re.M)
    captured = int(packets.group(1).replace(",", "")) if packets else -1
    kernel = re.findall(r"([\d,]+) packets dropped by the kernel|kernel dropped ([\d,]+)", err)
    drops = sum(int(g.replace(",", "")) for pair in kernel for g in pair if g)
    backlog = re.search(r"backlog +(.*)", err)
    shutil.rmtree(out, ignore_errors=True)
    # Looped replays repeat TCP sequence numbers (retransmissions to the decoder): judge by packets then.
    whole = exchanges == expected if loops == 1 else captured == loops * expected_packets(pcap)
    return {"pps": pps, "metrics": metrics, "loops": loops, "sent": rep.stdout.strip() or rep.stderr[-500:], "exchanges": exchanges,
            "expected": expected, "packets": captured, "drops": drops, "veth_rx_dropped": link, "zero_loss": whole and not drops,
            "exit_after_stop_s": round(exit_after, 1), "backlog": backlog.group(1) if backlog else "",
            "load": open("/proc/loadavg").read().split()[0]}


def _scrape_forever(target: str) -> None:
    """Child mode (inside the namespace): GET http://TARGET/metrics every second, as Prometheus would."""
    while True:
        try:
            urllib.request.urlopen(f"http://{target}/metrics", timeout=5).read()
        except OSError:
            pass
        time.sleep(1.0)


def _decode_once(pcap: Path, with_fold: bool) -> tuple[int, float]:
    """Decode ``pcap`` into a scratch dataset (with the metric fold or not): (exchanges, CPU seconds)."""
    from kdissect.dataset.writer import CaptureWriter
    from kdissect.run.collector import fewer_collections
    from kdissect.run.decode import run_into
    from kdissect.metrics.fold import MetricsFold
    from kdissect.run.source import DecodeOptions, open_capture_run
    options = DecodeOptions()
    out = Path(tempfile.mkdtemp(prefix="kdissect-fold-cost-"))
    for t in ("exchanges", "partitions", "anomalies"):
        (out / t).mkdir()
    run = open_capture_run(pcap, options, messages=False)
    fold = MetricsFold() if with_fold else None
    w = CaptureWriter(out, "bench", "bench", options.row_options(), run.pipeline.topics, metrics=fold)
    t0 = time.process_time()
    with fewer_collections():
        run_into(run, w)
    w.commit()
    took = time.process_time() - t0
    run.close()
    shutil.rmtree(out, ignore_errors=True)
    return w.counts.exchanges, took


def fold_instructions(pcap: Path) -> None:
    """Instructions (valgrind's callgrind, repeatable on a shared machine) of the decode without and with
    the fold; the difference per exchange, and as a share of the decode's own."""
    counts = {}
    for with_fold in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "callgrind.out"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                            "--fold-once", str(pcap), "on" if with_fold else "off"], check=True,
                           capture_output=True)
            summary = next(ln for ln in out.read_text().splitlines() if ln.startswith(("summary:", "totals:")))
            counts[with_fold] = int(summary.split()[1])
    exchanges = _decode_once(pcap, False)[0]
    extra = counts[True] - counts[False]
    print(f"== instructions: off {counts[False]:,}, on {counts[True]:,}: {extra / exchanges:,.0f} more per exchange "
          f"({exchanges:,} exchanges), {100 * extra / counts[False]:.1f} % of the decode (start-up included)",
          flush=True)


def fold_cost(pcap: Path, repeat: int) -> None:
    """Exchanges/s decoding ``pcap`` into a dataset without and with the metric fold, alternating."""
    best: dict[bool, float] = {}
    for i in range(repeat):
        for with_fold in (False, True):
            n, took = _decode_once(pcap, with_fold)
            rate = n / took
            best[with_fold] = max(best.get(with_fold, 0.0), rate)
            print(f"run {i + 1} fold={'on ' if with_fold else 'off'} {n} exchanges in {took:.2f} CPU-s: "
                  f"{rate:,.0f} exchanges/s (load {open('/proc/loadavg').read().split()[0]})", flush=True)
    print(f"== best of {repeat}: off {best[False]:,.0f}/s, on {best[True]:,.0f}/s: the fold costs "
          f"{100 * (1 - best[True] / best[False]):.1f} % of the decoding rate", flush=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--fold-once":
        _decode_once(Path(sys.argv[2]), sys.argv[3] == "on")
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--scrape":
        _scrape_forever(sys.argv[2])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--produce":
        _produce(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--replay-child":
        _replay(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="REV", help="also measure this git revision (e.g. e22e0cf~1)")
    ap.add_argument("--small", default="2000,5000,10000,20000", help="messages/s to try, ascending")
    ap.add_argument("--large", default="10,20,40,80", help="MB/s to try, ascending")
    ap.add_argument("--skip-after", action="store_true", help="measure only the baseline")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--catchup", type=float, metavar="RATE", help="small messages/s above the decoder's speed")
    ap.add_argument("--replay", metavar="PCAP", help="replay this capture instead of running clients")
    ap.add_argument("--pps", default="5000,10000,20000,40000", help="replay packet rates, ascending")
    ap.add_argument("--tcpreplay", action="store_true", help="replay with tcpreplay (installed) instead of Python")
    ap.add_argument("--loops", type=int, default=1, help="tcpreplay: send the capture this many times")
    ap.add_argument("--metrics", action="store_true",
                    help="each rate without and with --metrics (scraped every second), alternating")
    ap.add_argument("--fold-cost", metavar="CAPTURE", help="decoding with and without the metric fold, in-process")
    ap.add_argument("--repeat", type=int, default=3, help="--fold-cost: runs of each")
    ap.add_argument("--instructions", action="store_true",
                    help="--fold-cost: count instructions with valgrind (callgrind) instead of timing")
    a = ap.parse_args()
    if a.fold_cost:
        if a.instructions:
            fold_instructions(Path(a.fold_cost))
        else:
            fold_cost(Path(a.fold_cost), a.repeat)
        return 0
    if os.geteuid() != 0:
        print("bench_live: live capture needs root", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kdissect-bench-live-"))
    if a.replay:
        subprocess.run([sys.executable, "-m", "kdissect", "decode", a.replay, "-o", str(work / "ref"), "-q"],
                       check=True, cwd=ROOT)
        import pyarrow.dataset as ds
        expected = ds.dataset(work / "ref" / "exchanges", format="parquet").count_rows()
        versions = ([] if a.skip_after else [("after", None)]) + ([("before", a.baseline)] if a.baseline else [])
        try:
            if a.metrics:
                for pps in (float(r) for r in a.pps.split(",") if r):
                    for on in (False, True):
                        r = run_replay(ROOT, Path(a.replay).resolve(), pps, work, expected, a.tcpreplay, a.loops, on)
                        print(f"metrics {'on ' if on else 'off'}", r, flush=True)
                return 0
            for label, rev in versions:
                tree = _tree(rev, work)
                for pps in (float(r) for r in a.pps.split(",") if r):
                    r = run_replay(tree, Path(a.replay).resolve(), pps, work, expected, a.tcpreplay, a.loops)
                    print(label, r, flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    versions = ([] if a.skip_after else [("after", None)]) + ([("before", a.baseline)] if a.baseline else [])
    try:
        if a.metrics:
            for kind, rates in (("small", a.small), ("large", a.large)):
                best: dict[bool, float | None] = {False: None, True: None}
                failed: set[bool] = set()
                for rate in (float(r) for r in rates.split(",") if r):
                    for on in (False, True):
                        if on in failed:
                            continue
                        r = run_once(ROOT, kind, rate, a.seconds, work, metrics=on)
                        print(f"metrics {'on ' if on else 'off'}", r, flush=True)
                        if r["zero_loss"]:
                            best[on] = rate
                        else:
                            failed.add(on)
                    if len(failed) == 2:
                        break
                unit = "msg/s" if kind == "small" else "MB/s"
                print(f"== highest zero-loss {kind} rate tried: metrics off {best[False]} {unit}, "
                      f"on {best[True]} {unit}", flush=True)
            return 0
        for label, rev in versions:
            tree = _tree(rev, work)
            for kind, rates in (("small", a.small), ("large", a.large)):
                best = None
                for rate in (float(r) for r in rates.split(",") if r):
                    r = run_once(tree, kind, rate, a.seconds, work)
                    print(label, r, flush=True)
                    if not r["zero_loss"]:
                        break
                    best = rate
                unit = "msg/s" if kind == "small" else "MB/s"
                print(f"== {label}: highest zero-loss {kind} rate tried: {best} {unit}", flush=True)
        if a.catchup:
            r = run_once(ROOT, "small", a.catchup, a.seconds, work)
            print("catch-up", r, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
