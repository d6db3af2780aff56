"""Real Kafka clients for the live-capture tests: librdkafka producers and a consumer group.

Run as a script (``python tests/live_clients.py BOOTSTRAP TOPIC ...``) so a test can
start it inside a network namespace. Prints one JSON line: the delivery reports per
partition and what the consumer group read. Not a test module.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--messages", type=int, default=2000, help="per producer")
    p.add_argument("--size", type=int, default=100, help="value bytes")
    p.add_argument("--linger", type=float, default=5)
    p.add_argument("--consume", action="store_true", help="then read everything with a consumer group")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()

    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for f in admin.create_topics([NewTopic(a.topic, a.partitions, 1)], request_timeout=15).values():
        f.result(timeout=30)
    delivered: dict[int, int] = {}
    failed = 0

    def report(err: object, msg: object) -> None:
        nonlocal failed
        if err is None:
            part = msg.partition()  # type: ignore[attr-defined]
            delivered[part] = delivered.get(part, 0) + 1
        else:
            failed += 1

    producers = [Producer({"bootstrap.servers": a.bootstrap, "client.id": f"kd-live-p{i}",
                           "linger.ms": a.linger, "acks": "all", "message.max.bytes": 8 << 20,
                           "batch.size": 4 << 20})
                 for i in range(a.producers)]
    value = bytes(range(256)) * (a.size // 256 + 1)
    for n in range(a.messages):
        for i, prod in enumerate(producers):
            v = value[(n + i) % 256:][:a.size]
            while True:
                try:
                    prod.produce(a.topic, key=f"k{n % 97}".encode(), value=v, on_delivery=report)
                    break
                except BufferError:
                    prod.poll(0.05)
            prod.poll(0)
    for prod in producers:
        if prod.flush(a.timeout):
            print("producer did not flush", file=sys.stderr)
            return 1
    del producers
    consumed = 0
    if a.consume:
        want = sum(delivered.values())
        c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"kd-live-{a.topic}",
                      "client.id": "kd-live-c", "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      # tansu holds a JoinGroup for a share of the rebalance timeout: keep it short
                      "session.timeout.ms": 6000, "max.poll.interval.ms": 6000, "fetch.wait.max.ms": 50})
        # A partition without a committed offset starts at 0, asked for explicitly: tansu answers "earliest"
        # (ListOffsets -2) with the offset of the oldest record timestamp, which two producers can place
        # after offset 0 (seen: 346 of 1058), and the consumer then never reads what lies before it.
        def from_zero(consumer: Consumer, parts: list) -> None:
            committed = consumer.committed(parts, timeout=10)
            for tp, done in zip(parts, committed, strict=True):
                tp.offset = done.offset if done.offset >= 0 else 0
            consumer.assign(parts)

        c.subscribe([a.topic], on_assign=from_zero)
        # A rebalance on a loaded machine can hold the group for a while: give up only after a.timeout
        # without a message (or at a hard cap under the tests' 180 s), and say why on stderr.
        start = progress = time.monotonic()
        while consumed < want and time.monotonic() - progress < a.timeout and time.monotonic() - start < 150:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    consumed += 1
                    progress = time.monotonic()
                else:
                    print(f"consumer: {m.error()}", file=sys.stderr)
        if consumed < want:
            print(f"consumer read {consumed} of {want} in {time.monotonic() - start:.0f} s; assignment "
                  f"{[(t.partition, t.offset) for t in c.position(c.assignment())]}", file=sys.stderr)
        c.close()
    print(json.dumps({"delivered": delivered, "failed": failed, "consumed": consumed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
