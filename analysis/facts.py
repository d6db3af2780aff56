"""The exchanges as the jobs read them: every body field they use as a typed column, each body parsed once.

The dataset keeps each decoded request and response as JSON text (``request``, ``response``). The
jobs and findings rules read a few dozen fields out of them (a Fetch's ``max_wait_ms``, a JoinGroup's
``group_id`` and the generation its answer gave, a Produce's record batch summaries, ...). Reading
them where each table needs them parsed the same body again for every table and rule that looked.
:func:`exchange_facts` parses each body once, with a schema holding only the fields its api's readers
use, and returns the exchanges with those fields as columns and without the bodies: the frame
``kdissect analyze`` caches and every job reads.

Scalar fields are read as JSON text, then cast, which is exactly what ``get_json_object(...).cast(...)``
gave (numbers, strings and booleans alike); the nested ones (Produce batches, assignments, ListOffsets
queries, ApiVersions offers) with the typed schemas the jobs parsed them with before.

Columns added (null on the exchanges of other apis):

========================== ====== ================================================================
``has_request``            bool   the request body was decoded (``request`` not null)
``has_response``           bool   the response body was decoded
``req_acks``               int    Produce
``req_timeout_ms``         long   Produce
``req_transactional_id``   string Produce; AddPartitionsToTxn (v3 and below too), AddOffsetsToTxn, EndTxn
``req_topic_data``         array  Produce: topics, partitions and each partition's records summary
``req_max_wait_ms``        long   Fetch
``req_min_bytes``          long   Fetch
``req_replica_id``         int    Fetch (``replica_id``, else ``replica_state.replica_id``)
``req_offset_queries``     array  ListOffsets: topics, partitions and the timestamp asked for
``req_topics_json``        string Metadata: the ``topics`` field as JSON text (null: all topics)
``req_group_id``           string OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, TxnOffsetCommit,
                                  ConsumerGroupHeartbeat
``req_member_id``          string OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup
``req_generation_id``      int    OffsetCommit (``generation_id_or_member_epoch`` from v9), Heartbeat, SyncGroup
``req_protocol_type``      string JoinGroup
``req_reason``             string JoinGroup, LeaveGroup
``req_session_timeout_ms`` long   JoinGroup
``req_rebalance_timeout_ms`` long JoinGroup
``req_members``            array  LeaveGroup v3+: member id and reason of each member leaving
``req_client_software_name``, ``req_client_software_version`` string ApiVersions v3+
``req_committed``          bool   EndTxn
``resp_generation_id``     int    JoinGroup
``resp_member_id``         string JoinGroup, ConsumerGroupHeartbeat
``resp_protocol_name``     string JoinGroup
``resp_member_epoch``      int    ConsumerGroupHeartbeat
``resp_assignment``        struct SyncGroup (``assigned_partitions``), ConsumerGroupHeartbeat (``topic_partitions``)
``resp_api_keys``          array  ApiVersions: each api key and the highest version the broker offers
``share_group_id``         string ShareGroupHeartbeat, ShareFetch, ShareAcknowledge (KIP-932)
``share_member_id``        string the same three
``share_member_epoch``     int    ShareGroupHeartbeat: the epoch the member sent (0 joins, -1 leaves)
``share_session_epoch``    int    ShareFetch, ShareAcknowledge: the share session epoch sent
``share_acks``             array  ShareFetch, ShareAcknowledge: topics, partitions, acknowledgement batches
``share_responses``        array  ShareFetch, ShareAcknowledge: per partition its errors and (ShareFetch) acquired
                                  record ranges with their delivery count
``share_lock_timeout_ms``  long   ShareFetch response: ``acquisition_lock_timeout_ms``
``share_resp_member_id``, ``share_resp_member_epoch``, ``share_assignment`` ShareGroupHeartbeat response
========================== ====== ================================================================
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analysis.frames import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    API_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT,
    END_TXN,
    FETCH,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_HEARTBEAT,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)

SHARE_APIS = (SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE)

# Present on the exchanges once they are facts: the test for "already parsed".
MARKER = "has_request"


def _s(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields])


TEXT = StringType()  # a scalar read as JSON text, as get_json_object returns it

RECORDS = _s(("record_count", LongType()), ("batch_count", LongType()), ("total_bytes", LongType()),
             ("first_timestamp", LongType()), ("max_timestamp", LongType()), ("codec", StringType()),
             ("producer_id", LongType()), ("producer_epoch", IntegerType()), ("base_sequence", LongType()),
             ("magics", ArrayType(IntegerType())), ("first_crc", LongType()), ("transactional", BooleanType()))
TOPIC_DATA = ArrayType(_s(("name", StringType()), ("topic_id", StringType()),
                          ("partition_data", ArrayType(_s(("index", IntegerType()), ("records", RECORDS))))))
OFFSET_QUERIES = ArrayType(_s(("name", StringType()), ("partitions", ArrayType(_s(
    ("partition_index", IntegerType()), ("timestamp", LongType()))))))
PARTS = ArrayType(_s(("topic", StringType()), ("topic_id", StringType()), ("partitions", ArrayType(IntegerType()))))
ASSIGNMENT = _s(("assigned_partitions", PARTS), ("topic_partitions", PARTS))
API_KEYS = ArrayType(_s(("api_key", IntegerType()), ("max_version", IntegerType())))
MEMBERS = ArrayType(_s(("member_id", StringType()), ("reason", StringType())))
ACK_BATCHES = ArrayType(_s(("first_offset", LongType()), ("last_offset", LongType()),
                           ("acknowledge_types", ArrayType(IntegerType()))))
SHARE_ACKS = ArrayType(_s(("topic_id", StringType()), ("partitions", ArrayType(_s(
    ("partition_index", IntegerType()), ("acknowledgement_batches", ACK_BATCHES))))))
ACQUIRED = ArrayType(_s(("first_offset", LongType()), ("last_offset", LongType()), ("delivery_count", IntegerType())))
SHARE_RESPONSES = ArrayType(_s(("topic_id", StringType()), ("partitions", ArrayType(_s(
    ("partition_index", IntegerType()), ("error_code", IntegerType()), ("acknowledge_error_code", IntegerType()),
    ("acquired_records", ACQUIRED))))))
SHARE_REQUEST = _s(("group_id", TEXT), ("member_id", TEXT), ("share_session_epoch", TEXT), ("topics", SHARE_ACKS))
SHARE_RESPONSE = _s(("acquisition_lock_timeout_ms", TEXT), ("responses", SHARE_RESPONSES))

# Per api key, the request and response fields its readers use (everything else in a body is skipped).
REQUEST: Mapping[int, StructType] = {
    PRODUCE: _s(("acks", IntegerType()), ("timeout_ms", TEXT), ("transactional_id", StringType()),
                ("topic_data", TOPIC_DATA)),
    FETCH: _s(("max_wait_ms", TEXT), ("min_bytes", TEXT), ("replica_id", TEXT),
              ("replica_state", _s(("replica_id", TEXT)))),
    LIST_OFFSETS: _s(("topics", OFFSET_QUERIES)),
    METADATA: _s(("topics", TEXT)),
    OFFSET_COMMIT: _s(("group_id", TEXT), ("member_id", TEXT), ("generation_id", TEXT),
                      ("generation_id_or_member_epoch", TEXT)),
    JOIN_GROUP: _s(("group_id", TEXT), ("member_id", TEXT), ("protocol_type", TEXT), ("reason", TEXT),
                   ("session_timeout_ms", TEXT), ("rebalance_timeout_ms", TEXT)),
    HEARTBEAT: _s(("group_id", TEXT), ("member_id", TEXT), ("generation_id", TEXT)),
    LEAVE_GROUP: _s(("group_id", TEXT), ("member_id", TEXT), ("reason", TEXT), ("members", MEMBERS)),
    SYNC_GROUP: _s(("group_id", TEXT), ("member_id", TEXT), ("generation_id", TEXT)),
    API_VERSIONS: _s(("client_software_name", TEXT), ("client_software_version", TEXT)),
    ADD_PARTITIONS_TO_TXN: _s(("transactional_id", TEXT), ("v3_and_below_transactional_id", TEXT),
                              ("transactions", ArrayType(_s(("transactional_id", TEXT))))),
    ADD_OFFSETS_TO_TXN: _s(("transactional_id", TEXT)),
    END_TXN: _s(("transactional_id", TEXT), ("committed", TEXT)),
    TXN_OFFSET_COMMIT: _s(("group_id", TEXT)),
    CONSUMER_GROUP_HEARTBEAT: _s(("group_id", TEXT)),
    SHARE_GROUP_HEARTBEAT: _s(("group_id", TEXT), ("member_id", TEXT), ("member_epoch", TEXT)),
    SHARE_FETCH: SHARE_REQUEST,
    SHARE_ACKNOWLEDGE: SHARE_REQUEST,
}
RESPONSE: Mapping[int, StructType] = {
    JOIN_GROUP: _s(("generation_id", TEXT), ("member_id", TEXT), ("protocol_name", TEXT)),
    SYNC_GROUP: _s(("assignment", TEXT)),
    API_VERSIONS: _s(("api_keys", API_KEYS)),
    CONSUMER_GROUP_HEARTBEAT: _s(("member_epoch", TEXT), ("member_id", TEXT), ("assignment", TEXT)),
    SHARE_GROUP_HEARTBEAT: _s(("member_epoch", TEXT), ("member_id", TEXT),
                              ("assignment", _s(("topic_partitions", PARTS)))),
    SHARE_FETCH: SHARE_RESPONSE,
    SHARE_ACKNOWLEDGE: SHARE_RESPONSE,
}


def _first(*values: Column) -> Column:
    return values[0] if len(values) == 1 else F.coalesce(*values)


def _fields() -> dict[str, Column]:
    """Each facts column from the parsed bodies: ``q(k)``/``r(k)`` is api k's parsed request/response
    (null on other apis' exchanges, so a coalesce over apis picks the exchange's own)."""
    def q(k: int) -> Column:
        return F.col(f"_q{k}")

    def r(k: int) -> Column:
        return F.col(f"_r{k}")

    group_apis = (OFFSET_COMMIT, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, TXN_OFFSET_COMMIT,
                  CONSUMER_GROUP_HEARTBEAT)
    return {
        "req_acks": q(PRODUCE)["acks"],
        "req_timeout_ms": q(PRODUCE)["timeout_ms"].cast("long"),
        "req_transactional_id": _first(
            q(PRODUCE)["transactional_id"],
            F.coalesce(q(ADD_PARTITIONS_TO_TXN)["transactional_id"],
                       q(ADD_PARTITIONS_TO_TXN)["v3_and_below_transactional_id"],
                       q(ADD_PARTITIONS_TO_TXN)["transactions"][0]["transactional_id"]),
            q(ADD_OFFSETS_TO_TXN)["transactional_id"], q(END_TXN)["transactional_id"]),
        "req_topic_data": q(PRODUCE)["topic_data"],
        "req_max_wait_ms": q(FETCH)["max_wait_ms"].cast("long"),
        "req_min_bytes": q(FETCH)["min_bytes"].cast("long"),
        "req_replica_id": F.coalesce(q(FETCH)["replica_id"].cast("int"),
                                     q(FETCH)["replica_state"]["replica_id"].cast("int")),
        "req_offset_queries": q(LIST_OFFSETS)["topics"],
        "req_topics_json": q(METADATA)["topics"],
        "req_group_id": _first(*[q(k)["group_id"] for k in group_apis]),
        "req_member_id": _first(*[q(k)["member_id"] for k in (OFFSET_COMMIT, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP,
                                                              SYNC_GROUP)]),
        "req_generation_id": _first(
            F.coalesce(q(OFFSET_COMMIT)["generation_id"], q(OFFSET_COMMIT)["generation_id_or_member_epoch"]),
            q(HEARTBEAT)["generation_id"], q(SYNC_GROUP)["generation_id"]).cast("int"),
        "req_protocol_type": q(JOIN_GROUP)["protocol_type"],
        "req_reason": _first(q(JOIN_GROUP)["reason"], q(LEAVE_GROUP)["reason"]),
        "req_session_timeout_ms": q(JOIN_GROUP)["session_timeout_ms"].cast("long"),
        "req_rebalance_timeout_ms": q(JOIN_GROUP)["rebalance_timeout_ms"].cast("long"),
        "req_members": q(LEAVE_GROUP)["members"],
        "req_client_software_name": q(API_VERSIONS)["client_software_name"],
        "req_client_software_version": q(API_VERSIONS)["client_software_version"],
        "req_committed": q(END_TXN)["committed"].cast("boolean"),
        "resp_generation_id": r(JOIN_GROUP)["generation_id"].cast("int"),
        "resp_member_id": _first(r(JOIN_GROUP)["member_id"], r(CONSUMER_GROUP_HEARTBEAT)["member_id"]),
        "resp_protocol_name": r(JOIN_GROUP)["protocol_name"],
        "resp_member_epoch": r(CONSUMER_GROUP_HEARTBEAT)["member_epoch"].cast("int"),
        # Its own parse of the assignment's text: one that does not fit (a SyncGroup assignment whose consumer
        # protocol did not decode is a base64 string) then costs the assignment only, never the other fields.
        "resp_assignment": F.from_json(_first(r(SYNC_GROUP)["assignment"], r(CONSUMER_GROUP_HEARTBEAT)["assignment"]),
                                       ASSIGNMENT),
        "resp_api_keys": r(API_VERSIONS)["api_keys"],
        "share_group_id": _first(*[q(k)["group_id"] for k in SHARE_APIS]),
        "share_member_id": _first(*[q(k)["member_id"] for k in SHARE_APIS]),
        "share_member_epoch": q(SHARE_GROUP_HEARTBEAT)["member_epoch"].cast("int"),
        "share_session_epoch": _first(q(SHARE_FETCH)["share_session_epoch"],
                                      q(SHARE_ACKNOWLEDGE)["share_session_epoch"]).cast("int"),
        "share_acks": _first(q(SHARE_FETCH)["topics"], q(SHARE_ACKNOWLEDGE)["topics"]),
        "share_responses": _first(r(SHARE_FETCH)["responses"], r(SHARE_ACKNOWLEDGE)["responses"]),
        "share_lock_timeout_ms": r(SHARE_FETCH)["acquisition_lock_timeout_ms"].cast("long"),
        "share_resp_member_id": r(SHARE_GROUP_HEARTBEAT)["member_id"],
        "share_resp_member_epoch": r(SHARE_GROUP_HEARTBEAT)["member_epoch"].cast("int"),
        "share_assignment": r(SHARE_GROUP_HEARTBEAT)["assignment"]["topic_partitions"],
    }



def exchange_facts(exchanges: DataFrame) -> DataFrame:
    """The exchanges with the columns of the table above (and ``has_request``/``has_response``), ``request`` and
    ``response`` dropped. Each body is parsed at most once: by its own api's schema, only when the
    exchange is of an api some reader needs."""
    key = F.col("api_key")
    parsed = [F.when(key == k, F.from_json("request", schema)).alias(f"_q{k}") for k, schema in REQUEST.items()]
    parsed += [F.when(key == k, F.from_json("response", schema)).alias(f"_r{k}") for k, schema in RESPONSE.items()]
    # Two projections: the parsed structs are columns of the first, so the second's many field reads
    # share one parse per body (Spark keeps a projection apart rather than repeat an expensive expression).
    step = exchanges.select("*", F.col("request").isNotNull().alias("has_request"),
                            F.col("response").isNotNull().alias("has_response"), *parsed)
    kept = [c for c in step.columns if c not in ("request", "response") and not c.startswith(("_q", "_r"))]
    return step.select(*kept, *[c.alias(name) for name, c in _fields().items()])


def typed(exchanges: DataFrame) -> DataFrame:
    """``exchanges`` as facts: as they are when already parsed (what ``kdissect analyze`` passes every
    job), else parsed here (a job function called on the dataset's own table, as in a notebook)."""
    return exchanges if MARKER in exchanges.columns else exchange_facts(exchanges)

