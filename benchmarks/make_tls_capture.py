#!/usr/bin/env python3
"""A large TLS capture and the same traffic in plaintext, for benchmarks/bench_tls.py.

    sudo python benchmarks/make_tls_capture.py [--records 40000] [--out benchmarks/data]

The set-up of samples/record_tls.py (netns, tansu advertising a TLS forwarder,
kafka-python with ``keylog_filename``), with a bulk workload: several producer
connections send ``--records`` 1 KB records (no compression: the bytes on the
wire are what is measured), then a consumer fetches them all. Both hops are
captured: ``tls-bench.pcap`` (client <-> forwarder, TLS 1.3 AES-256-GCM),
``tls-bench.plain.pcap`` (forwarder <-> tansu: the same Kafka exchanges in
plaintext) and ``tls-bench.keys``.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "samples"))

import record_tls as rt  # noqa: E402
from tests.brokers import netns, tcpdump  # noqa: E402

PORT = 9093


def client(n: int, keylog: Path, workdir: Path, result: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    cert, key = rt.make_cert("ec", workdir)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(cert), str(key))
    bs = f"{rt.HOST}:{PORT}"
    value = os.urandom(512).hex().encode()            # 1 KB, incompressible enough
    sent = 0
    with rt.forwarder(PORT, rt.TANSU_PORT, server):
        for p_i in range(4):
            ctx = rt.client_context(cert, keylog, "1.3", None, False)
            p = KafkaProducer(bootstrap_servers=bs, client_id=f"bench-producer-{p_i}", security_protocol="SSL",
                              ssl_context=ctx, acks=1, linger_ms=5, batch_size=64 * 1024)
            for i in range(n // 4):
                p.send("bench", key=str(i).encode(), value=value)
            p.flush(120)
            p.close(timeout=30)
            sent += n // 4
        ctx = rt.client_context(cert, keylog, "1.3", None, False)
        c = KafkaConsumer("bench", bootstrap_servers=bs, client_id="bench-consumer", security_protocol="SSL",
                          ssl_context=ctx, auto_offset_reset="earliest", enable_auto_commit=False,
                          group_id="bench", **rt.record.GROUP_TIMEOUTS_PY)
        got, deadline = 0, time.monotonic() + 300
        while got < sent and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got += len(msgs)
        c.close()
        time.sleep(0.5)
    result.write_text(json.dumps({"sent": sent, "consumed": got}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=40000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "data"))
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--keylog", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        client(args.records, Path(args.keylog), Path(args.workdir), Path(args.result))
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns_name = "kd-tls-bench"
    with tempfile.TemporaryDirectory(prefix="kd-tls-bench-") as tmp_s, ExitStack() as stack:
        tmp = Path(tmp_s)
        ns = stack.enter_context(netns(ns_name))
        stack.enter_context(rt.netns_hosts(ns))
        stack.enter_context(rt.tansu_advertising(ns, f"tcp://{rt.HOST}:{PORT}", tmp / "tansu.log"))
        stack.enter_context(tcpdump(out / "tls-bench.pcap", ns=ns, bpf=("tcp", "port", str(PORT))))
        stack.enter_context(tcpdump(out / "tls-bench.plain.pcap", ns=ns, bpf=("tcp", "port", str(rt.TANSU_PORT))))
        keylog, result = tmp / "keys.txt", tmp / "result.json"
        rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable, __file__, "--client", "--records",
                              str(args.records), "--keylog", str(keylog), "--workdir", tmp_s, "--result",
                              str(result)], timeout=900)
        if rc != 0:
            sys.exit(f"client failed (rc={rc})")
        (out / "tls-bench.keys").write_text(keylog.read_text())
        print(result.read_text())
    for name in ("tls-bench.pcap", "tls-bench.plain.pcap"):
        print(f"{name}: {(out / name).stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
