"""Decoded exchanges -> counters, histograms and gauges (the state behind every exporter).

The fold reads the rows :mod:`kdissect.dataset.rows` has just built (the exchange's row and its
partition rows, in the tables' column order) and, for the few apis whose request or
response fields the tables keep only as JSON (Fetch's ``max_wait_ms``, group ids,
generations), the decoded bodies. So the figures follow the dataset's own columns, and
the same fold runs over rows read back from Parquet (``kdissect decode --metrics-out``).

Rules shared with the analysis (``analysis/jobs/latency.py``, ``analysis/jobs/lag.py``,
``analysis/jobs/throughput.py``, ``analysis/jobs/groups.py``), here in streaming form:

* latency leaves out acks=0 Produce (no response) and idle Fetch long-polls: no records in
  the response and a wait of at least 0.9 of the request's ``max_wait_ms``;
* produced records count Produce request partitions the response accepted (error 0), and
  every partition of acks=0 requests;
* consumer lag per (group, topic, partition) is the latest high watermark seen (Fetch
  responses, ListOffsets responses to a LATEST query) minus the group's latest accepted
  commit, else the latest fetch position of a consumer that joined, heartbeated or
  committed for the group; "latest" is by capture time. Consumers outside any group have
  no lag series (the ``consumer_lag`` table lists them per client id).
* share groups (KIP-932): records acquired, redelivered and acknowledged by type, and
  members, as the ``share_deliveries`` and ``share_groups`` tables count them
  (:mod:`kdissect.metrics.shares`).

Cardinality: every metric holds at most ``max_series`` series. A new label combination
past that is added to the metric's series whose labels are all ``other`` (counted in
``kdissect_metric_series_folded_total``). Offsets and correlation ids are never labels.

Threads: the decoding thread calls :meth:`MetricsFold.exchange` and friends; exporters
call :meth:`MetricsFold.families` from theirs. No lock: the decoding thread only adds
to dicts, sets and lists, and :meth:`families` works on copies taken in single C calls
(``dict(d)``, ``tuple(s)``), which the interpreter does not interleave with other threads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kdissect.metrics import catalog as C
from kdissect.metrics.shares import SHARE_APIS, ShareFold
from kdissect.dataset.tables import COLUMNS

# api keys (Kafka's, which 0.7's requests map onto: see dissector/v07/wire.py)
PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 0, 1, 2, 8, 11, 12, 13, 14
TXN_OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 28, 68
# The apis whose bodies the fold reads (the tables hold them as JSON only).
BODY_APIS = frozenset({FETCH, LIST_OFFSETS, OFFSET_COMMIT, TXN_OFFSET_COMMIT, JOIN_GROUP, HEARTBEAT, SYNC_GROUP,
                       CONSUMER_GROUP_HEARTBEAT}) | SHARE_APIS
_MEMBER_APIS = frozenset({JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT})
_PARTITION_APIS = frozenset({PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, TXN_OFFSET_COMMIT})
LATEST = -1                    # ListOffsets timestamp asking for the log end
IDLE_FRACTION = 0.9            # analysis.options' default
MAX_STATE = 200_000            # entries per piece of lag/group state: hostile traffic cannot grow it further
DEFAULT_MAX_SERIES = 1000

_E = {n: i for i, n in enumerate(COLUMNS["exchanges"])}
_P = {n: i for i, n in enumerate(COLUMNS["partitions"])}
_P_BYTES = _P["bytes"]
_P_DIRECTION = _P["direction"]
_P_ERROR_CODE = _P["error_code"]
_P_HIGH_WATERMARK = _P["high_watermark"]
_P_OFFSET = _P["offset"]
_P_PARTITION = _P["partition"]
_P_RECORD_COUNT = _P["record_count"]
_P_TOPIC = _P["topic"]
_P_TOPIC_ID = _P["topic_id"]
_P_TS = _P["ts"]
# exchange() and _produce() unpack the columns by position, as rows.py fills them.
assert COLUMNS["exchanges"][4:6] == ("broker_ip", "broker_port") and COLUMNS["exchanges"][9:12] == (
    "api_key", "api_name", "api_version") and COLUMNS["exchanges"][14] == "client_id" and COLUMNS["exchanges"][
    17] == "latency_ms" and COLUMNS["exchanges"][20:24] == ("error_code", "error_name", "throttle_ms", "status") \
    and len(COLUMNS["exchanges"]) == 28, "the exchanges columns moved: update MetricsFold.exchange"
assert COLUMNS["partitions"][6:16] == ("direction", "ts", "topic", "topic_id", "partition", "error_code",
                                       "error_name", "record_count", "batch_count", "bytes") \
    and len(COLUMNS["partitions"]) == 22, "the partitions columns moved: update MetricsFold._produce"
_NB = len(C.BUCKETS)
_BUCKETS = C.BUCKETS
_VERSIONS = tuple(str(v) for v in range(256))


@dataclass(frozen=True, slots=True)
class Health:
    """The capture's own figures, read when metrics are collected."""

    packets: int = 0
    kernel_drops: int = 0
    spool_drops: int = 0
    backlog: int = 0


@dataclass(frozen=True, slots=True)
class Family:
    """One metric's samples: (label values, value); histograms: (label values, (bucket counts..., sum))."""

    metric: C.Metric
    samples: list[tuple[tuple[str, ...], Any]]


class MetricsFold:
    def __init__(self, max_series: int = DEFAULT_MAX_SERIES, idle_fraction: float = IDLE_FRACTION) -> None:
        if max_series < 1:
            raise ValueError("max_series must be at least 1")
        self.max_series = max_series
        self.idle_fraction = idle_fraction
        self.health: Callable[[], Health] = Health
        self.latencies: deque | None = None              # (key, seconds) for the OTLP histogram, when exported
        self.requests: dict[tuple, int] = {}
        self.durations: dict[tuple, list] = {}        # (api, broker) -> [count per bucket ..., +Inf, sum]
        # (topic, client id) -> [records, bytes]: one look-up per partition for both counters
        self.produced: dict[tuple, list] = {}
        self.fetched: dict[tuple, list] = {}
        self.throttle: dict[tuple, float] = {}
        self.rebalances: dict[tuple, int] = {}
        self.anomalies: dict[tuple, int] = {}
        self.folded: dict[tuple, int] = {}
        # state behind the gauges
        self.commits: dict[tuple, tuple[int, int]] = {}      # (group, topic, partition) -> (offset, ts)
        self.positions: dict[tuple, tuple[int, int]] = {}    # (client, topic, partition) -> (offset, ts)
        self.watermarks: dict[tuple, tuple[int, int]] = {}   # (topic, partition) -> (high watermark, ts)
        self.client_groups: dict[str, set[str]] = {}
        self.generations: dict[str, set[int]] = {}           # classic generations / KIP-848 member epochs
        self.classic_members: dict[str, tuple[int, set[str]]] = {}   # group -> (latest generation, members)
        self.kip848_members: dict[str, dict[str, int]] = {}  # group -> member id -> epoch
        self.open: dict[str, str] = {}                       # connection id -> broker, until it ends
        self.shares = ShareFold(self, MAX_STATE)             # share groups (KIP-932)
        self._gauges: dict[str, set[tuple]] = {}             # series each gauge admitted, in first-seen order

    # -- the decoding thread ------------------------------------------------------------------

    def _admit(self, d: dict, key: tuple, metric: C.Metric) -> tuple:
        """``key``, or the metric's all-``other`` key once ``d`` holds ``max_series`` series."""
        if len(d) < self.max_series:
            return key
        f = self.folded
        fk = (metric.name,)
        f[fk] = f.get(fk, 0) + 1
        return (C.OTHER,) * len(key)

    def _add(self, d: dict, key: tuple, n: Any, metric: C.Metric) -> None:
        v = d.get(key)
        if v is None:
            key = self._admit(d, key, metric)
            d[key] = d.get(key, 0) + n
        else:
            d[key] = v + n

    def bodies(self, source: Any) -> tuple[Any, Any]:
        """(request body, response body) of an exchange: live, the dissector's ``Exchange``."""
        req, resp = source.request, source.response
        return (req.body if req is not None else None), (resp.body if resp is not None else None)

    def exchange(self, ex: Sequence[list], i: int, pa: Sequence[list], p0: int, p1: int, source: Any) -> None:
        """Row ``i`` of the exchanges columns ``ex``, with its partition rows ``p0:p1`` of ``pa``;
        ``source`` gives the bodies (:meth:`bodies`) when the api needs them."""
        # Unpacked as rows.py fills them (compiled: one C unpack, then C list reads; the columns
        # not read here are never indexed).
        (_capture, connection, _cip, _cport, broker_ip, broker_port, _tv, _tc, _ts, a_key, a_name, a_version,
         _protocol, _corr, client_id, _req_ts, _resp_ts, latency_ms, _rb, _sb, error_code, error_name, throttle_ms,
         a_status, _err, _request, _response, _inferred) = ex
        api_key = a_key[i]
        api = a_name[i] or "unknown"
        version = a_version[i]
        client = client_id[i]
        conn = connection[i]
        broker = self.open.get(conn)
        if broker is None:
            broker = f"{broker_ip[i]}:{broker_port[i]}"
            if len(self.open) < MAX_STATE:
                self.open[conn] = broker
        code = error_code[i]
        if code:
            error = error_name[i] or str(code)
        else:
            error = "NONE"
        client_l = client if client is not None else ""
        if version is None:
            v = ""
        elif 0 <= version < 256:
            v = _VERSIONS[version]
        else:
            v = str(version)
        key = (api, v, client_l, broker, error)
        requests = self.requests
        n = requests.get(key)
        if n is None:
            self._add(requests, key, 1, C.REQUESTS)
        else:
            requests[key] = n + 1
        throttle = throttle_ms[i]
        if throttle:
            self._add(self.throttle, (api, client_l), throttle / 1000.0, C.THROTTLE)
        status = a_status[i]
        request = response = None
        if api_key in BODY_APIS:
            request, response = self.bodies(source)
        latency = latency_ms[i]
        if latency is not None and status != "no_response_expected":
            if not (api_key == FETCH and self._idle(latency, request, pa, p0, p1)):
                key = (api, broker)
                durations = self.durations
                h = durations.get(key)
                if h is None or self.latencies is not None:
                    self._observe(key, latency / 1000.0)
                else:
                    seconds = latency / 1000.0
                    h[_bucket(seconds)] += 1
                    h[_NB + 1] += seconds
        if p1 > p0:
            if api_key == PRODUCE:
                self._produce(client_l, status, pa, p0, p1)
            elif api_key in _PARTITION_APIS:
                self._partitions(api_key, client, client_l, status, request, pa, p0, p1)
        if api_key in _MEMBER_APIS and request is not None:
            self._groups(api_key, client, code, request, response)
        elif api_key in SHARE_APIS:
            self.shares.exchange(api_key, client_l, request, response, pa, p0, p1)

    def _produce(self, client_l: str, status: str, pa: Sequence[list], p0: int, p1: int) -> None:
        """Records and bytes of the partitions the broker accepted (or of acks=0 requests)."""
        (_capture, _connection, _corr, _key, _name, _version, direction, _ts, topic, topic_id, partition,
         error, _error_name, count, _batches, size, _offset, _base, _last, _hw, _codec, _client) = pa
        acks0 = status == "no_response_expected"
        if p1 - p0 == 2 and not acks0:
            r = p0 + 1
            if (direction[p0] == "request" and direction[r] == "response" and topic[p0] == topic[r]
                    and topic_id[p0] == topic_id[r] and partition[p0] == partition[r]):
                # The usual Produce: one partition, its request row then its response row.
                if error[r] == 0:
                    t = topic[p0] if topic[p0] is not None else topic_id[p0]
                    self._produced((t if t is not None else "", client_l), count[p0] or 0, size[p0] or 0)
                return
        answers = {}
        for j in range(p0, p1):
            if direction[j] == "response":
                answers[(topic[j] if topic[j] is not None else topic_id[j], partition[j])] = error[j]
        for j in range(p0, p1):
            if direction[j] == "request":
                t = topic[j] if topic[j] is not None else topic_id[j]
                if acks0 or answers.get((t, partition[j])) == 0:
                    self._produced((t if t is not None else "", client_l), count[j] or 0, size[j] or 0)

    def _produced(self, label: tuple, records: int, nbytes: int) -> None:
        self._flow(self.produced, label, records, nbytes, C.PRODUCED_RECORDS, C.PRODUCED_BYTES)

    def _flow(self, d: dict, label: tuple, records: int, nbytes: int, metric: C.Metric, metric_bytes: C.Metric) -> None:
        """Records and bytes of one (topic, client id), in one series of both metrics."""
        v = d.get(label)
        if v is None:
            key = self._admit(d, label, metric)
            if key is not label:
                self._admit(d, label, metric_bytes)     # counted as folded for both metrics
            v = d.get(key)
            if v is None:
                v = d[key] = [0, 0]
        v[0] += records
        v[1] += nbytes

    @property
    def produced_records(self) -> dict[tuple, int]:
        return {k: v[0] for k, v in list(self.produced.items())}

    @property
    def produced_bytes(self) -> dict[tuple, int]:
        return {k: v[1] for k, v in list(self.produced.items())}

    @property
    def fetched_records(self) -> dict[tuple, int]:
        return {k: v[0] for k, v in list(self.fetched.items())}

    @property
    def fetched_bytes(self) -> dict[tuple, int]:
        return {k: v[1] for k, v in list(self.fetched.items())}

    def _idle(self, latency: float, request: Any, pa: Sequence[list], p0: int, p1: int) -> bool:
        if request is None:
            return False
        wait = request.get("max_wait_ms")
        if not isinstance(wait, int) or wait <= 0 or latency < wait * self.idle_fraction:
            return False
        direction, count = pa[_P_DIRECTION], pa[_P_RECORD_COUNT]
        for j in range(p0, p1):
            if direction[j] == "response" and count[j]:
                return False
        return True

    def _observe(self, key: tuple, seconds: float) -> None:
        d = self.durations
        h = d.get(key)
        if h is None:
            key = self._admit(d, key, C.DURATION)
            h = d.get(key)
            if h is None:
                h = d[key] = [0] * (_NB + 1) + [0.0]
        h[_bucket(seconds)] += 1
        h[_NB + 1] += seconds
        if self.latencies is not None:
            self.latencies.append((key, seconds))

    def _partitions(self, api_key: int, client: str | None, client_l: str, status: str, request: Any,
                    pa: Sequence[list], p0: int, p1: int) -> None:
        direction, topic, topic_id, partition = pa[_P_DIRECTION], pa[_P_TOPIC], pa[_P_TOPIC_ID], \
            pa[_P_PARTITION]
        error, count, size, offset, ts = pa[_P_ERROR_CODE], pa[_P_RECORD_COUNT], pa[_P_BYTES], \
            pa[_P_OFFSET], pa[_P_TS]
        if api_key == FETCH:
            consumer = _replica(request) < 0
            for j in range(p0, p1):
                t = topic[j] if topic[j] is not None else topic_id[j]
                if direction[j] == "response":
                    label = (t if t is not None else "", client_l)
                    self._flow(self.fetched, label, count[j] or 0, size[j] or 0, C.FETCHED_RECORDS,
                               C.FETCHED_BYTES)
                    hw = pa[_P_HIGH_WATERMARK][j]
                    if hw is not None and hw >= 0:
                        _latest(self.watermarks, (t, partition[j]), hw, ts[j])
                elif consumer and offset[j] is not None and offset[j] >= 0:
                    _latest(self.positions, (client, t, partition[j]), offset[j], ts[j])
            return
        answers: dict[tuple, Any] = {}
        for j in range(p0, p1):
            if direction[j] == "response":
                answers[(topic[j] if topic[j] is not None else topic_id[j], partition[j])] = error[j]
        if api_key == LIST_OFFSETS:
            if request is None:
                return
            asked = set()
            for tp in request.get("topics") or ():
                for p in tp.get("partitions") or ():
                    if p.get("timestamp") == LATEST:
                        asked.add((tp.get("name"), p.get("partition_index")))
            for j in range(p0, p1):
                if direction[j] == "response" and error[j] == 0 and offset[j] is not None and offset[j] >= 0:
                    t = topic[j] if topic[j] is not None else topic_id[j]
                    if (t, partition[j]) in asked:
                        _latest(self.watermarks, (t, partition[j]), offset[j], ts[j])
        elif request is not None:       # OffsetCommit, TxnOffsetCommit
            group = request.get("group_id")
            for j in range(p0, p1):
                if direction[j] == "request" and offset[j] is not None and offset[j] >= 0:
                    t = topic[j] if topic[j] is not None else topic_id[j]
                    if answers.get((t, partition[j])) == 0:
                        _latest(self.commits, (group, t, partition[j]), offset[j], ts[j])

    def _groups(self, api_key: int, client: str | None, code: Any, request: dict, response: Any) -> None:
        group = request.get("group_id")
        if not group:
            return
        if client is not None:
            groups = self.client_groups.get(client)
            if groups is None:
                if len(self.client_groups) < MAX_STATE:
                    self.client_groups[client] = {group}
            elif group not in groups and len(groups) < 1000:
                groups.add(group)
        if code or not isinstance(response, dict):
            if api_key == CONSUMER_GROUP_HEARTBEAT and request.get("member_epoch") == -1:
                self.kip848_members.get(group, {}).pop(request.get("member_id"), None)   # left
            return
        if api_key == JOIN_GROUP:
            generation, member = response.get("generation_id"), response.get("member_id")
            if not isinstance(generation, int):
                return
            self._generation(group, generation)
            latest = self.classic_members.get(group)
            if latest is None or generation > latest[0]:
                if latest is not None or len(self.classic_members) < MAX_STATE:
                    self.classic_members[group] = (generation, {member})
            elif generation == latest[0] and len(latest[1]) < MAX_STATE:
                latest[1].add(member)
        elif api_key == CONSUMER_GROUP_HEARTBEAT:
            epoch, member = response.get("member_epoch"), response.get("member_id")
            members = self.kip848_members.get(group)
            if request.get("member_epoch") == -1:           # a member leaving
                if members is not None:
                    members.pop(request.get("member_id"), None)
                return
            if not isinstance(epoch, int) or epoch <= 0:
                return
            self._generation(group, epoch)
            if members is None:
                if len(self.kip848_members) >= MAX_STATE:
                    return
                members = self.kip848_members[group] = {}
            if member in members or len(members) < MAX_STATE:
                members[member] = epoch

    def _generation(self, group: str, generation: int) -> None:
        seen = self.generations.get(group)
        if seen is None:
            if len(self.generations) >= MAX_STATE:
                return
            seen = self.generations[group] = set()
        if generation not in seen and len(seen) < MAX_STATE:
            seen.add(generation)
            self._add(self.rebalances, (group,), 1, C.REBALANCES)

    def anomaly(self, kind: str) -> None:
        self._add(self.anomalies, (kind,), 1, C.ANOMALIES)

    def connection_end(self, conn: str) -> None:
        self.open.pop(conn, None)

    def close_all(self) -> None:
        """The capture is over: no connection is open any more."""
        self.open.clear()

    # -- exporters' threads --------------------------------------------------------------------

    def lag(self) -> dict[tuple, int]:
        """(group, topic, partition) -> lag, as ``analysis.derived.consumer_lag`` computes it for groups."""
        groups = {c: tuple(g) for c, g in list(self.client_groups.items())}
        position: dict[tuple, tuple[int, int]] = {}
        for (client, t, p), (off, ts) in list(self.positions.items()):
            for g in groups.get(client, ()):
                _latest(position, (g, t, p), off, ts)
        commits = dict(self.commits)
        watermarks = dict(self.watermarks)
        out = {}
        for key in {**position, **commits}:
            hw = watermarks.get(key[1:])
            if hw is None or key[0] is None:
                continue
            basis = commits.get(key) or position[key]
            out[key] = max(hw[0] - basis[0], 0)
        return out

    def members(self) -> dict[tuple, int]:
        out = {(g, ): len(tuple(m[1])) for g, m in list(self.classic_members.items())}
        for g, m in list(self.kip848_members.items()):
            if (g,) not in out:
                out[(g,)] = len(dict(m))
        return out

    def connections(self) -> dict[tuple, int]:
        out: dict[tuple, int] = {}
        for broker in list(self.open.values()):
            out[(broker,)] = out.get((broker,), 0) + 1
        return out

    def _gauge(self, metric: C.Metric, values: dict[tuple, Any]) -> list[tuple[tuple[str, ...], Any]]:
        """Gauge series within the limit (first seen, first kept); the rest summed into ``other``."""
        admitted = self._gauges.setdefault(metric.name, set())
        samples, other = [], None
        for key in sorted(values, key=_sort_key):
            if key not in admitted and len(admitted) < self.max_series:
                admitted.add(key)
            if key in admitted:
                samples.append((tuple(map(str, key)), values[key]))
            else:
                other = (other or 0) + values[key]
        if other is not None:
            samples.append(((C.OTHER,) * len(metric.labels), other))
        return samples

    def families(self) -> list[Family]:
        """Every metric's samples now."""
        h = self.health()

        def counter(metric: C.Metric, d: dict) -> Family:
            return Family(metric, [(k, v) for k, v in list(d.items())])

        durations = [(k, tuple(v)) for k, v in list(self.durations.items())]
        shares = self.shares
        return [
            counter(C.REQUESTS, self.requests),
            Family(C.DURATION, durations),
            counter(C.PRODUCED_RECORDS, self.produced_records),
            counter(C.PRODUCED_BYTES, self.produced_bytes),
            counter(C.FETCHED_RECORDS, self.fetched_records),
            counter(C.FETCHED_BYTES, self.fetched_bytes),
            Family(C.LAG, self._gauge(C.LAG, self.lag())),
            counter(C.REBALANCES, self.rebalances),
            Family(C.MEMBERS, self._gauge(C.MEMBERS, self.members())),
            counter(C.SHARE_ACQUIRED, shares.acquired_records()),
            counter(C.SHARE_REDELIVERED, shares.redelivered_records()),
            counter(C.SHARE_ACKNOWLEDGED, shares.acknowledged),
            Family(C.SHARE_MEMBERS, self._gauge(C.SHARE_MEMBERS, shares.group_members())),
            counter(C.THROTTLE, self.throttle),
            Family(C.CONNECTIONS, self._gauge(C.CONNECTIONS, self.connections())),
            Family(C.PACKETS, [((), h.packets)]),
            Family(C.DROPPED, [(("kernel",), h.kernel_drops), (("spool",), h.spool_drops)]),
            Family(C.BACKLOG, [((), h.backlog)]),
            counter(C.ANOMALIES, self.anomalies),
            counter(C.FOLDED, self.folded),
        ]


def _bucket(seconds: float) -> int:
    """The index of the first bucket bound at or above ``seconds`` (Prometheus' ``le``); past the last: +Inf."""
    k = 0
    for bound in _BUCKETS:
        if seconds <= bound:
            return k
        k += 1
    return k


def _latest(d: dict, key: tuple, value: int, ts: Any) -> None:
    """Keep the value seen at the latest capture time (the later one on a tie, as rows arrive in order)."""
    old = d.get(key)
    if old is None:
        if len(d) < MAX_STATE:
            d[key] = (value, ts)
    elif ts is not None and (old[1] is None or ts >= old[1]):
        d[key] = (value, ts)


def _replica(request: Any) -> int:
    """A Fetch request's replica id: -1 (or below) for consumers, a broker id for followers."""
    if not isinstance(request, dict):
        return -1
    r = request.get("replica_id")
    if isinstance(r, int):
        return r
    state = request.get("replica_state")
    if isinstance(state, dict) and isinstance(state.get("replica_id"), int):
        return state["replica_id"]
    return -1


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)
