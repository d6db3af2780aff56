#!/usr/bin/env python3
"""Record the findings samples: real clients misconfigured on purpose, and one configured well.

    sudo python samples/record_findings.py [--out samples/findings] [--only NAME[,NAME]]

Same method as ``samples/record.py`` (whose client-report helpers this reuses):
a fresh netns per scenario, tansu inside it, tcpdump on its loopback limited to
the port the clients talk to, the clients in a child process inside the netns.
Each ``<name>.expected.json`` holds what the clients reported, the settings
that were wrong on purpose, and the finding the sample must trigger.

Some scenarios put a small frame-aware forwarding proxy (``KafkaProxy``) between
the clients and tansu: tansu listens on 9093 but advertises the proxy's 9092,
and only 9092 is captured, so the capture shows what a client of a real
broker would see. The proxy drops answers to acks=0 Produce requests (tansu
answers them; Apache Kafka never does) or withholds the first Produce answer
(the request was written; the client times out, reconnects and sends it again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import record  # noqa: E402 - samples/record.py: the client-report helpers
from record import Report, ck_error_cb, lib_aio, lib_ck, note_consumed, note_delivery  # noqa: E402

from tests.brokers import netns, record_scenarios, run_tansu, tcpdump  # noqa: E402

CLIENT_PORT = 9092    # what the clients connect to (tansu, or the proxy in front of it); the only port captured
UPSTREAM_PORT = 9093  # tansu's own port when a proxy sits in front
CLIENT_TIMEOUT = 180
GROUP_CK = {"session.timeout.ms": 6000, "max.poll.interval.ms": 8000, "heartbeat.interval.ms": 1000}


# --------------------------------------------------------------------------
# The forwarding proxy (runs inside the netns, in the client process)

def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def produce_acks(frame: bytes) -> int | None:
    """``acks`` of a Produce request frame (without its length prefix); None for other apis."""
    api_key, version = struct.unpack_from(">hh", frame, 0)
    if api_key != 0 or version < 3:  # v0-2 start with acks too, but these clients send v3+
        return None
    (n,) = struct.unpack_from(">h", frame, 8)
    pos = 10 + max(n, 0)                     # client_id
    flexible = version >= 9
    if flexible:                             # request header v2: tagged fields
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
        n, pos = _uvarint(frame, pos)        # compact nullable transactional_id
        pos += max(n - 1, 0)
    else:
        (n,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(n, 0)
    (acks,) = struct.unpack_from(">h", frame, pos)
    return acks


class KafkaProxy:
    """Forwards whole Kafka frames between clients and one broker, dropping chosen responses.

    ``policy`` is ``"drop_acks0"`` (never forward the answer to an acks=0 Produce)
    or ``"withhold_first_produce"`` (never forward the first Produce answer).
    ``dropped`` lists what was held back, for the expected.json.
    """

    def __init__(self, listen_port: int, upstream_port: int, policy: str) -> None:
        self.listen_port, self.upstream_port, self.policy = listen_port, upstream_port, policy
        self.dropped: list[dict] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._withheld_one = False
        self._sock = socket.create_server(("127.0.0.1", listen_port))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self.connections += 1
                conn_no = self.connections
            pending: dict[int, bool] = {}  # correlation id -> drop its response
            threading.Thread(target=self._pump, args=(client, upstream, pending, conn_no, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pending, conn_no, False), daemon=True).start()

    def _decide(self, frame: bytes) -> tuple[int, bool]:
        (corr,) = struct.unpack_from(">i", frame, 4)
        acks = produce_acks(frame)
        if acks is None:
            return corr, False
        if self.policy == "drop_acks0":
            return corr, acks == 0
        with self._lock:
            if self.policy == "withhold_first_produce" and not self._withheld_one:
                self._withheld_one = True
                return corr, True
        return corr, False

    def _pump(self, src: socket.socket, dst: socket.socket, pending: dict[int, bool],
              conn_no: int, requests: bool) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    if requests:
                        corr, drop = self._decide(frame)
                        pending[corr] = drop
                    else:
                        (corr,) = struct.unpack_from(">i", frame, 0)
                        if pending.pop(corr, False):
                            with self._lock:
                                self.dropped.append({"connection": conn_no, "correlation_id": corr})
                            continue
                    dst.sendall(struct.pack(">i", size) + frame)
        except OSError:
            pass
        finally:
            # One side closed: close both, as a broker or client would see it.
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


# --------------------------------------------------------------------------
# Client building blocks

def text_records(n: int, tag: str, size: int = 400) -> list[tuple[bytes, bytes]]:
    """Compressible JSON values (what an uncompressed producer wastes bandwidth on)."""
    pad = "kafka-dissect findings sample " * (size // 30 + 1)
    return [(f"{tag}-{i % 7}".encode(), json.dumps({"tag": tag, "seq": i, "text": pad[:size]}).encode())
            for i in range(n)]


def ck_delivery(entry: dict) -> Callable:
    def cb(err, msg) -> None:
        if err is not None:
            note_delivery(entry, msg.topic(), msg.partition(), None, err.name())
        else:
            note_delivery(entry, msg.topic(), msg.partition(), msg.offset(), None)
    return cb


def ck_producer(rep: Report, bs: str, cid: str, conf: dict, role: str = "producer"):
    from confluent_kafka import Producer
    entry = rep.client(cid, lib_ck(), role, conf)
    return Producer({"bootstrap.servers": bs, "client.id": cid, "error_cb": ck_error_cb(entry), **conf}), entry


def ck_paced(rep: Report, bs: str, cid: str, topic: str, records, conf: dict, gap: float,
             partition: int | None = None) -> dict:
    """Produce one record every ``gap`` seconds (an application sending as events arrive)."""
    p, entry = ck_producer(rep, bs, cid, conf)
    cb = ck_delivery(entry)
    kw = {} if partition is None else {"partition": partition}
    for key, value in records:
        p.produce(topic, value, key, on_delivery=cb, **kw)
        p.poll(0)
        if gap:
            time.sleep(gap)
    left = p.flush(30)
    if left:
        entry["undelivered_at_exit"] = left
    if not rep.brokers:
        md = p.list_topics(timeout=10)
        rep.brokers.update({str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()})
    return entry


def ck_read_back(rep: Report, bs: str, cid: str, topic: str, partitions: list[int], expect: int,
                 conf: dict | None = None, timeout: float = 15, idle: float = 0.0) -> dict:
    """assign() from offset 0 (no group), read ``expect`` records, then poll ``idle`` more seconds."""
    from confluent_kafka import Consumer, TopicPartition
    conf = {"group.id": f"{cid}-unused", "enable.auto.commit": False, **(conf or {})}
    entry = rep.client(cid, lib_ck(), "consumer", conf)
    c = Consumer({"bootstrap.servers": bs, "client.id": cid, "error_cb": ck_error_cb(entry), **conf})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got, deadline, until = 0, time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if got >= expect and until is None:
            until = time.monotonic() + idle
        if until is not None and time.monotonic() >= until:
            break
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        note_consumed(entry, m.topic(), m.partition(), m.offset())
        got += 1
    c.close()
    return entry


def partitions_of(entry: dict, topic: str) -> list[int]:
    return sorted(int(p) for p in entry.get("delivered", {}).get(topic, {}))


def delivered(entry: dict) -> int:
    return sum(s["count"] for parts in entry.get("delivered", {}).values() for s in parts.values())


# --------------------------------------------------------------------------
# Scenarios (inside the netns). Each returns {finding: subject} it must trigger.

def sc_tiny_batches(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    # linger.ms 0 and an application producing every few ms: each record leaves alone.
    conf = {"linger.ms": 0, "compression.type": "none", "acks": "all"}
    ck_paced(rep, bs, "kd-find-linger0", "find-tiny", text_records(160, "tiny", 300), conf, gap=0.004)
    return [{"finding": "producer.tiny_batches", "subject_kind": "client", "subject": "kd-find-linger0"},
            {"finding": "producer.uncompressed", "subject_kind": "topic", "subject": "find-tiny"}]


def sc_acks0(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    conf = {"acks": 0, "linger.ms": 5}
    ck_paced(rep, bs, "kd-find-acks0", "find-acks0", text_records(20, "acks0", 100), conf, gap=0.02)
    return [{"finding": "producer.acks", "subject_kind": "client", "subject": "kd-find-acks0"}]


def kp_paced(rep: Report, bs: str, cid: str, topic: str, records, conf: dict, partition: int | None = None) -> dict:
    from kafka import KafkaProducer
    entry = rep.client(cid, record.lib_kp(), "producer", conf)
    p = KafkaProducer(bootstrap_servers=bs, client_id=cid, **conf)
    futs = [p.send(topic, key=k, value=v, partition=partition) for k, v in records]
    p.flush(60)
    for f in futs:
        try:
            md = f.get(timeout=30)
            note_delivery(entry, md.topic, md.partition, md.offset, None)
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            note_delivery(entry, topic, -1 if partition is None else partition, None, type(e).__name__)
    p.close(timeout=10)
    return entry


def sc_duplicates(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    # The proxy withholds the first Produce answer: the broker wrote the batch, the
    # client times out, reconnects and, with idempotence off, writes it again.
    # kafka-python, because librdkafka 2.16 let the messages time out instead of retrying.
    conf = {"enable_idempotence": False, "acks": "all", "linger_ms": 50, "retries": 3,
            "request_timeout_ms": 2000, "retry_backoff_ms": 200}
    prod = kp_paced(rep, bs, "kd-find-dup-producer", "find-dup", text_records(8, "dup", 100), conf, partition=0)
    # Read the partition back: the consumer sees each record twice.
    ck_read_back(rep, bs, "kd-find-dup-reader", "find-dup", [0], 2 * delivered(prod), timeout=10, idle=0.5)
    return [{"finding": "producer.duplicates", "subject_kind": "topic_partition", "subject": "find-dup-0"},
            {"finding": "producer.not_idempotent", "subject_kind": "client", "subject": "kd-find-dup-producer"}]


def sc_commit_per_message(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    from confluent_kafka import Consumer
    prod = ck_paced(rep, bs, "kd-find-cpm-producer", "find-cpm", text_records(40, "cpm", 100),
                    {"linger.ms": 10, "compression.type": "lz4", "acks": "all"}, gap=0, partition=0)
    conf = {"group.id": "kd-find-cpm", "auto.offset.reset": "earliest", "enable.auto.commit": False, **GROUP_CK}
    entry = rep.client("kd-find-cpm-consumer", lib_ck(), "consumer",
                       {**conf, "commit": "synchronous commit(message) after every message"})
    c = Consumer({"bootstrap.servers": bs, "client.id": "kd-find-cpm-consumer", "error_cb": ck_error_cb(entry), **conf})
    c.subscribe(["find-cpm"])
    got, deadline, commits = 0, time.monotonic() + 40, 0
    while got < delivered(prod) and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        note_consumed(entry, m.topic(), m.partition(), m.offset())
        got += 1
        c.commit(message=m, asynchronous=False)
        commits += 1
    entry["commits"] = commits
    c.close()
    return [{"finding": "consumer.commit_per_message", "subject_kind": "group_partition",
             "subject": "kd-find-cpm find-cpm-0"}]


def sc_busy_polling(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    prod = ck_paced(rep, bs, "kd-find-poll-producer", "find-poll", text_records(5, "poll", 100),
                    {"linger.ms": 5, "acks": "all"}, gap=0, partition=0)
    # fetch.wait.max.ms 1: the broker may answer an empty Fetch at once, so the consumer spins.
    ck_read_back(rep, bs, "kd-find-busy-consumer", "find-poll", [0], delivered(prod),
                 {"fetch.wait.max.ms": 1}, idle=0.4)
    return [{"finding": "consumer.busy_polling", "subject_kind": "client", "subject": "kd-find-busy-consumer"}]


def sc_session_timeout(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    """Two members; the aiokafka one blocks its event loop past session.timeout.ms (no heartbeats)."""
    from confluent_kafka import Consumer
    prod = ck_paced(rep, bs, "kd-find-st-producer", "find-st", text_records(8, "st", 100),
                    {"linger.ms": 5, "acks": "all"}, gap=0)
    group = "kd-find-st"
    stall = 10.0
    stop = threading.Event()
    errors: list[str] = []

    def stalled_member() -> None:
        from aiokafka import AIOKafkaConsumer
        conf = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False,
                "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "max_poll_interval_ms": 8000}
        entry = rep.client("kd-find-stalled", lib_aio(), "consumer",
                           {**conf, "stall": f"event loop blocked {stall:.0f} s after the first records"})

        async def main() -> None:
            c = AIOKafkaConsumer("find-st", bootstrap_servers=bs, client_id="kd-find-stalled", **conf)
            await c.start()
            try:
                t_end = time.monotonic() + 30
                while not entry.get("consumed") and time.monotonic() < t_end:
                    for _tp, msgs in (await c.getmany(timeout_ms=200)).items():
                        for m in msgs:
                            note_consumed(entry, m.topic, m.partition, m.offset)
                entry["stalled_at"] = time.time()
                time.sleep(stall)  # blocks the loop: no heartbeat task runs  # noqa: ASYNC251
                entry["resumed_at"] = time.time()
                t_end = time.monotonic() + 15
                while time.monotonic() < t_end and not stop.is_set():
                    try:
                        await c.getmany(timeout_ms=200)
                    except Exception as e:  # noqa: BLE001 - what the client reported
                        entry.setdefault("consume_errors", []).append(type(e).__name__)
            finally:
                await c.stop()
        try:
            asyncio.run(main())
        except Exception as e:  # noqa: BLE001
            errors.append(f"stalled member: {e!r}")

    def healthy_member() -> None:
        # roundrobin: the only assignor aiokafka offers by default, so both members agree.
        conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "partition.assignment.strategy": "roundrobin", **GROUP_CK}
        entry = rep.client("kd-find-healthy", lib_ck(), "consumer", conf)
        assigned: list[list[str]] = []
        c = Consumer({"bootstrap.servers": bs, "client.id": "kd-find-healthy", "error_cb": ck_error_cb(entry), **conf})
        c.subscribe(["find-st"], on_assign=lambda _c, ps: assigned.append([f"{p.topic}-{p.partition}" for p in ps]))
        t_end = time.monotonic() + 40
        while time.monotonic() < t_end and not stop.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                note_consumed(entry, m.topic(), m.partition(), m.offset())
        entry["assignments"] = assigned
        c.close()

    a = threading.Thread(target=stalled_member)
    b = threading.Thread(target=healthy_member)
    b.start()
    time.sleep(0.5)
    a.start()
    a.join()
    stop.set()
    b.join()
    rep.notes.extend(errors)
    _ = prod
    return [{"finding": "group.session_timeout", "subject_kind": "group", "subject": group}]


def sc_member_vanished(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    """Two members of ``kd-find-gone``, each its own process; B is SIGKILLed (no LeaveGroup) and never
    comes back: the coordinator evicts it when its session times out and A gets every partition."""
    topic, group = "find-gone", "kd-find-gone"
    prod, pentry = ck_producer(rep, bs, "kd-find-gone-producer", {"acks": "all", "linger.ms": 5})
    cb = ck_delivery(pentry)
    records = text_records(60, "gone", 100)
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for key, value in records[sent:sent + n]:
            prod.produce(topic, value, key, on_delivery=cb)
            prod.poll(0)
        sent += n

    send(8)
    prod.flush(30)
    md = prod.list_topics(topic, timeout=10)
    rep.brokers.update({str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()})
    partitions = sorted(f"{topic}-{p}" for p in md.topics[topic].partitions)
    stop = threading.Event()

    def trickle() -> None:  # records keep coming, so the partitions B held wait unconsumed meanwhile
        while not stop.wait(0.5) and sent < len(records):
            send(1)

    feeder = threading.Thread(target=trickle)
    feeder.start()
    with tempfile.TemporaryDirectory(prefix="kd-gone-") as tmp:
        script = record.GroupScript(bs, group, topic, partitions, Path(tmp))
        try:
            a = script.join("kd-find-gone-a")
            b = script.join("kd-find-gone-b")
            killed_at = record.utc_now()
            script.kill(b)
            time.sleep(3)  # A goes on alone for a few heartbeats
            stop.set()
            feeder.join()
            script.last_leaves(a)
        finally:
            stop.set()
            feeder.join()
            left = prod.flush(30)
            if left:
                pentry["undelivered_at_exit"] = left
            script.stop_all()
        for m in script.members:
            record._member_entry(rep, m)  # noqa: SLF001 - the recorder's own helper
    rep.groups = {group: {**script.summary("tansu"), "killed": {"member": b.cid, "at": killed_at}}}
    return [{"finding": "group.member_vanished", "subject_kind": "group", "subject": group}]


def sc_metadata_storm(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    conf = {"topic.metadata.refresh.interval.ms": 10, "linger.ms": 5, "acks": "all"}
    ck_paced(rep, bs, "kd-find-metadata", "find-md", text_records(10, "md", 100), conf, gap=0.1)
    return [{"finding": "client.metadata_storm", "subject_kind": "client", "subject": "kd-find-metadata"}]


def sc_reconnect_loop(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    # A new producer per message: every send pays a connection, ApiVersions and Metadata.
    entry = rep.client("kd-find-churn", lib_ck(), "producer", {"pattern": "new Producer per message, 15 messages"})
    from confluent_kafka import Producer
    cb = ck_delivery(entry)
    for key, value in text_records(15, "churn", 100):
        p = Producer({"bootstrap.servers": bs, "client.id": "kd-find-churn", "linger.ms": 0,
                      "error_cb": ck_error_cb(entry)})
        p.produce("find-churn", value, key, on_delivery=cb)
        p.flush(10)
        del p
        time.sleep(0.1)
    return [{"finding": "client.connection_churn", "subject_kind": "client", "subject": "kd-find-churn"}]


def sc_good(rep: Report, bs: str, proxy: KafkaProxy | None) -> list[dict]:
    from confluent_kafka import Consumer
    conf = {"linger.ms": 20, "compression.type": "lz4", "acks": "all", "enable.idempotence": True}
    prod = ck_paced(rep, bs, "kd-find-good-producer", "find-good", text_records(300, "good", 300), conf, gap=0.002)
    cconf = {"group.id": "kd-find-good", "auto.offset.reset": "earliest", "enable.auto.commit": True,
             "auto.commit.interval.ms": 1000, **GROUP_CK}
    entry = rep.client("kd-find-good-consumer", lib_ck(), "consumer", cconf)
    c = Consumer({"bootstrap.servers": bs, "client.id": "kd-find-good-consumer", "error_cb": ck_error_cb(entry),
                  **cconf})
    c.subscribe(["find-good"])
    got, deadline, until = 0, time.monotonic() + 40, None
    while time.monotonic() < deadline:
        if got >= delivered(prod) and until is None:
            until = time.monotonic() + 2.0
        if until is not None and time.monotonic() >= until:
            break
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        note_consumed(entry, m.topic(), m.partition(), m.offset())
        got += 1
    c.close()
    return []


# name -> (proxy policy or None, scenario)
SCENARIOS: dict[str, tuple[str | None, Callable]] = {
    "findings-tiny-batches": (None, sc_tiny_batches),
    "findings-acks0": ("drop_acks0", sc_acks0),
    "findings-duplicates": ("withhold_first_produce", sc_duplicates),
    "findings-commit-per-message": (None, sc_commit_per_message),
    "findings-busy-polling": (None, sc_busy_polling),
    "findings-session-timeout": (None, sc_session_timeout),
    "findings-member-vanished": (None, sc_member_vanished),
    "findings-metadata-storm": (None, sc_metadata_storm),
    "findings-reconnect-loop": (None, sc_reconnect_loop),
    "findings-good": (None, sc_good),
}

IMMEDIATE = {"findings-member-vanished"}


# --------------------------------------------------------------------------
# Orchestration

def run_client(name: str, bootstrap: str, result: str) -> None:
    policy, scenario = SCENARIOS[name]
    proxy = KafkaProxy(CLIENT_PORT, UPSTREAM_PORT, policy) if policy else None
    rep = Report()
    expect = scenario(rep, bootstrap, proxy)
    out = rep.to_json()
    out["expect"] = expect
    if proxy is not None:
        time.sleep(0.3)
        out["proxy"] = {"policy": policy, "dropped_responses": proxy.dropped, "connections": proxy.connections}
        proxy.close()
    Path(result).write_text(json.dumps(out))


def record_one(name: str, out_dir: Path) -> dict:
    policy, _ = SCENARIOS[name]
    pcap = out_dir / f"{name}.pcap"
    partial = out_dir / f".{name}.pcap.partial"
    try:
        with tempfile.TemporaryDirectory(prefix="kd-recf-") as tmp, ExitStack() as stack:
            ns = stack.enter_context(netns(f"kd-{name}"))
            tansu_port = UPSTREAM_PORT if policy else CLIENT_PORT
            stack.enter_context(run_tansu(tansu_port, ns=ns, log=Path(tmp) / "tansu.log",
                                          advertised_port=CLIENT_PORT))
            # Slow group traffic is captured in immediate mode: each packet reaches the file as it happens.
            stack.enter_context(tcpdump(partial, ns=ns, bpf=["tcp", "port", str(CLIENT_PORT)],
                                        immediate=name in IMMEDIATE))
            result, log = Path(tmp) / "result.json", Path(tmp) / "client.log"
            t0 = time.monotonic()
            with open(log, "wb") as lf:
                rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable, __file__, "--client", name,
                                      "--bootstrap", f"127.0.0.1:{CLIENT_PORT}", "--result", str(result)],
                                     stdout=lf, stderr=subprocess.STDOUT, timeout=CLIENT_TIMEOUT)
            elapsed = time.monotonic() - t0
            if rc != 0 or not result.exists():
                sys.stderr.write(log.read_text(errors="replace")[-4000:])
                raise RuntimeError(f"{name}: client process failed (rc={rc})")
            rep = json.loads(result.read_text())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, pcap)
    libs: dict[str, str] = {}
    for c in rep["clients"]:
        libs[c["library"]] = c["library_version"]
        if "librdkafka_version" in c:
            libs["librdkafka"] = c["librdkafka_version"]
    broker = {"kind": "tansu", "brokers": rep["brokers"], "ports": [CLIENT_PORT],
              "tansu_version": record.tansu_version(), "tansu_port": CLIENT_PORT if not policy else UPSTREAM_PORT}
    expected = {
        "sample": name,
        "pcap": pcap.name,
        "broker": broker,
        "libraries": libs,
        "client_ids": sorted({c["client_id"] for c in rep["clients"]}),
        "delivered_totals": record.totals(rep["clients"]),
        "clients": rep["clients"],
        "expect_findings": rep["expect"],
        "proxy": rep.get("proxy"),
        **({"groups": rep["groups"]} if rep.get("groups") else {}),
        "notes": rep["notes"],
    }
    (out_dir / f"{name}.expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"{name}: {pcap.stat().st_size} bytes, clients {elapsed:.1f}s; {record.check_capture(pcap, [CLIENT_PORT])}")
    return expected


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "findings"))
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        run_client(args.client, args.bootstrap, args.result)
        return
    if args.list:
        print("\n".join(SCENARIOS))
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    record_scenarios(SCENARIOS, args.only, lambda name: record_one(name, out_dir))


if __name__ == "__main__":
    main()
