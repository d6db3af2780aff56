#!/usr/bin/env python3
"""Record the TLS sample captures: real clients, real OpenSSL, keys logged by the clients.

    sudo python samples/record_tls.py [--out samples/tls] [--only NAME[,NAME]]

tansu 0.6 does not serve TLS, so per scenario, inside a fresh netns
``kd-<name>``: tansu listens in plaintext on 127.0.0.1:9092 and advertises
``broker.kafka.test:PORT``; the client child process starts a small asyncio +
``ssl`` forwarder on PORT (certificate generated with ``cryptography``), then
kafka-python and aiokafka produce (gzip, lz4) and consume in groups with
commits through it, with ``SSLContext.keylog_filename`` writing the NSS key
log. ``broker.kafka.test`` resolves through ``/etc/netns/<ns>/hosts`` (which
``ip netns exec`` mounts over /etc/hosts), so the clients send SNI.

Two captures per scenario: the client <-> forwarder hop (TLS, ``X.pcap`` with
``X.keys``) and the forwarder <-> tansu hop (the same exchanges in plaintext,
``X.plain.pcap``), plus ``X.expected.json`` from the clients' own reports.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import record  # noqa: E402  (the plaintext recorder: its client report helpers)
from tests.brokers import netns, record_scenarios, tansu_binary, tcpdump, wait_for_port  # noqa: E402

TANSU_PORT = 9092
HOST = "broker.kafka.test"
CLIENT_TIMEOUT = 300

# name -> forwarder port, certificate key type, per-client TLS settings, session reuse, pcapng with keys
SCENARIOS: dict[str, dict] = {
    "tls13": {"port": 9093, "cert": "ec", "tls": {"max": "1.3"}},
    # Python's ssl cannot pick TLS 1.3 suites; OpenSSL's config can (OPENSSL_CONF for the client process).
    "tls13-chacha": {"port": 9093, "cert": "ec", "tls": {"max": "1.3"}, "tls13_suites": "TLS_CHACHA20_POLY1305_SHA256"},
    "tls13-aes128": {"port": 9093, "cert": "rsa", "tls": {"max": "1.3"}, "tls13_suites": "TLS_AES_128_GCM_SHA256"},
    "tls12-gcm": {"port": 9093, "cert": "rsa",
                  "tls": {"max": "1.2", "kp": "ECDHE-RSA-AES128-GCM-SHA256", "aio": "ECDHE-RSA-AES256-GCM-SHA384"}},
    "tls12-chacha": {"port": 9093, "cert": "ec", "tls": {"max": "1.2", "kp": "ECDHE-ECDSA-CHACHA20-POLY1305",
                                                          "aio": "ECDHE-ECDSA-CHACHA20-POLY1305"}},
    # Python's server default excludes SHA-1 MACs; aiokafka's side also turns encrypt_then_mac off.
    "tls12-cbc": {"port": 9093, "cert": "rsa", "server_ciphers": "DEFAULT", "aio_no_etm": True,
                  "tls": {"max": "1.2", "kp": "ECDHE-RSA-AES128-SHA256", "aio": "ECDHE-RSA-AES256-SHA"}},
    "tls-resumed": {"port": 9093, "cert": "ec", "resume": True,
                    "tls": {"kp_max": "1.2", "aio_max": "1.3"}},
    "tls13-port19443": {"port": 19443, "cert": "ec", "tls": {"max": "1.3"}, "pcapng": True},
}


# --------------------------------------------------------------------------
# Certificate and forwarder (run inside the netns, in the client process)

def make_cert(kind: str, directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1()) if kind == "ec" else rsa.generate_private_key(65537, 2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - already gone
            pass


@contextmanager
def forwarder(port: int, upstream: int, ctx: ssl.SSLContext):
    """TLS on 127.0.0.1:port, each connection piped to a new plaintext connection to upstream."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict = {}

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
        await asyncio.gather(_pipe(r, uw), _pipe(ur, w))

    async def main() -> None:
        holder["server"] = await asyncio.start_server(handle, "127.0.0.1", port, ssl=ctx)
        ready.set()

    def run() -> None:
        loop.run_until_complete(main())
        loop.run_forever()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(10)
    try:
        yield
    finally:
        def stop() -> None:
            holder["server"].close()
            loop.stop()
        loop.call_soon_threadsafe(stop)
        t.join(5)


# --------------------------------------------------------------------------
# Client contexts

class ResumingContext(ssl.SSLContext):
    """Offers each new connection the latest resumable session of this context (what a resuming client does).

    kafka-python wraps sockets, aiokafka (asyncio) wraps BIOs: both paths are covered.
    """

    def _latest_session(self) -> ssl.SSLSession | None:
        for obj in reversed(self.__dict__.setdefault("_seen", [])):
            try:
                s = obj.session
            except (OSError, ValueError, AttributeError):
                continue
            if s is not None and (s.has_ticket or s.id):
                return s
        return self.__dict__.get("_closed_session")

    def _remember(self, obj):
        self.__dict__.setdefault("_seen", []).append(obj)
        return obj

    def wrap_socket(self, sock, *args, **kw):  # type: ignore[override]
        kw.setdefault("session", self._latest_session())
        s = super().wrap_socket(sock, *args, **kw)
        orig_close = s.close

        def close() -> None:
            try:
                if s.session is not None:
                    self.__dict__["_closed_session"] = s.session
            except (OSError, ValueError, AttributeError):
                pass
            orig_close()
        s.close = close  # type: ignore[method-assign]
        return self._remember(s)

    def wrap_bio(self, incoming, outgoing, *args, **kw):  # type: ignore[override]
        kw.setdefault("session", self._latest_session())
        return self._remember(super().wrap_bio(incoming, outgoing, *args, **kw))


def client_context(cafile: Path, keylog: Path, max_version: str, ciphers: str | None,
                   resume: bool) -> ssl.SSLContext:
    ctx = (ResumingContext if resume else ssl.SSLContext)(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(cafile))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3 if max_version == "1.3" else ssl.TLSVersion.TLSv1_2
    if ciphers:
        ctx.set_ciphers(ciphers)
    ctx.keylog_filename = str(keylog)
    return ctx


# --------------------------------------------------------------------------
# The clients (inside the netns)

def kp_produce(rep, cid: str, topic: str, records, ctx: ssl.SSLContext, extra: dict) -> dict:
    from kafka import KafkaProducer
    entry = rep.client(cid, record.lib_kp(), "producer", extra)
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, client_id=cid, security_protocol="SSL", ssl_context=ctx,
                      **extra)
    futs = [p.send(topic, key=k, value=v, headers=[(hk, hv) for hk, hv in h if hv is not None])
            for k, v, h in records]
    p.flush(30)
    for f in futs:
        try:
            md = f.get(timeout=30)
            record.note_delivery(entry, md.topic, md.partition, md.offset, None)
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            record.note_delivery(entry, topic, -1, None, record.err_name(e)[0])
    if not rep.brokers:
        rep.brokers.update(record.brokers_py(p._metadata.brokers()))
    p.close(timeout=10)
    return entry


def kp_consume(rep, cid: str, group: str, topics: list[str], expect: int, ctx: ssl.SSLContext) -> dict:
    from kafka import KafkaConsumer
    conf = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False,
            **record.GROUP_TIMEOUTS_PY}
    entry = rep.client(cid, record.lib_kp(), "consumer", conf)
    c = KafkaConsumer(*topics, bootstrap_servers=BOOTSTRAP, client_id=cid, security_protocol="SSL",
                      ssl_context=ctx, fetch_max_wait_ms=FETCH_MAX_WAIT_MS, **conf)
    got, deadline, linger_until = 0, time.monotonic() + 40, None
    while time.monotonic() < deadline:
        if got >= expect and linger_until is None:
            linger_until = time.monotonic() + 2.0
        if linger_until is not None and time.monotonic() > linger_until:
            break
        for _tp, msgs in c.poll(timeout_ms=200).items():
            for m in msgs:
                record.note_consumed(entry, m.topic, m.partition, m.offset)
                got += 1
    assignment = sorted(c.assignment())
    entry["assigned"] = {}
    for tp in assignment:
        entry["assigned"].setdefault(tp.topic, []).append(tp.partition)
    c.commit()
    entry["committed"] = {}
    for tp in assignment:
        off = c.committed(tp)
        if off is not None:
            record._tp(entry["committed"], tp.topic, tp.partition)["offset"] = off
    # As aio_consume: no new Fetch, and the one in flight answered (read by polling) before closing.
    c.pause(*assignment)
    until = time.monotonic() + 2 * FETCH_MAX_WAIT_MS / 1000 + 0.5
    while time.monotonic() < until:
        c.poll(timeout_ms=100)
    c.close()
    return entry


async def aio_produce(rep, cid: str, topic: str, records, ctx: ssl.SSLContext, extra: dict) -> dict:
    from aiokafka import AIOKafkaProducer
    entry = rep.client(cid, record.lib_aio(), "producer", extra)
    p = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, client_id=cid, security_protocol="SSL", ssl_context=ctx,
                         **extra)
    await p.start()
    try:
        futs = [await p.send(topic, value=v, key=k, headers=[(hk, hv) for hk, hv in h if hv is not None])
                for k, v, h in records]
        for f in futs:
            try:
                md = await f
                record.note_delivery(entry, md.topic, md.partition, md.offset, None)
            except Exception as e:  # noqa: BLE001
                record.note_delivery(entry, topic, -1, None, record.err_name(e)[0])
        if not rep.brokers:
            rep.brokers.update(record.brokers_py(p.client.cluster.brokers()))
    finally:
        await p.stop()
    return entry


async def aio_consume(rep, cid: str, group: str, topics: list[str], expect: int, ctx: ssl.SSLContext) -> dict:
    from aiokafka import AIOKafkaConsumer
    conf = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False,
            **record.GROUP_TIMEOUTS_PY}
    entry = rep.client(cid, record.lib_aio(), "consumer", conf)
    c = AIOKafkaConsumer(*topics, bootstrap_servers=BOOTSTRAP, client_id=cid, security_protocol="SSL",
                         ssl_context=ctx, fetch_max_wait_ms=FETCH_MAX_WAIT_MS, **conf)
    await c.start()
    try:
        got, deadline, linger_until = 0, time.monotonic() + 40, None
        while time.monotonic() < deadline:
            if got >= expect and linger_until is None:
                linger_until = time.monotonic() + 2.0
            if linger_until is not None and time.monotonic() > linger_until:
                break
            for _tp, msgs in (await c.getmany(timeout_ms=200)).items():
                for m in msgs:
                    record.note_consumed(entry, m.topic, m.partition, m.offset)
                    got += 1
        assignment = sorted(c.assignment())
        entry["assigned"] = {}
        for tp in assignment:
            entry["assigned"].setdefault(tp.topic, []).append(tp.partition)
        await c.commit()
        entry["committed"] = {}
        for tp in assignment:
            off = await c.committed(tp)
            if off is not None:
                record._tp(entry["committed"], tp.topic, tp.partition)["offset"] = off
        # A Fetch is always in flight (long-polling up to fetch_max_wait_ms): stop fetching and let its
        # answer come back before closing, so every request on the wire has its response.
        c.pause(*assignment)
        await asyncio.sleep(2 * FETCH_MAX_WAIT_MS / 1000 + 0.5)
    finally:
        await c.stop()
    return entry


BOOTSTRAP = ""
FETCH_MAX_WAIT_MS = 500              # both clients' default, named: the consumers wait out one before closing
OP_NO_ENCRYPT_THEN_MAC = 1 << 19     # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not named by Python's ssl)


def run_client(name: str, result: Path, keylog: Path, workdir: Path) -> None:
    global BOOTSTRAP
    sc = SCENARIOS[name]
    tls = sc["tls"]
    BOOTSTRAP = f"{HOST}:{sc['port']}"
    cert, key = make_cert(sc["cert"], workdir)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(cert), str(key))
    if sc.get("server_ciphers"):
        server.set_ciphers(sc["server_ciphers"])
    rep = record.Report()

    def ctx(who: str) -> ssl.SSLContext:
        return client_context(cert, keylog, tls.get(f"{who}_max", tls.get("max", "1.3")), tls.get(who),
                              bool(sc.get("resume")))

    with forwarder(sc["port"], TANSU_PORT, server):
        kp_ctx, aio_ctx = ctx("kp"), ctx("aio")
        if sc.get("aio_no_etm"):
            aio_ctx.options |= OP_NO_ENCRYPT_THEN_MAC
        tag = name.replace("-", "")
        a = kp_produce(rep, "kd-tls-kp-producer", f"{tag}-kp", record.make_records(6, f"{tag}kp"), kp_ctx,
                       {"acks": "all", "compression_type": "gzip", "linger_ms": 5})

        async def aio() -> None:
            b = await aio_produce(rep, "kd-tls-aio-producer", f"{tag}-aio", record.make_records(6, f"{tag}aio"),
                                  aio_ctx, {"acks": 1, "compression_type": "lz4", "linger_ms": 5})
            n = record._delivered_count(a) + record._delivered_count(b)
            await aio_consume(rep, "kd-tls-aio-consumer", "kd-tls-aio-group", [f"{tag}-kp", f"{tag}-aio"], n,
                              aio_ctx)
        asyncio.run(aio())
        n = sum(record._delivered_count(c) for c in rep.clients if c["role"] == "producer")
        kp_consume(rep, "kd-tls-kp-consumer", "kd-tls-kp-group", [f"{tag}-kp", f"{tag}-aio"], n, kp_ctx)
        time.sleep(0.5)      # let the forwarder pass the last close_notify on
    result.write_text(json.dumps(rep.to_json()))


# --------------------------------------------------------------------------
# Orchestration (root namespace)

OPENSSL_CONF = """openssl_conf = default_conf
[default_conf]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Ciphersuites = {suites}
"""


@contextmanager
def tansu_advertising(ns: str, advertised: str, log: Path):
    argv = [tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{TANSU_PORT}",
            "--advertised-listener-url", advertised, "--storage-engine", "memory://tansu/"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_for_port("127.0.0.1", TANSU_PORT, 15, ns)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def netns_hosts(ns: str):
    d = Path("/etc/netns") / ns
    d.mkdir(parents=True, exist_ok=True)
    (d / "hosts").write_text(f"127.0.0.1 localhost {HOST}\n")
    try:
        yield
    finally:
        shutil.rmtree(d, ignore_errors=True)


def record_one(name: str, out_dir: Path) -> None:
    sc = SCENARIOS[name]
    port = sc["port"]
    ns_name = f"kd-{name}"
    partial_tls, partial_plain = out_dir / f".{name}.pcap.partial", out_dir / f".{name}.plain.pcap.partial"
    with tempfile.TemporaryDirectory(prefix="kd-rec-tls-") as tmp_s, ExitStack() as stack:
        tmp = Path(tmp_s)
        ns = stack.enter_context(netns(ns_name))
        stack.enter_context(netns_hosts(ns))
        stack.enter_context(tansu_advertising(ns, f"tcp://{HOST}:{port}", tmp / "tansu.log"))
        stack.enter_context(tcpdump(partial_tls, ns=ns, bpf=("--immediate-mode", "tcp", "port", str(port))))
        stack.enter_context(tcpdump(partial_plain, ns=ns, bpf=("--immediate-mode", "tcp", "port", str(TANSU_PORT))))
        result, keylog, log = tmp / "result.json", tmp / "keys.txt", tmp / "client.log"
        t0 = time.monotonic()
        env = dict(os.environ)
        if sc.get("tls13_suites"):
            conf = tmp / "openssl.cnf"
            conf.write_text(OPENSSL_CONF.format(suites=sc["tls13_suites"]))
            env["OPENSSL_CONF"] = str(conf)
        with open(log, "wb") as lf:
            rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable, __file__, "--client", name,
                                  "--result", str(result), "--keylog", str(keylog), "--workdir", tmp_s],
                                 stdout=lf, stderr=subprocess.STDOUT, timeout=CLIENT_TIMEOUT, env=env)
        if rc != 0 or not result.exists():
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise RuntimeError(f"{name}: client process failed (rc={rc})")
        rep = json.loads(result.read_text())
        keys_text = keylog.read_text()
        elapsed = time.monotonic() - t0
    os.replace(partial_tls, out_dir / f"{name}.pcap")
    os.replace(partial_plain, out_dir / f"{name}.plain.pcap")
    (out_dir / f"{name}.keys").write_text(keys_text)
    if sc.get("pcapng"):
        subprocess.run(["editcap", "--inject-secrets", f"tls,{out_dir / f'{name}.keys'}",
                        str(out_dir / f"{name}.pcap"), str(out_dir / f"{name}.pcapng")], check=True)
    expected = {
        "sample": name,
        "pcap": f"{name}.pcap",
        "plain_pcap": f"{name}.plain.pcap",
        "keylog": f"{name}.keys",
        "broker": {"kind": "tansu behind a TLS forwarder", "brokers": rep["brokers"], "tls_port": port,
                   "tansu_port": TANSU_PORT, "tansu_version": record.tansu_version(), "certificate": sc["cert"]},
        "tls": sc["tls"] | {"tls13_suites": sc.get("tls13_suites"), "resume": bool(sc.get("resume")), "aio_no_etm": bool(sc.get("aio_no_etm"))},
        "openssl": ssl.OPENSSL_VERSION,
        "client_ids": sorted({c["client_id"] for c in rep["clients"]}),
        "delivered_totals": record.totals(rep["clients"]),
        "clients": rep["clients"],
    }
    (out_dir / f"{name}.expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    n_keys = sum(1 for line in keys_text.splitlines() if line and not line.startswith("#"))
    print(f"{name}: {(out_dir / f'{name}.pcap').stat().st_size} bytes, {n_keys} key lines, "
          f"clients {elapsed:.1f}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "tls"))
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--keylog", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        run_client(args.client, Path(args.result), Path(args.keylog), Path(args.workdir))
        return
    if args.list:
        print("\n".join(SCENARIOS))
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    out_dir = Path(args.out)
    record_scenarios(SCENARIOS, args.only, lambda name: record_one(name, out_dir))


if __name__ == "__main__":
    main()
