"""Throughput of the dissector alone on real captured Kafka traffic.

    python benchmarks/bench_dissector.py [CAPTURE ...] [--repeat N]

Defaults to the captures ``benchmarks/make_capture.py`` writes
(``benchmarks/data/many-small-produce.pcap``, ``large-batches.pcap``). The
capture front end runs once, untimed, recording what it would feed each
connection; that is then replayed into fresh dissector connections and timed,
so the figures are the dissector's own: exchanges/s and MB/s of Kafka frames.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capture import CaptureOptions, open_capture  # noqa: E402
from capture.pipeline import Pipeline  # noqa: E402
from dissector.connection import Connection  # noqa: E402
from dissector.events import Exchange  # noqa: E402
from dissector.topics import TopicRegistry  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
DEFAULTS = [DATA / "many-small-produce.pcap", DATA / "large-batches.pcap"]


class _Recorder:
    """Stands in for a Connection during the untimed pass and logs every call."""

    def __init__(self, log: list, index: int, mid_stream: bool) -> None:
        self.log, self.index = log, index
        log.append((index, "open", mid_stream, None, None))

    def feed(self, direction, data, ts):
        self.log.append((self.index, "feed", direction, data, ts))
        return []

    def gap(self, direction, ts, nbytes):
        self.log.append((self.index, "gap", direction, nbytes, ts))
        return []

    def close(self, ts):
        self.log.append((self.index, "close", None, None, ts))
        return []


def record(path: Path) -> list:
    log: list = []
    counter = iter(range(1 << 30))
    pipeline = Pipeline(CaptureOptions(), connection_factory=lambda mid: _Recorder(log, next(counter), mid))
    source = open_capture(str(path))
    try:
        for _ in pipeline.run(source):
            pass
    finally:
        source.close()
    return log


def replay(log: list) -> tuple[int, int, float]:
    topics = TopicRegistry()
    conns: dict[int, Connection] = {}
    exchanges = 0
    nbytes = 0
    start = time.perf_counter()
    for index, op, direction, data, ts in log:
        if op == "feed":
            nbytes += len(data)
            events = conns[index].feed(direction, data, ts)
        elif op == "open":
            conns[index] = Connection(topics=topics, mid_stream=direction)
            continue
        elif op == "gap":
            events = conns[index].gap(direction, ts, data)
        else:
            events = conns.pop(index).close(ts)
        for ev in events:
            if type(ev) is Exchange:
                exchanges += 1
    return exchanges, nbytes, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="*", type=Path, default=DEFAULTS)
    parser.add_argument("--repeat", type=int, default=3, help="replays per capture; the best is reported")
    args = parser.parse_args()
    missing = [p for p in args.captures if not p.exists()]
    if missing:
        print(f"missing {', '.join(map(str, missing))}: run `sudo python benchmarks/make_capture.py` first",
              file=sys.stderr)
        return 2
    print(f"{'capture':<28} {'exchanges':>10} {'MB':>8} {'seconds':>8} {'exch/s':>10} {'MB/s':>7}")
    for path in args.captures:
        log = record(path)
        best = None
        for _ in range(args.repeat):
            result = replay(log)
            if best is None or result[2] < best[2]:
                best = result
        exchanges, nbytes, seconds = best  # type: ignore[misc]
        print(f"{path.name:<28} {exchanges:>10,} {nbytes / 1e6:>8.1f} {seconds:>8.2f} "
              f"{exchanges / seconds:>10,.0f} {nbytes / 1e6 / seconds:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
