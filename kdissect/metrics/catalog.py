"""The metrics kdissect exports: names, kinds, labels and help, declared once.

The Prometheus collector, the OTLP exporter and the README's metric table all read
this list. ``otel`` is the OpenTelemetry instrument name and unit, by the messaging
semantic conventions where they define one; ``attrs`` maps each label to its
OpenTelemetry attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

# Latency buckets in seconds: 100 µs to 30 s, 1-2.5-5 per decade.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5, 5.0, 10.0, 30.0)

# Labels that come from the traffic (any client can name a new topic or client id): only these
# are folded into OTHER past --metrics-max-series; the others take values from the protocol.
OTHER = "other"


@dataclass(frozen=True, slots=True)
class Metric:
    name: str                      # Prometheus name (counters without their _total: the library adds it)
    kind: str
    labels: tuple[str, ...]
    help: str
    otel: str                      # OpenTelemetry instrument name
    unit: str                      # UCUM unit for OpenTelemetry
    attrs: tuple[str, ...]         # OpenTelemetry attribute of each label, in order

    @property
    def exposed(self) -> str:
        """The name as Prometheus shows it (counters end in ``_total``)."""
        return f"{self.name}_total" if self.kind == COUNTER else self.name


_OP, _DEST, _PART, _GROUP, _CLIENT, _ERR = ("messaging.operation.name", "messaging.destination.name",
                                            "messaging.destination.partition.id", "messaging.consumer.group.name",
                                            "messaging.client.id", "error.type")

REQUESTS = Metric("kafka_requests", COUNTER, ("api", "api_version", "client_id", "broker", "error"),
                  "Kafka requests (exchanges) decoded; error is the response's error name, NONE for success",
                  "kafka.client.requests", "{request}", (_OP, "kafka.api.version", _CLIENT, "server.address", _ERR))
DURATION = Metric("kafka_request_duration_seconds", HISTOGRAM, ("api", "broker"),
                  "Request latency (response first byte minus request last byte); idle Fetch long-polls and "
                  "acks=0 Produce left out", "messaging.client.operation.duration", "s", (_OP, "server.address"))
PRODUCED_RECORDS = Metric("kafka_produced_records", COUNTER, ("topic", "client_id"),
                          "Records of Produce requests the broker accepted (and of acks=0 requests)",
                          "messaging.client.sent.messages", "{message}", (_DEST, _CLIENT))
PRODUCED_BYTES = Metric("kafka_produced_bytes", COUNTER, ("topic", "client_id"),
                        "Record batch bytes of Produce requests the broker accepted (and of acks=0 requests)",
                        "kafka.client.sent.bytes", "By", (_DEST, _CLIENT))
FETCHED_RECORDS = Metric("kafka_fetched_records", COUNTER, ("topic", "client_id"),
                         "Records carried by Fetch responses", "messaging.client.consumed.messages",
                         "{message}", (_DEST, _CLIENT))
FETCHED_BYTES = Metric("kafka_fetched_bytes", COUNTER, ("topic", "client_id"),
                       "Record batch bytes carried by Fetch responses", "kafka.client.consumed.bytes", "By",
                       (_DEST, _CLIENT))
LAG = Metric("kafka_consumer_lag_records", GAUGE, ("group", "topic", "partition"),
             "High watermark seen minus the group's latest committed offset (else its latest fetch position), "
             "as the consumer_lag table computes it", "kafka.consumer.lag", "{message}", (_GROUP, _DEST, _PART))
REBALANCES = Metric("kafka_group_rebalances", COUNTER, ("group",),
                    "Group generations formed (successful JoinGroup into a new generation; KIP-848: new member "
                    "epochs)", "kafka.consumer_group.rebalances", "{rebalance}", (_GROUP,))
MEMBERS = Metric("kafka_group_members", GAUGE, ("group",),
                 "Members of the group's latest generation (KIP-848: members heartbeating and not left)",
                 "kafka.consumer_group.members", "{member}", (_GROUP,))
SHARE_ACQUIRED = Metric("kafka_share_acquired_records", COUNTER, ("group", "topic", "client_id"),
                        "Records share consumers acquired (KIP-932): the acquired ranges of ShareFetch responses",
                        "kafka.share_group.acquired.messages", "{message}", (_GROUP, _DEST, _CLIENT))
SHARE_REDELIVERED = Metric("kafka_share_redelivered_records", COUNTER, ("group", "topic", "client_id"),
                           "Records share consumers acquired with a delivery count above 1 (delivered again)",
                           "kafka.share_group.redelivered.messages", "{message}", (_GROUP, _DEST, _CLIENT))
SHARE_ACKNOWLEDGED = Metric("kafka_share_acknowledged_records", COUNTER, ("group", "topic", "client_id", "type"),
                            "Records share consumers acknowledged, by type (accept, release, reject): the "
                            "acknowledgement batches of ShareFetch and ShareAcknowledge requests",
                            "kafka.share_group.acknowledged.messages", "{message}",
                            (_GROUP, _DEST, _CLIENT, "kafka.share_group.acknowledge.type"))
SHARE_MEMBERS = Metric("kafka_share_group_members", GAUGE, ("group",),
                       "Members of the share group seen heartbeating (ShareGroupHeartbeat) and not leaving",
                       "kafka.share_group.members", "{member}", (_GROUP,))
THROTTLE = Metric("kafka_throttle_seconds", COUNTER, ("api", "client_id"),
                  "Throttle time brokers asked of clients in responses", "kafka.client.throttle.time", "s",
                  (_OP, _CLIENT))
CONNECTIONS = Metric("kafka_connections", GAUGE, ("broker",), "Kafka connections open (seen and not closed)",
                     "kafka.client.connections", "{connection}", ("server.address",))
PACKETS = Metric("kdissect_packets", COUNTER, (), "Packets captured", "kdissect.capture.packets", "{packet}", ())
DROPPED = Metric("kdissect_dropped_packets", COUNTER, ("where",),
                 "Packets lost before decoding: where=kernel (capture fell behind), spool (spool full)",
                 "kdissect.capture.dropped", "{packet}", ("kdissect.where",))
BACKLOG = Metric("kdissect_spool_backlog_bytes", GAUGE, (), "Captured bytes spooled, not yet decoded",
                 "kdissect.spool.backlog", "By", ())
ANOMALIES = Metric("kdissect_anomalies", COUNTER, ("kind",), "Rows of the anomalies table, by kind",
                   "kdissect.anomalies", "{anomaly}", ("kdissect.anomaly.kind",))
FOLDED = Metric("kdissect_metric_series_folded", COUNTER, ("metric",),
                "Updates added to a metric's 'other' series because it already had --metrics-max-series series",
                "kdissect.metrics.folded", "{update}", ("kdissect.metric",))

METRICS = (REQUESTS, DURATION, PRODUCED_RECORDS, PRODUCED_BYTES, FETCHED_RECORDS, FETCHED_BYTES, LAG, REBALANCES,
           MEMBERS, SHARE_ACQUIRED, SHARE_REDELIVERED, SHARE_ACKNOWLEDGED, SHARE_MEMBERS, THROTTLE, CONNECTIONS,
           PACKETS, DROPPED, BACKLOG, ANOMALIES, FOLDED)
