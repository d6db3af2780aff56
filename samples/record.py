#!/usr/bin/env python3
"""Record the committed sample captures: real clients talking to real brokers.

    sudo python samples/record.py [--out samples] [--only NAME[,NAME]] [--summary]

Per scenario: fresh netns ``kd-<name>`` (lo MTU 1500, GSO off), broker inside
it, tcpdump on its lo, then the clients run in a child process of this script
inside the netns (``--client NAME``). The child writes what the clients
themselves reported (delivery reports, consumed offsets, admin errors) and
that becomes ``<name>.expected.json``; nothing in it comes from the capture.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.brokers import netns, record_scenarios, run_tansu, tansu_binary, tcpdump

TANSU_PORT = 9092  # each netns is empty, so a fixed port is free and tshark decodes it by default
CLIENT_TIMEOUT = 420  # group-rebalance waits out session timeouts on two brokers

# Short group timeouts: tansu holds JoinGroup for the whole rebalance timeout
# (max.poll.interval.ms, 300 s by default) before answering.
GROUP_TIMEOUTS_CK = {"session.timeout.ms": 6000, "max.poll.interval.ms": 8000, "heartbeat.interval.ms": 1000}
GROUP_TIMEOUTS_PY = {"session_timeout_ms": 6000, "max_poll_interval_ms": 8000, "heartbeat_interval_ms": 1000}


# --------------------------------------------------------------------------
# What the clients report

def lib_ck() -> dict:
    import confluent_kafka
    v = confluent_kafka.version()  # a str in 2.16, a (str, int) tuple in older releases
    return {"library": "confluent-kafka", "library_version": v[0] if isinstance(v, tuple) else v,
            "librdkafka_version": confluent_kafka.libversion()[0]}


def lib_kp() -> dict:
    import kafka
    return {"library": "kafka-python", "library_version": kafka.__version__}


def lib_aio() -> dict:
    import aiokafka
    return {"library": "aiokafka", "library_version": aiokafka.__version__}


class Report:
    """Accumulates per-client facts; thread-safe enough (one dict per client)."""

    def __init__(self) -> None:
        self.clients: list[dict] = []
        self.brokers: dict[str, str] = {}
        self.notes: list[str] = []
        self.groups: dict[str, dict] = {}  # per consumer group: what its members saw (rebalance scenario)
        self._lock = threading.Lock()

    def client(self, client_id: str, lib: dict, role: str, config: dict | None = None) -> dict:
        entry = {"client_id": client_id, **lib, "role": role, "config": dict(config or {})}
        with self._lock:
            self.clients.append(entry)
        return entry

    def to_json(self) -> dict:
        out = {"brokers": self.brokers, "clients": self.clients, "notes": self.notes}
        if self.groups:
            out["groups"] = self.groups
        return out


def _tp(tree: dict, topic: str, partition: int) -> dict:
    return tree.setdefault(topic, {}).setdefault(str(partition), {})


def note_delivery(entry: dict, topic: str, partition: int, offset: int | None, error: str | None) -> None:
    if error:
        s = _tp(entry.setdefault("delivery_errors", {}), topic, partition)
        s["count"] = s.get("count", 0) + 1
        errs = s.setdefault("errors", {})
        errs[error] = errs.get(error, 0) + 1
        return
    s = _tp(entry.setdefault("delivered", {}), topic, partition)
    s.setdefault("min_offset", None)
    s.setdefault("max_offset", None)
    s["count"] = s.get("count", 0) + 1
    if offset is not None and offset >= 0:  # acks=0: the client never learns an offset
        s["min_offset"] = offset if s["min_offset"] is None else min(s["min_offset"], offset)
        s["max_offset"] = offset if s["max_offset"] is None else max(s["max_offset"], offset)


def note_consumed(entry: dict, topic: str, partition: int, offset: int) -> None:
    s = _tp(entry.setdefault("consumed", {}), topic, partition)
    s["count"] = s.get("count", 0) + 1
    s.setdefault("offsets", []).append(offset)


def ck_error_cb(entry: dict):
    # Informational (e.g. _TRANSPORT on idle disconnects); not stable enough to assert.
    def cb(err) -> None:
        errs = entry.setdefault("client_errors", [])
        if err.name() not in errs:
            errs.append(err.name())
    return cb


def err_name(exc: BaseException) -> tuple[str, int | None]:
    """(name, code) for confluent KafkaException / kafka-python / aiokafka errors."""
    arg = exc.args[0] if exc.args else None
    if hasattr(arg, "name") and hasattr(arg, "code"):
        return arg.name(), arg.code()
    return type(exc).__name__, getattr(exc, "errno", None)


def make_records(n: int, tag: str, seed: int = 1) -> list[tuple[bytes | None, bytes, list]]:
    """Small, deterministic records with keys and headers.

    Every 5th record has a null key, one record carries a null header value,
    and the middle one is a 3 KB incompressible value so the request spans
    several 1500-byte segments even when compressed.
    """
    rnd = random.Random(f"{tag}/{seed}")
    out = []
    for i in range(n):
        key = None if i % 5 == 4 else f"{tag}-key-{i % 3}".encode()
        if i == n // 2:
            value = rnd.randbytes(3000)
        else:
            value = json.dumps({"tag": tag, "seq": i, "text": "kafka-dissect sample " * 3}).encode()
        headers = [("seq", str(i).encode()), ("source", b"kafka-dissect")]
        if i == 1:
            headers.append(("null-header", None))
        out.append((key, value, headers))
    return out


def _ck_delivery(entry: dict):
    def cb(err, msg) -> None:
        if err is not None:
            note_delivery(entry, msg.topic(), msg.partition(), None, err.name())
        else:
            note_delivery(entry, msg.topic(), msg.partition(), msg.offset(), None)
    return cb


def _delivered_count(entry: dict, topic: str | None = None) -> int:
    return sum(s["count"] for t, parts in entry.get("delivered", {}).items()
               if topic in (None, t) for s in parts.values())


# --------------------------------------------------------------------------
# confluent-kafka building blocks

def ck_producer(rep: Report, bs: str, cid: str, extra: dict, role: str = "producer"):
    from confluent_kafka import Producer
    entry = rep.client(cid, lib_ck(), role, extra)
    conf = {"bootstrap.servers": bs, "client.id": cid, "error_cb": ck_error_cb(entry), **extra}
    return Producer(conf), entry


def ck_produce(rep: Report, bs: str, cid: str, topic: str, records, extra: dict,
               partition: int | None = None, flush_timeout: float = 30) -> dict:
    p, entry = ck_producer(rep, bs, cid, extra)
    cb = _ck_delivery(entry)
    for key, value, headers in records:
        kw = {"partition": partition} if partition is not None else {}
        p.produce(topic, value, key, headers=headers, on_delivery=cb, **kw)
        p.poll(0)
    left = p.flush(flush_timeout)
    if left:
        entry["undelivered_at_exit"] = left
    if not rep.brokers:
        try:
            rep.brokers.update(brokers_of(p))
        except Exception:  # noqa: BLE001, S110 - legacy clients may not get Metadata through
            pass
    return entry


def ck_consume_group(rep: Report, bs: str, cid: str, group: str, topics: list[str], expect: int,
                     extra: dict | None = None, linger: float = 2.5, timeout: float = 40) -> dict:
    """Subscribe, consume `expect` records, stay a few heartbeats, commit, OffsetFetch, close."""
    from confluent_kafka import Consumer, KafkaException
    conf_pub = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                **GROUP_TIMEOUTS_CK, **(extra or {})}
    entry = rep.client(cid, lib_ck(), "consumer", conf_pub)
    c = Consumer({"bootstrap.servers": bs, "client.id": cid, "error_cb": ck_error_cb(entry), **conf_pub})
    assigned: dict[str, list[int]] = {}

    def on_assign(consumer, parts):
        for tp in parts:
            assigned.setdefault(tp.topic, []).append(tp.partition)

    c.subscribe(topics, on_assign=on_assign)
    got = 0
    deadline = time.monotonic() + timeout
    linger_until = None
    while time.monotonic() < deadline:
        if got >= expect and linger_until is None:
            linger_until = time.monotonic() + linger
        if linger_until is not None and time.monotonic() > linger_until:
            break
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            errs = entry.setdefault("consume_errors", [])
            if m.error().name() not in errs:
                errs.append(m.error().name())
            continue
        note_consumed(entry, m.topic(), m.partition(), m.offset())
        got += 1
    entry["assigned"] = {t: sorted(ps) for t, ps in assigned.items()}
    try:
        committed = c.commit(asynchronous=False)
        entry["committed"] = {}
        for tp in committed or []:
            if tp.offset >= 0:
                _tp(entry["committed"], tp.topic, tp.partition)["offset"] = tp.offset
    except KafkaException as e:
        entry["commit_error"] = err_name(e)[0]
    try:
        fetched = c.committed(c.assignment(), timeout=10)  # OffsetFetch
        entry["fetched_committed"] = {}
        for tp in fetched:
            _tp(entry["fetched_committed"], tp.topic, tp.partition)["offset"] = tp.offset
    except KafkaException as e:
        entry["offset_fetch_error"] = err_name(e)[0]
    c.close()  # LeaveGroup
    return entry


def brokers_of(client) -> dict[str, str]:
    md = client.list_topics(timeout=10)
    return {str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()}


def brokers_py(brokers) -> dict[str, str]:
    """Broker map from kafka-python / aiokafka cluster metadata (field names differ)."""
    return {str(getattr(b, "node_id", getattr(b, "nodeId", None))): f"{b.host}:{b.port}" for b in brokers}


@contextmanager
def mock_cluster(rep: Report, n: int = 3):
    """librdkafka mock cluster hosted by an otherwise idle producer.

    The cluster lives inside the client that has test.mock.num.brokers; other
    clients reach it over real loopback TCP via the ports it reports.
    """
    host, _entry = ck_producer(rep, "unused:9092", "kd-mock-host", {"test.mock.num.brokers": n}, role="mock-host")
    mine = brokers_of(host)
    rep.brokers.update(mine)
    try:
        yield ",".join(mine[k] for k in sorted(mine))  # not rep.brokers: legacy-clients also has tansu
    finally:
        host.flush(5)
        del host


# --------------------------------------------------------------------------
# kafka-python / aiokafka building blocks

def kp_produce(rep: Report, bs: str, cid: str, topic: str, records, extra: dict,
               partition: int | None = None) -> dict:
    from kafka import KafkaProducer
    entry = rep.client(cid, lib_kp(), "producer", extra)
    p = KafkaProducer(bootstrap_servers=bs, client_id=cid, **extra)
    # Headers only exist from magic 2 on; pinned old api_versions must not send them.
    old = extra.get("api_version", (9,)) < (0, 11)
    futs = [p.send(topic, key=k, value=v, partition=partition,
                   headers=None if old else [(hk, hv) for hk, hv in h if hv is not None])
            for k, v, h in records]
    p.flush(30)
    for f in futs:
        try:
            md = f.get(timeout=30)
            note_delivery(entry, md.topic, md.partition, md.offset, None)
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            note_delivery(entry, topic, -1 if partition is None else partition, None, err_name(e)[0])
    if not rep.brokers:
        rep.brokers.update(brokers_py(p._metadata.brokers()))  # no public accessor
    p.close(timeout=10)
    return entry


def kp_consume_group(rep: Report, bs: str, cid: str, group: str, topics: list[str], expect: int,
                     linger: float = 2.5, timeout: float = 40) -> dict:
    from kafka import KafkaConsumer
    conf = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False, **GROUP_TIMEOUTS_PY}
    entry = rep.client(cid, lib_kp(), "consumer", conf)
    c = KafkaConsumer(*topics, bootstrap_servers=bs, client_id=cid, **conf)
    got = 0
    deadline = time.monotonic() + timeout
    linger_until = None
    while time.monotonic() < deadline:
        if got >= expect and linger_until is None:
            linger_until = time.monotonic() + linger
        if linger_until is not None and time.monotonic() > linger_until:
            break
        for tp, msgs in c.poll(timeout_ms=200).items():
            for m in msgs:
                note_consumed(entry, m.topic, m.partition, m.offset)
                got += 1
    assignment = c.assignment()
    entry["assigned"] = {}
    for tp in sorted(assignment):
        entry["assigned"].setdefault(tp.topic, []).append(tp.partition)
    try:
        c.commit()
        entry["committed"] = {}
        for tp in sorted(assignment):
            off = c.committed(tp)  # OffsetFetch
            if off is not None:
                _tp(entry["committed"], tp.topic, tp.partition)["offset"] = off
    except Exception as e:  # noqa: BLE001
        entry["commit_error"] = err_name(e)[0]
    c.close()
    return entry


async def aio_produce(rep: Report, bs: str, cid: str, topic: str, records, extra: dict) -> dict:
    from aiokafka import AIOKafkaProducer
    entry = rep.client(cid, lib_aio(), "producer", extra)
    p = AIOKafkaProducer(bootstrap_servers=bs, client_id=cid, **extra)
    await p.start()
    try:
        futs = [await p.send(topic, value=v, key=k, headers=[(hk, hv) for hk, hv in h if hv is not None])
                for k, v, h in records]
        for f in futs:
            try:
                md = await f
                note_delivery(entry, md.topic, md.partition, md.offset, None)
            except Exception as e:  # noqa: BLE001
                note_delivery(entry, topic, -1, None, err_name(e)[0])
        if not rep.brokers:
            rep.brokers.update(brokers_py(p.client.cluster.brokers()))
    finally:
        await p.stop()
    return entry


async def aio_consume_group(rep: Report, bs: str, cid: str, group: str, topics: list[str], expect: int,
                            linger: float = 2.5, timeout: float = 40) -> dict:
    from aiokafka import AIOKafkaConsumer
    conf = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False, **GROUP_TIMEOUTS_PY}
    entry = rep.client(cid, lib_aio(), "consumer", conf)
    c = AIOKafkaConsumer(*topics, bootstrap_servers=bs, client_id=cid, **conf)
    await c.start()
    try:
        got = 0
        deadline = time.monotonic() + timeout
        linger_until = None
        while time.monotonic() < deadline:
            if got >= expect and linger_until is None:
                linger_until = time.monotonic() + linger
            if linger_until is not None and time.monotonic() > linger_until:
                break
            for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                for m in msgs:
                    note_consumed(entry, m.topic, m.partition, m.offset)
                    got += 1
        assignment = c.assignment()
        entry["assigned"] = {}
        for tp in sorted(assignment):
            entry["assigned"].setdefault(tp.topic, []).append(tp.partition)
        await c.commit()
        entry["committed"] = {}
        for tp in sorted(assignment):
            off = await c.committed(tp)
            if off is not None:
                _tp(entry["committed"], tp.topic, tp.partition)["offset"] = off
    finally:
        await c.stop()
    return entry


# --------------------------------------------------------------------------
# Scenarios (run inside the netns by the child process)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def sc_tansu_produce_codecs(rep: Report, bs: str) -> None:
    for codec in CODECS:
        ck_produce(rep, bs, f"kd-codecs-{codec}", f"codec-{codec}", make_records(10, codec),
                   {"compression.type": codec, "acks": "all", "linger.ms": 5})
    # acks=0: Produce requests without responses.
    ck_produce(rep, bs, "kd-codecs-acks0", "acks0", make_records(4, "acks0"),
               {"acks": 0, "linger.ms": 0, "batch.num.messages": 1})


def sc_tansu_consume_group(rep: Report, bs: str) -> None:
    prod = ck_produce(rep, bs, "kd-group-producer", "group-topic", make_records(12, "group"), {"acks": "all"})
    n = _delivered_count(prod)
    ck_consume_group(rep, bs, "kd-group-consumer-ck", "kd-group-ck", ["group-topic"], n)
    kp_consume_group(rep, bs, "kd-group-consumer-kp", "kd-group-kp", ["group-topic"], n)


def _admin_futures(entry: dict, call: str, futs: dict, label=str, summarize=lambda v: None) -> None:
    from confluent_kafka import KafkaException
    for target, fut in futs.items():
        res = {"call": call, "target": label(target)}
        try:
            val = fut.result()
            res["ok"] = True
            summary = summarize(val)
            if summary is not None:
                res["result"] = summary
        except KafkaException as e:
            name, code = err_name(e)
            res.update(ok=False, error=name, code=code, local=code is not None and code < 0)
        entry["admin"].append(res)


def _admin_single(entry: dict, call: str, target: str, fn, summarize=lambda v: None) -> None:
    from confluent_kafka import KafkaException
    res = {"call": call, "target": target}
    try:
        val = fn()
        res["ok"] = True
        summary = summarize(val)
        if summary is not None:
            res["result"] = summary
    except KafkaException as e:
        name, code = err_name(e)
        res.update(ok=False, error=name, code=code, local=code is not None and code < 0)
    entry["admin"].append(res)


def sc_tansu_admin_errors(rep: Report, bs: str) -> None:
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        TopicCollection,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    # A group that exists without a JoinGroup: explicit OffsetCommit from an assign()-only consumer.
    ce = rep.client("kd-admin-committer", lib_ck(), "consumer", {"group.id": "kd-admin-group"})
    c = Consumer({"bootstrap.servers": bs, "client.id": "kd-admin-committer", "group.id": "kd-admin-group",
                  "enable.auto.commit": False, "error_cb": ck_error_cb(ce)})

    entry = rep.client("kd-admin", lib_ck(), "admin")
    entry["admin"] = []
    a = AdminClient({"bootstrap.servers": bs, "client.id": "kd-admin", "error_cb": ck_error_cb(entry)})
    rep.brokers.update(brokers_of(a))
    kw = {"request_timeout": 10}
    topic_label = lambda r: f"{r.restype.name.lower()}:{r.name}"

    _admin_futures(entry, "create_topics", a.create_topics(
        [NewTopic("admin-a", 3, 1), NewTopic("admin-b", 1, 1)], **kw))
    _admin_futures(entry, "create_topics", a.create_topics([NewTopic("admin-a", 3, 1)], **kw))
    _admin_futures(entry, "create_topics(invalid)", a.create_topics(
        [NewTopic("admin-rf3", 1, 3), NewTopic("bad/topic name", 1, 1)], **kw))
    _admin_futures(entry, "create_topics(validate_only)", a.create_topics(
        [NewTopic("admin-validate", 2, 1)], validate_only=True, **kw))
    _admin_futures(entry, "create_partitions", a.create_partitions([NewPartitions("admin-a", 5)], **kw))
    _admin_futures(entry, "describe_configs", a.describe_configs(
        [ConfigResource("topic", "admin-a"), ConfigResource("broker", "111")], **kw),
        label=topic_label, summarize=lambda v: {"entries": len(v)})
    _admin_futures(entry, "incremental_alter_configs", a.incremental_alter_configs(
        [ConfigResource("topic", "admin-a", incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])], **kw),
        label=topic_label)
    _admin_futures(entry, "describe_topics", a.describe_topics(
        TopicCollection(["admin-a", "kd-no-such-topic"]), **kw), summarize=lambda v: {"partitions": len(v.partitions)})
    _admin_single(entry, "describe_cluster", "cluster", lambda: a.describe_cluster(**kw).result(),
                  summarize=lambda v: {"cluster_id": v.cluster_id, "nodes": len(v.nodes)})

    # OffsetCommit from a consumer that never joined (generation -1), then OffsetFetch.
    tp = [TopicPartition("admin-a", 0, 0)]
    try:
        committed = c.commit(offsets=tp, asynchronous=False)
        ce["committed"] = {t.topic: {str(t.partition): {"offset": t.offset}} for t in committed}
    except Exception as e:  # noqa: BLE001
        ce["commit_error"] = err_name(e)[0]

    _admin_single(entry, "list_consumer_groups", "", lambda: a.list_consumer_groups(**kw).result(),
                  summarize=lambda v: {"groups": sorted(g.group_id for g in v.valid),
                                       "errors": [str(x) for x in v.errors]})
    _admin_single(entry, "list_groups", "", lambda: a.list_groups(timeout=10),
                  summarize=lambda v: sorted(g.id for g in v))
    _admin_futures(entry, "describe_consumer_groups", a.describe_consumer_groups(
        ["kd-admin-group", "kd-no-such-group"], **kw), summarize=lambda v: {"state": v.state.name})
    _admin_futures(entry, "list_consumer_group_offsets", a.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("kd-admin-group")], **kw),
        summarize=lambda v: {f"{t.topic}/{t.partition}": t.offset for t in v.topic_partitions})
    _admin_futures(entry, "list_offsets", a.list_offsets(
        {TopicPartition("admin-a", 0): OffsetSpec.latest()}, **kw),
        label=lambda t: f"{t.topic}/{t.partition}", summarize=lambda v: {"offset": v.offset})
    _admin_futures(entry, "delete_topics", a.delete_topics(["kd-no-such-topic"], **kw))
    _admin_futures(entry, "delete_topics", a.delete_topics(["admin-b"], **kw))
    _admin_futures(entry, "delete_consumer_groups", a.delete_consumer_groups(["kd-admin-group"], **kw))
    c.close()


def sc_tansu_kafka_python(rep: Report, bs: str) -> None:
    a = kp_produce(rep, bs, "kd-kp-producer", "kp-plain", make_records(6, "kp"), {"acks": "all"})
    b = kp_produce(rep, bs, "kd-kp-producer-gzip", "kp-gzip", make_records(6, "kpz"),
                   {"acks": 1, "compression_type": "gzip", "linger_ms": 5})
    n = _delivered_count(a) + _delivered_count(b)
    kp_consume_group(rep, bs, "kd-kp-consumer", "kd-kp-group", ["kp-plain", "kp-gzip"], n)


def sc_tansu_aiokafka(rep: Report, bs: str) -> None:
    async def main():
        a = await aio_produce(rep, bs, "kd-aio-producer", "aio-plain", make_records(6, "aio"), {"acks": "all"})
        b = await aio_produce(rep, bs, "kd-aio-producer-lz4", "aio-lz4", make_records(6, "aioz"),
                              {"acks": 1, "compression_type": "lz4", "linger_ms": 5})
        n = _delivered_count(a) + _delivered_count(b)
        await aio_consume_group(rep, bs, "kd-aio-consumer", "kd-aio-group", ["aio-plain", "aio-lz4"], n)
    asyncio.run(main())


def sc_mock_transactions(rep: Report, bs_unused: str) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    with mock_cluster(rep) as bs:
        # Source records whose offsets are committed inside transaction 1 (AddOffsetsToTxn/TxnOffsetCommit).
        src = ck_produce(rep, bs, "kd-tx-src-producer", "tx-src", make_records(3, "src"), {"acks": "all"},
                         partition=0)
        p, entry = ck_producer(rep, bs, "kd-tx-producer", {"transactional.id": "kd-tx-1", "acks": "all"},
                               role="transactional-producer")
        entry["transactions"] = []
        p.init_transactions(30)
        src_group = Consumer({"bootstrap.servers": bs, "client.id": "kd-tx-src-consumer", "group.id": "kd-tx-eos"})
        rep.client("kd-tx-src-consumer", lib_ck(), "group-metadata-only", {"group.id": "kd-tx-eos"})
        for i, (action, n) in enumerate([("commit", 6), ("abort", 4)]):
            txn = {"result": action, "records": n}
            cb = _ck_delivery(txn)
            p.begin_transaction()
            for key, value, headers in make_records(n, f"tx{i}"):
                p.produce("tx-topic", value, key, headers=headers, on_delivery=cb)
            p.flush(30)  # delivered (offsets known) even for the txn we then abort
            try:
                if action == "commit":
                    max_src = src["delivered"]["tx-src"]["0"]["max_offset"]
                    p.send_offsets_to_transaction([TopicPartition("tx-src", 0, max_src + 1)],
                                                  src_group.consumer_group_metadata(), 30)
                    txn["sent_offsets"] = {"tx-src": {"0": max_src + 1}}
                    p.commit_transaction(30)
                else:
                    p.abort_transaction(30)
                txn["ok"] = True
            except KafkaException as e:
                txn.update(ok=False, error=err_name(e)[0])
            entry["transactions"].append(txn)
        src_group.close()
        total = sum(t["records"] for t in entry["transactions"])
        committed_n = entry["transactions"][0]["records"]
        ck_consume_group(rep, bs, "kd-tx-consumer-rc", "kd-tx-rc", ["tx-topic"], committed_n,
                         {"isolation.level": "read_committed"}, linger=1.5)
        ck_consume_group(rep, bs, "kd-tx-consumer-ru", "kd-tx-ru", ["tx-topic"], total,
                         {"isolation.level": "read_uncommitted"}, linger=1.5)
        del p


def sc_mock_produce_consume(rep: Report, bs_unused: str) -> None:
    with mock_cluster(rep) as bs:
        prod = ck_produce(rep, bs, "kd-mpc-producer", "mpc-topic", make_records(24, "mpc"),
                          {"compression.type": "lz4", "acks": "all", "linger.ms": 5})
        ck_consume_group(rep, bs, "kd-mpc-consumer", "kd-mpc-group", ["mpc-topic"], _delivered_count(prod),
                         linger=1.5)


LEGACY = [("0.8.2", "none"), ("0.9.0", "none"), ("0.9.0", "gzip"), ("0.10.0", "none"), ("0.10.0", "gzip")]


def _legacy_conf(version: str, codec: str) -> dict:
    return {"api.version.request": False, "broker.version.fallback": version, "compression.type": codec,
            "acks": 1, "message.timeout.ms": 3000, "retry.backoff.ms": 500}


def _legacy_kp(rep: Report, bs: str, broker: str) -> None:
    # librdkafka with fallback >= 0.10 still asks ApiVersions and sends Produce v10, so
    # magic-1 message sets (Produce v2) come from kafka-python pinned to 0.10.0.
    for codec in ("none", "gzip"):
        kp_produce(rep, bs, f"kd-legacy-kp-{broker}-0.10.0-{codec}", f"legacy-kp-0.10.0-{codec}",
                   make_records(2, f"lk{broker}{codec}"),
                   {"api_version": (0, 10, 0), "acks": 1, "retries": 0, "request_timeout_ms": 3000,
                    **({"compression_type": codec} if codec != "none" else {})}, partition=0)


def sc_legacy_clients(rep: Report, bs_tansu: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    for version, codec in LEGACY:
        ck_produce(rep, bs_tansu, f"kd-legacy-tansu-{version}-{codec}", f"legacy-{version}-{codec}",
                   make_records(2, f"lt{version}{codec}"), _legacy_conf(version, codec), partition=0,
                   flush_timeout=10)
    _legacy_kp(rep, bs_tansu, "tansu")
    with mock_cluster(rep) as bs:
        for version, codec in LEGACY:
            ck_produce(rep, bs, f"kd-legacy-mock-{version}-{codec}", f"legacy-{version}-{codec}",
                       make_records(2, f"lm{version}{codec}"), _legacy_conf(version, codec), partition=0,
                       flush_timeout=10)
        _legacy_kp(rep, bs, "mock")
        # Old Fetch/ListOffsets (v0..v2) from assign()-only consumers; no groups before 0.9.
        for version in ("0.8.2", "0.9.0", "0.10.0"):
            cid = f"kd-legacy-mock-consumer-{version}"
            conf = {"api.version.request": False, "broker.version.fallback": version, "enable.auto.commit": False}
            entry = rep.client(cid, lib_ck(), "consumer", {**conf, "assign": "legacy-0.10.0-none/0 from offset 0"})
            c = Consumer({"bootstrap.servers": bs, "client.id": cid, "group.id": f"kd-legacy-{version}",
                          "error_cb": ck_error_cb(entry), **conf})
            c.assign([TopicPartition("legacy-0.10.0-none", 0, 0)])  # explicit offset: mock answers ListOffsets v0 malformed (_UNDERFLOW)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and entry.get("consumed", {}).get(
                    "legacy-0.10.0-none", {}).get("0", {}).get("count", 0) < 2:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    errs = entry.setdefault("consume_errors", [])
                    if m.error().name() not in errs:
                        errs.append(m.error().name())
                else:
                    note_consumed(entry, m.topic(), m.partition(), m.offset())
            c.close()


def sc_mixed(rep: Report, bs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    ae = rep.client("kd-mixed-admin", lib_ck(), "admin")
    a = AdminClient({"bootstrap.servers": bs, "client.id": "kd-mixed-admin", "error_cb": ck_error_cb(ae)})
    ae["admin"] = []
    _admin_futures(ae, "create_topics", a.create_topics(
        [NewTopic(t, 3, 1) for t in ("mixed-ck", "mixed-kp", "mixed-aio")], request_timeout=10))
    rep.brokers.update(brokers_of(a))
    n = 15
    errors: list[str] = []

    def run(fn, *args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - surfaced in expected.json
            errors.append(f"{fn.__name__}: {e!r}")

    def aio_both():
        async def main():
            await asyncio.gather(
                aio_produce(rep, bs, "kd-mixed-aio-producer", "mixed-aio", make_records(n, "maio"),
                            {"acks": "all", "compression_type": "zstd", "linger_ms": 20}),
                aio_consume_group(rep, bs, "kd-mixed-aio-consumer", "kd-mixed-aio", ["mixed-aio", "mixed-ck"], 2 * n))
        asyncio.run(main())

    threads = [
        threading.Thread(target=run, args=(ck_produce, rep, bs, "kd-mixed-ck-producer", "mixed-ck",
                                           make_records(n, "mck"), {"acks": "all", "compression.type": "snappy",
                                                                    "linger.ms": 20})),
        threading.Thread(target=run, args=(kp_produce, rep, bs, "kd-mixed-kp-producer", "mixed-kp",
                                           make_records(n, "mkp"), {"acks": 1, "linger_ms": 20})),
        threading.Thread(target=run, args=(aio_both,)),
        threading.Thread(target=run, args=(ck_consume_group, rep, bs, "kd-mixed-ck-consumer", "kd-mixed-ck",
                                           ["mixed-ck", "mixed-kp", "mixed-aio"], 3 * n)),
        threading.Thread(target=run, args=(kp_consume_group, rep, bs, "kd-mixed-kp-consumer", "kd-mixed-kp",
                                           ["mixed-kp"], n)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        rep.notes.extend(errors)


# --------------------------------------------------------------------------
# A consumer group that rebalances: members join, one is killed, one leaves.
#
# Each member is its own process (so one can be SIGKILLed and its session must
# time out on the broker) that appends what its rebalance callbacks and poll
# loop saw to a JSON-lines file, line-buffered so a kill loses nothing written.

def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def run_member(spec: dict) -> None:
    """Child mode: one group member until SIGTERM (then commit, close) or SIGKILL."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = open(spec["events"], "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def emit(event: str, **kw) -> None:
        out.write(json.dumps({"ts": utc_now(), "event": event, **kw}) + "\n")

    names = lambda parts: sorted(f"{tp.topic}-{tp.partition}" for tp in parts)  # noqa: E731
    if spec["lib"] == "ck":
        from confluent_kafka import Consumer, KafkaException

        def commit(c) -> dict:
            try:
                done = c.commit(asynchronous=False) or []
                return {f"{tp.topic}-{tp.partition}": tp.offset for tp in done if tp.offset >= 0}
            except KafkaException as e:  # _NO_OFFSET: nothing consumed since the last commit
                return {"error": err_name(e)[0]}

        def on_assign(c, parts):
            emit("assign", partitions=names(parts))

        def on_revoke(c, parts):
            emit("revoke", partitions=names(parts), committed=commit(c))

        def on_lost(c, parts):
            emit("lost", partitions=names(parts))

        c = Consumer({"bootstrap.servers": spec["bootstrap"], "client.id": spec["client_id"], **spec["config"]})
        c.subscribe(spec["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        emit("subscribed")
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                emit("error", error=m.error().name())
            else:
                emit("consumed", tp=f"{m.topic()}-{m.partition()}", offset=m.offset())
        emit("closing", committed=commit(c))
        c.close()  # LeaveGroup
    else:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        c = KafkaConsumer(bootstrap_servers=spec["bootstrap"], client_id=spec["client_id"], **spec["config"])

        def commit() -> dict:
            offsets = c._subscription.all_consumed_offsets()  # noqa: SLF001 - what commit() will send
            try:
                c.commit()
            except Exception as e:  # noqa: BLE001 - recorded, not hidden
                return {"error": err_name(e)[0]}
            return {f"{tp.topic}-{tp.partition}": om.offset for tp, om in offsets.items()}

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                emit("revoke", partitions=names(revoked), committed=commit() if revoked else {})

            def on_partitions_assigned(self, assigned):
                emit("assign", partitions=names(assigned))

        c.subscribe(spec["topics"], listener=Listener())
        emit("subscribed")
        while not stop.is_set():
            for _tp_, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    emit("consumed", tp=f"{m.topic}-{m.partition}", offset=m.offset)
        emit("closing", committed=commit())
        c.close()  # LeaveGroup
    emit("closed")


class Member:
    """A group member process started from the scenario, and what it reported so far."""

    def __init__(self, cid: str, lib: str, bs: str, group: str, topics: list[str], tmp: Path,
                 protocol: str = "classic") -> None:
        self.cid, self.lib = cid, lib
        self.events_path = tmp / f"{cid}.jsonl"
        if lib == "ck" and protocol == "consumer":  # KIP-848: the broker owns session and heartbeat timing
            self.config = {"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False}
        elif lib == "ck":
            self.config = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           **GROUP_TIMEOUTS_CK}
        else:
            self.config = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False,
                           **GROUP_TIMEOUTS_PY}
        spec = {"lib": lib, "bootstrap": bs, "client_id": cid, "topics": topics, "config": self.config,
                "events": str(self.events_path)}
        self.proc = subprocess.Popen([sys.executable, __file__, "--member", json.dumps(spec)])
        self.killed = False

    def events(self) -> list[dict]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]  # a kill may cut the last line

    def assignment_since(self, ts: str) -> list[str] | None:
        """What the member holds after its callbacks so far, if one of them was an assign at or after ``ts``.

        Replaying adds on assign and removes on revoke/lost fits both the eager protocol (revoke all,
        assign all) and KIP-848's incremental callbacks (assign/revoke only what changes)."""
        held: set[str] = set()
        fresh = False
        for e in self.events():
            if e["event"] == "assign":
                held |= set(e["partitions"])
                fresh = fresh or e["ts"] >= ts
            elif e["event"] in ("revoke", "lost"):
                held -= set(e["partitions"])
        return sorted(held) if fresh else None

    def stop(self, timeout: float = 30) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed = True


class GroupScript:
    """Changes one consumer group a step at a time; after each step waits until the live members'
    callbacks show an assignment that covers the topic, and records what each member got."""

    def __init__(self, bs: str, group: str, topic: str, partitions: list[str], tmp: Path,
                 protocol: str = "classic") -> None:
        self.bs, self.group, self.topic, self.partitions, self.tmp = bs, group, topic, partitions, tmp
        self.protocol = protocol
        self.members: list[Member] = []
        self.live: list[Member] = []
        self.steps: list[dict] = []

    def _step(self, what: str, member: Member, change) -> None:
        since = utc_now()
        change()
        settled = self._settle(since)
        time.sleep(1.5)  # a heartbeat or two: a second generation would show up here
        self.steps.append({
            "step": what, "member": member.cid, "at": since, "settled": settled,
            "assignment": {m.cid: m.assignment_since(since) for m in self.live},
            "assigns_seen": {m.cid: sum(e["event"] == "assign" and e["ts"] >= since for e in m.events())
                             for m in self.live}})

    def _settle(self, since: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        got: dict = {}
        while time.monotonic() < deadline:
            got = {m.cid: m.assignment_since(since) for m in self.live}
            if all(v is not None for v in got.values()):
                if sorted(p for v in got.values() for p in v) == self.partitions:
                    return utc_now()
            time.sleep(0.2)
        raise TimeoutError(f"{self.group} did not settle after {since}: {got}")

    def join(self, cid: str, lib: str = "ck") -> Member:
        m = Member(cid, lib, self.bs, self.group, [self.topic], self.tmp, self.protocol)
        self.members.append(m)
        self._step("join", m, lambda: self.live.append(m))
        return m

    def kill(self, m: Member) -> None:
        self._step("killed: session timeout", m, lambda: (m.kill(), self.live.remove(m)))

    def leave(self, m: Member) -> None:
        self._step("leave", m, lambda: (m.stop(), self.live.remove(m)))

    def last_leaves(self, m: Member) -> None:
        """The last member leaves: nobody is left to receive an assignment."""
        at = utc_now()
        m.stop()
        self.live.remove(m)
        self.steps.append({"step": "leave", "member": m.cid, "at": at})

    def stop_all(self) -> None:
        for m in self.members:
            if m.proc.poll() is None:
                m.kill()

    def summary(self, broker: str) -> dict:
        return {"broker": broker, "protocol": self.protocol, "topic": self.topic, "partitions": self.partitions,
                "members": [m.cid for m in self.members], "steps": self.steps,
                "rebalances_seen": sum("assignment" in s for s in self.steps)}


def _member_entry(rep: Report, m: Member) -> dict:
    lib = lib_ck() if m.lib == "ck" else lib_kp()
    entry = rep.client(m.cid, lib, "group-member (killed)" if m.killed else "group-member", m.config)
    entry["rebalance_events"] = []
    entry["committed"] = {}
    for e in m.events():
        if e["event"] == "consumed":
            topic, part = e["tp"].rsplit("-", 1)
            note_consumed(entry, topic, int(part), e["offset"])
        elif e["event"] in ("assign", "revoke", "lost"):
            entry["rebalance_events"].append({k: e[k] for k in ("ts", "event", "partitions", "committed") if k in e})
        if isinstance(e.get("committed"), dict):
            for tp, off in e["committed"].items():
                if tp != "error":
                    topic, part = tp.rsplit("-", 1)
                    _tp(entry["committed"], topic, int(part))["offset"] = off
    entry["assigns_seen"] = sum(e["event"] == "assign" for e in entry["rebalance_events"])
    return entry


def rebalancing_group(rep: Report, bs: str, broker: str, tmp: Path) -> None:
    """Producer in the background; members A (ck), B (kafka-python on tansu), C (ck) join one by one,
    C is SIGKILLed (its session times out), B leaves, A drains and leaves; on the mock a KIP-848
    group then does the same without the kill; last a consumer in another group reads half of
    each partition and stops, so its lag stays non-zero."""
    from confluent_kafka import Consumer, TopicPartition
    topic, group, lag_group = f"rb-{broker}", f"kd-rb-{broker}", f"kd-lag-{broker}"
    prod, pentry = ck_producer(rep, bs, f"kd-rb-producer-{broker}", {"acks": "all", "linger.ms": 5})
    cb = _ck_delivery(pentry)
    records = make_records(200, f"rb{broker}")
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for key, value, headers in records[sent:sent + n]:
            prod.produce(topic, value, key, headers=headers, on_delivery=cb)
            prod.poll(0)
        sent += n

    send(8)
    prod.flush(30)
    if not rep.brokers or broker == "mock":
        rep.brokers.update(brokers_of(prod))
    partitions = sorted(f"{topic}-{p}" for p in prod.list_topics(topic, timeout=10).topics[topic].partitions)
    # Trickle records while the group changes, so the members consume through the rebalances.
    stop_producing = threading.Event()

    def trickle() -> None:
        while not stop_producing.wait(0.8) and sent < len(records):
            send(1)
            prod.poll(0)

    producer_thread = threading.Thread(target=trickle)
    producer_thread.start()
    script = GroupScript(bs, group, topic, partitions, tmp)
    try:
        a = script.join(f"kd-rb-a-{broker}")
        b = script.join(f"kd-rb-b-{broker}", "kp" if broker == "tansu" else "ck")  # kafka-python: not on the mock
        c = script.join(f"kd-rb-c-{broker}")
        script.kill(c)
        script.leave(b)
        stop_producing.set()
        producer_thread.join()
        time.sleep(3)  # A drains what the producer sent last
        script.last_leaves(a)
    finally:
        stop_producing.set()
        producer_thread.join()
        left = prod.flush(30)
        if left:
            pentry["undelivered_at_exit"] = left
        script.stop_all()
    scripts = [script]
    if broker == "mock":
        # KIP-848 (ConsumerGroupHeartbeat): the mock speaks it, tansu 0.6 does not. Incremental
        # callbacks: joining takes partitions from A, leaving hands them back.
        k848 = GroupScript(bs, f"kd-848-{broker}", topic, partitions, tmp, protocol="consumer")
        try:
            a848 = k848.join(f"kd-848-a-{broker}")
            b848 = k848.join(f"kd-848-b-{broker}")
            k848.leave(b848)
            k848.last_leaves(a848)
        finally:
            k848.stop_all()
        scripts.append(k848)
    for sc in scripts:
        for m in sc.members:
            _member_entry(rep, m)

    # Stops early: reads half of each partition (pausing those done), commits that, closes;
    # its fetches have seen the whole log, so the wire holds both ends of the lag.
    lag_cid = f"kd-rb-lagger-{broker}"
    lconf = {"group.id": lag_group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
             **GROUP_TIMEOUTS_CK}
    lentry = rep.client(lag_cid, lib_ck(), "consumer (stops early)", lconf)
    lc = Consumer({"bootstrap.servers": bs, "client.id": lag_cid, "error_cb": ck_error_cb(lentry), **lconf})
    lc.subscribe([topic])
    target = {int(p): max(1, s["count"] // 2) for p, s in pentry.get("delivered", {}).get(topic, {}).items()}
    next_offset: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(next_offset.get(p, 0) < n for p, n in target.items()):
        msg = lc.poll(0.2)
        if msg is None or msg.error() or next_offset.get(msg.partition(), 0) >= target[msg.partition()]:
            continue  # a record fetched before its partition was paused is not processed
        note_consumed(lentry, msg.topic(), msg.partition(), msg.offset())
        next_offset[msg.partition()] = msg.offset() + 1
        if next_offset[msg.partition()] >= target[msg.partition()]:
            lc.pause([TopicPartition(topic, msg.partition())])
    lentry["committed"] = {}
    for tp in lc.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(next_offset.items())],
                        asynchronous=False) or []:
        if tp.offset >= 0:
            _tp(lentry["committed"], tp.topic, tp.partition)["offset"] = tp.offset
    time.sleep(2)  # more Fetch round trips, so the high watermark of every partition is on the wire
    lentry["high_watermarks"] = {}
    for tp in lc.assignment():
        _lo, hi = lc.get_watermark_offsets(tp, cached=True)  # from the last Fetch response
        _tp(lentry["high_watermarks"], tp.topic, tp.partition)["offset"] = hi
    lc.close()

    # The final committed offsets, as the group coordinator hands them out (OffsetFetch).
    final: dict[str, dict] = {}
    for grp in [sc.group for sc in scripts] + [lag_group]:
        chk = Consumer({"bootstrap.servers": bs, "client.id": f"kd-rb-checker-{broker}", "group.id": grp,
                        "enable.auto.commit": False})
        final[grp] = {}
        tps = [TopicPartition(topic, int(p.rsplit("-", 1)[1])) for p in partitions]
        for tp in chk.committed(tps, timeout=10):
            if tp.offset >= 0:
                _tp(final[grp], tp.topic, tp.partition)["offset"] = tp.offset
        chk.close()
    rep.client(f"kd-rb-checker-{broker}", lib_ck(), "offset-fetch", {"group.id": ",".join(final)})

    lag = {}
    for t, parts in lentry["high_watermarks"].items():
        for p, hw in parts.items():
            committed = final[lag_group].get(t, {}).get(p, {}).get("offset")
            _tp(lag, t, int(p)).update(committed_offset=committed, high_watermark=hw["offset"],
                                       lag=None if committed is None else hw["offset"] - committed)
    for sc in scripts:
        rep.groups[sc.group] = {**sc.summary(broker), "final_committed": final[sc.group]}
    rep.groups[lag_group] = {"broker": broker, "topic": topic, "members": [lag_cid],
                             "final_committed": final[lag_group], "lag": lag}


def sc_group_rebalance(rep: Report, bs_tansu: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kd-rb-") as tmp:
        rebalancing_group(rep, bs_tansu, "tansu", Path(tmp))
        with mock_cluster(rep) as bs:
            rebalancing_group(rep, bs, "mock", Path(tmp))


# --------------------------------------------------------------------------
# Share groups (KIP-932) on the mock cluster

@contextmanager
def share_mock_cluster(rep: Report, lock_ms: int, n: int = 3):
    """A mock cluster whose share-group settings are set through librdkafka's C mock API.

    The lock duration, session timeout and auto.offset.reset of a mock share group are not
    client properties; ctypes reaches the same librdkafka that confluent-kafka loaded.
    """
    import ctypes
    import glob

    import confluent_kafka
    so = glob.glob(str(Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs" / "librdkafka*.so*"))
    lib = ctypes.CDLL(so[0] if so else "librdkafka.so.1")
    vp = ctypes.c_void_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [vp]
    lib.rd_kafka_handle_mock_cluster.restype = vp
    lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for k, v in (("test.mock.num.brokers", str(n)), ("client.id", "kd-mock-host")):
        lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), err, 512)
    rk = lib.rd_kafka_new(0, conf, err, 512)  # a producer handle that only hosts the cluster
    mc = lib.rd_kafka_handle_mock_cluster(rk)
    settings = {"record_lock_duration": lock_ms, "auto_offset_reset": 1,  # 1: earliest
                "session_timeout": SHARE_SESSION_MS, "heartbeat_interval": 1000}
    for name, value in settings.items():
        fn = getattr(lib, f"rd_kafka_mock_sharegroup_set_{name}")
        fn.argtypes = [vp, ctypes.c_int]
        fn(mc, value)
    rep.notes.append("mock share-group settings (C mock API): " + json.dumps(settings))
    try:
        yield lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
    finally:
        lib.rd_kafka_destroy(rk)


SHARE_SESSION_MS = 6000


class ShareMember(threading.Thread):
    """One ShareConsumer (explicit acknowledgement) in its own thread, counting what it saw.

    ``decide(msg)`` returns the AcknowledgeType for a record, or None to leave it unacknowledged
    (the member then stops polling, so its acquisition locks run out). The member leaves once
    ``stop`` is set, or after ``idle`` seconds with nothing to poll.
    """

    def __init__(self, rep: Report, bs: str, cid: str, group: str, topics: list[str], decide,
                 role: str, extra: dict | None = None, idle: float = 4.0, hold: float = 0.0) -> None:
        super().__init__(name=cid)
        self.conf = {"bootstrap.servers": bs, "client.id": cid, "group.id": group,
                     "share.acknowledgement.mode": "explicit", **(extra or {})}
        self.entry = rep.client(cid, lib_ck(), role, {k: v for k, v in self.conf.items()
                                                      if k != "bootstrap.servers"})
        self.entry.update(group=group, acquired={}, acks={}, delivery_counts={}, max_delivery_count=0,
                          errors={}, events=[])
        self.topics, self.decide, self.idle, self.hold = topics, decide, idle, hold
        self.stop = threading.Event()
        self.quiet_since = time.monotonic()  # last time a poll returned records

    def event(self, what: str, **kw) -> None:
        self.entry["events"].append({"at": utc_now(), "event": what, **kw})

    def error(self, name: str) -> None:
        self.entry["errors"][name] = self.entry["errors"].get(name, 0) + 1

    def note(self, m, ack) -> None:
        e = self.entry
        a = _tp(e["acquired"], m.topic(), m.partition())
        a["count"] = a.get("count", 0) + 1
        a.setdefault("offsets", []).append(m.offset())
        dc = m.delivery_count()
        d = e["delivery_counts"].setdefault(str(dc), 0)
        e["delivery_counts"][str(dc)] = d + 1
        e["max_delivery_count"] = max(e["max_delivery_count"], dc)
        if dc > 1:
            a["redelivered"] = a.get("redelivered", 0) + 1
        k = _tp(e["acks"], m.topic(), m.partition())
        name = "UNACKNOWLEDGED" if ack is None else ack.name
        k[name] = k.get(name, 0) + 1

    def run(self) -> None:
        from confluent_kafka import KafkaException, ShareConsumer
        self.conf["error_cb"] = lambda err: self.error(err.name())
        c = ShareConsumer(self.conf)

        def on_commit(offsets, exc=None) -> None:  # acknowledgements the broker refused
            if exc is not None:
                self.error(getattr(exc.args[0], "name", lambda: type(exc).__name__)() if exc.args else "ack")

        try:
            c.set_acknowledgement_commit_callback(on_commit)
        except Exception:  # noqa: BLE001, S110 - optional: older bindings lack it
            pass
        c.subscribe(self.topics)
        self.event("subscribed")
        self.quiet_since = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - self.quiet_since < self.idle:
            try:
                msgs = c.poll(0.5)
            except KafkaException as exc:
                self.error(err_name(exc)[0])
                continue
            held = False
            for m in msgs:
                if m.error():
                    self.error(m.error().name())
                    continue
                self.quiet_since = time.monotonic()
                ack = self.decide(m)
                self.note(m, ack)
                if ack is None:
                    held = True
                else:
                    c.acknowledge(m, ack)
            if held:  # stop acknowledging (and polling) while the locks expire
                self.event("holding", seconds=self.hold)
                self.stop.wait(self.hold)
                break
        self.event("leaving")
        try:
            c.close()  # ShareGroupHeartbeat with epoch -1; pending acknowledgements go first
        except KafkaException as exc:
            self.error(err_name(exc)[0])
        self.event("left")


def _share_records(n: int, poison: set[int]) -> list[tuple[bytes, bytes, list]]:
    return [(f"job-{i % 8}".encode(), json.dumps({"job": i, "poison": i in poison}).encode(),
             [("seq", str(i).encode())]) for i in range(n)]


def sc_mock_share_groups(rep: Report, bs_unused: str) -> None:
    """Share group kd-share on 4 partitions: three members join, then 80 jobs are produced.

    Job j goes to partition j % 4; the mock hands a 0 and 1, b 2 and stuck 3 (join order).
    a accepts and rejects the poison jobs; b releases every 6th job once and job 14 every
    time it sees it (delivered up to the mock's limit of 5, then archived), then leaves early;
    stuck acquires one batch, never acknowledges it, holds it past the 3 s lock and leaves,
    so its records are delivered again to the members that stay.
    """
    from confluent_kafka import AcknowledgeType as Ack
    poison = {5, 22, 39}
    hot = 14  # on partition 2, b's

    def job(m) -> dict:
        return json.loads(m.value())

    def decide_a(m):
        return Ack.REJECT if job(m)["poison"] else Ack.ACCEPT

    def decide_b(m):
        j = job(m)["job"]
        if j == hot or (j % 6 == 0 and m.delivery_count() == 1):
            return Ack.RELEASE
        return Ack.REJECT if job(m)["poison"] else Ack.ACCEPT

    with share_mock_cluster(rep, lock_ms=3000) as bs:
        group, topic = "kd-share", "share-jobs"
        prod = ck_produce(rep, bs, "kd-share-setup", topic, [(b"setup", b'{"job": -1, "poison": false}', [])], {"acks": "all"},
                          partition=0)  # creates the topic (mock: 4 partitions) before anyone subscribes
        a = ShareMember(rep, bs, "kd-share-a", group, [topic], decide_a, "share-consumer", idle=60)
        b = ShareMember(rep, bs, "kd-share-b", group, [topic], decide_b, "share-consumer (leaves early)",
                        idle=30)
        stuck = ShareMember(rep, bs, "kd-share-stuck", group, [topic], lambda m: None,
                            "share-consumer (stops acknowledging)", {"max.poll.records": 6}, idle=30, hold=7)
        for m in (a, b, stuck):
            m.start()
            time.sleep(1.0)
        time.sleep(2.5)  # three members, assignment settled (heartbeat every second)
        p, entry = ck_producer(rep, bs, "kd-share-producer", {"acks": "all", "linger.ms": 5})
        cb = _ck_delivery(entry)
        for i, (key, value, headers) in enumerate(_share_records(80, poison)):
            p.produce(topic, value, key, headers=headers, partition=i % 4, on_delivery=cb)  # job j on j % 4
        p.flush(30)
        time.sleep(6)
        b.event("asked to leave")
        b.stop.set()
        for m in (stuck, b):
            m.join(90)
        # a takes over partitions 2 and 3 at its next heartbeat, then drains the expired records
        time.sleep(3)
        while time.monotonic() - a.quiet_since < 4:
            time.sleep(0.2)
        a.event("asked to leave")
        a.stop.set()
        a.join(90)
        rep.notes.append(f"kd-share-setup wrote one record to {topic}-0 first: it is acquired too")
        rep.groups[group] = {"kind": "share", "topic": topic, "members": [m.entry["client_id"] for m in (a, b, stuck)],
                             "poison_jobs": sorted(poison), "always_released_job": hot, "lock_duration_ms": 3000,
                             "session_timeout_ms": SHARE_SESSION_MS, "max_delivery_attempts": 5}
        del prod, p


# name -> (broker kind, client function)
SCENARIOS = {
    "tansu-produce-codecs": ("tansu", sc_tansu_produce_codecs),
    "tansu-consume-group": ("tansu", sc_tansu_consume_group),
    "tansu-admin-errors": ("tansu", sc_tansu_admin_errors),
    "tansu-kafka-python": ("tansu", sc_tansu_kafka_python),
    "tansu-aiokafka": ("tansu", sc_tansu_aiokafka),
    "mock-transactions": ("mock", sc_mock_transactions),
    "mock-produce-consume": ("mock", sc_mock_produce_consume),
    "legacy-clients": ("tansu+mock", sc_legacy_clients),
    "mixed": ("tansu", sc_mixed),
    "group-rebalance": ("tansu+mock", sc_group_rebalance),
    "mock-share-groups": ("mock", sc_mock_share_groups),
}

# tcpdump options per scenario. group-rebalance is small and slow, so immediate mode costs
# nothing there; the netns holds only this scenario's sockets, but the mock cluster's ports
# are only known once the clients run, hence a plain tcp filter rather than a port list.
CAPTURE = {"group-rebalance": {"immediate": True, "bpf": ["tcp"]},
           "mock-share-groups": {"immediate": True, "bpf": ["tcp"]}}


# --------------------------------------------------------------------------
# Orchestration (root namespace)

def totals(clients: list[dict]) -> dict:
    """Delivered records per topic/partition summed over all producers."""
    out: dict = {}
    for c in clients:
        sources = [c.get("delivered", {})] + [t.get("delivered", {}) for t in c.get("transactions", [])]
        for tree in sources:
            for topic, parts in tree.items():
                for part, s in parts.items():
                    d = _tp(out, topic, int(part))
                    d["count"] = d.get("count", 0) + s["count"]
                    for k, f in (("min_offset", min), ("max_offset", max)):
                        if s.get(k) is not None:
                            d[k] = s[k] if d.get(k) is None else f(d[k], s[k])
                        else:
                            d.setdefault(k, None)
    return out


def tansu_version() -> str:
    out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def record(name: str, out_dir: Path) -> dict:
    kind, _ = SCENARIOS[name]
    pcap = out_dir / f"{name}.pcap"
    partial = out_dir / f".{name}.pcap.partial"  # a failed run must not clobber the committed sample
    ns_name = f"kd-{name}"
    try:
        with tempfile.TemporaryDirectory(prefix="kd-rec-") as tmp, ExitStack() as stack:
            ns = stack.enter_context(netns(ns_name))
            bs = ""
            if "tansu" in kind:
                bs = stack.enter_context(run_tansu(TANSU_PORT, ns=ns, log=Path(tmp) / "tansu.log"))
            # Capture starts after the broker's readiness probe, so only client traffic is in the pcap.
            stack.enter_context(tcpdump(partial, ns=ns, **CAPTURE.get(name, {})))
            result = Path(tmp) / "result.json"
            log = Path(tmp) / "client.log"
            t0 = time.monotonic()
            with open(log, "wb") as lf:
                rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable, __file__, "--client", name,
                                      "--bootstrap", bs, "--result", str(result)],
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
    broker: dict = {"kind": kind, "brokers": rep.pop("brokers")}
    if "tansu" in kind:
        broker["tansu_version"] = tansu_version()
        broker["tansu_port"] = TANSU_PORT
    ports = sorted({int(hp.rsplit(":", 1)[1]) for hp in broker["brokers"].values()} |
                   ({TANSU_PORT} if "tansu" in kind else set()))
    broker["ports"] = ports
    libs = {}
    for c in rep["clients"]:
        libs[c["library"]] = c["library_version"]
        if "librdkafka_version" in c:
            libs["librdkafka"] = c["librdkafka_version"]
    expected = {
        "sample": name,
        "pcap": pcap.name,
        "broker": broker,
        "libraries": libs,
        "client_ids": sorted({c["client_id"] for c in rep["clients"]}),
        "delivered_totals": totals(rep["clients"]),
        "clients": rep["clients"],
        "notes": rep["notes"],
    }
    if "groups" in rep:
        expected["groups"] = rep["groups"]
    (out_dir / f"{name}.expected.json").write_text(json.dumps(expected, indent=1, sort_keys=False) + "\n")
    check = check_capture(pcap, ports) if shutil.which("tshark") else "tshark not installed, not checked"
    print(f"{name}: {pcap.stat().st_size} bytes, clients {elapsed:.1f}s, ports {ports}; {check}")
    return expected


def run_client(name: str, bootstrap: str, result: str) -> None:
    rep = Report()
    SCENARIOS[name][1](rep, bootstrap)
    Path(result).write_text(json.dumps(rep.to_json()))


def check_capture(pcap: Path, ports: list[int]) -> str:
    """Sanity checks via tshark: frame size bound (MTU took effect) and no missing TCP bytes.

    Loopback captures can list segments out of order (several CPUs) and hold
    real retransmissions, so "previous segment not captured" alone proves
    nothing; instead every stream direction must be covered without holes.
    """
    def rows(*args: str) -> list[list[str]]:
        out = subprocess.run(["tshark", "-r", str(pcap), *args], capture_output=True, text=True,
                             check=False).stdout
        return [line.split("\t") for line in out.splitlines()]
    segs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    max_len = 0
    for frame_len, stream, sport, seq, length, syn, fin in rows(
            "-T", "fields", "-e", "frame.len", "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.seq",
            "-e", "tcp.len", "-e", "tcp.flags.syn", "-e", "tcp.flags.fin"):
        max_len = max(max_len, int(frame_len))
        if seq:  # SYN and FIN each use one sequence number
            n = int(length) + (syn in ("1", "True")) + (fin in ("1", "True"))
            segs.setdefault((stream, sport), []).append((int(seq), n))
    holes = 0
    for ranges in segs.values():
        ranges.sort()
        end = ranges[0][0]
        for start, n in ranges:
            holes += start > end
            end = max(end, start + n)
    decode = [a for p in ports for a in ("-d", f"tcp.port=={p},kafka")]
    pdus = rows(*decode, "-Y", "kafka", "-T", "fields", "-e", "frame.number")
    msg = f"max frame {max_len} B, {len(segs) // 2} TCP streams, {len(pdus)} kafka frames, {holes} holes"
    if max_len > 1514 or holes:
        msg += "  <-- CHECK"
    return msg


def summary(out_dir: Path) -> None:
    """Request API/version counts per sample, via tshark (rough: 4.0 misdecodes new versions)."""
    for exp in sorted(out_dir.glob("*.expected.json")):
        meta = json.loads(exp.read_text())
        args = []
        for port in meta["broker"]["ports"]:
            args += ["-d", f"tcp.port=={port},kafka"]
        out = subprocess.run(["tshark", "-r", str(out_dir / meta["pcap"]), *args, "-Y", "kafka",
                              "-T", "fields", "-e", "_ws.col.Info"], capture_output=True, text=True,
                             check=False).stdout
        counts = Counter(re.findall(r"Kafka (\w+) v(\d+) Request", out))
        apis = ", ".join(f"{api} v{v}" + (f" x{n}" if n > 1 else "") for (api, v), n in sorted(counts.items()))
        print(f"{meta['sample']}: {apis}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--summary", action="store_true", help="print tshark API/version counts of recorded samples")
    ap.add_argument("--client", help=argparse.SUPPRESS)      # child mode, inside the netns
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--member", help=argparse.SUPPRESS)      # one group member process (group-rebalance)
    args = ap.parse_args()
    if args.member:
        run_member(json.loads(args.member))
        return
    if args.client:
        run_client(args.client, args.bootstrap, args.result)
        return
    if args.list:
        print("\n".join(SCENARIOS))
        return
    out_dir = Path(args.out)
    if args.summary:
        summary(out_dir)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    out_dir.mkdir(parents=True, exist_ok=True)
    record_scenarios(SCENARIOS, args.only, lambda name: record(name, out_dir))


if __name__ == "__main__":
    main()
