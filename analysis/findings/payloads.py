"""Record payload rules: framed and unframed values on one topic, schema ids nothing explains,
value schemas that changed. They read the records table (``--records``); without it they find nothing."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.findings.core import Inputs, Rule, Thresholds, emit, fmt, has_records, sh_quote


def _values(inp: Inputs) -> DataFrame | None:
    """Non-null record values, with their producing client (Produce requests) when known."""
    if inp.records is None:
        return None
    clients = inp.exchanges.select("capture", "connection", "correlation_id", "client_id")
    return (inp.records.where(F.col("value_size").isNotNull())
            .join(clients, ["capture", "connection", "correlation_id"], "left")
            .withColumn("framed", F.col("value_schema_id").isNotNull() | F.col("value_schema_guid").isNotNull())
            .withColumn("producer", F.when((F.col("direction") == "request") & (F.col("api_key") == 0),
                                           F.col("client_id"))))


def _show(topic: str = "topic") -> F.Column:
    return F.concat(F.lit("kdissect show "), sh_quote(F.col("capture")), F.lit(" --api Produce,Fetch --topic "),
                    sh_quote(F.col(topic)), F.lit(" -V"))


def _empty(inp: Inputs) -> DataFrame:
    from analysis.findings.core import FINDINGS
    return inp.exchanges.sparkSession.createDataFrame([], FINDINGS)


def mixed_formats(inp: Inputs, th: Thresholds) -> DataFrame:
    v = _values(inp)
    if v is None:
        return _empty(inp)
    agg = (v.groupBy("capture", "topic")
           .agg(F.count(F.when(F.col("framed"), 1)).alias("framed"),
                F.count(F.when(~F.col("framed"), 1)).alias("unframed"),
                F.sort_array(F.collect_set(F.when(~F.col("framed"), F.col("value_format")))).alias("unframed_formats"),
                F.sort_array(F.collect_set(F.when(F.col("framed"), F.col("producer")))).alias("framed_producers"),
                F.sort_array(F.collect_set(F.when(~F.col("framed"), F.col("producer")))).alias("unframed_producers"),
                F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
           .where((F.col("framed") >= th["min_records"]) & (F.col("unframed") >= th["min_records"])))
    return emit(agg, "topic.mixed_formats", "warning", "topic", F.col("topic"),
                {"framed_values": F.col("framed"), "unframed_values": F.col("unframed"),
                 "unframed_formats": F.col("unframed_formats"), "framed_producers": F.col("framed_producers"),
                 "unframed_producers": F.col("unframed_producers")},
                fmt("Topic %s carries %s values framed for a Schema Registry and %s that are not (%s, from %s): "
                    "a consumer with a Schema Registry deserializer fails on the others (unknown magic byte).",
                    F.col("topic"), F.col("framed"), F.col("unframed"), F.array_join("unframed_formats", ", "),
                    F.array_join("unframed_producers", ", ")),
                "Give every producer of the topic the registry's serializer (value.serializer / "
                "KafkaAvroSerializer, KafkaJsonSchemaSerializer...), or move the plain producer to a topic of its own.",
                _show())


def unknown_schema(inp: Inputs, th: Thresholds) -> DataFrame:
    v = _values(inp)
    if v is None:
        return _empty(inp)
    unknown = v.where(F.col("framed") & F.col("value_format").isNull())
    agg = (unknown.groupBy("capture", "topic")
           .agg(F.count(F.lit(1)).alias("records"),
                F.sort_array(F.collect_set(F.col("value_schema_id"))).alias("schema_ids"),
                F.sort_array(F.collect_set(F.col("value_schema_guid"))).alias("schema_guids"),
                F.sort_array(F.collect_set(F.col("producer"))).alias("producers"),
                F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
           .where(F.col("records") >= th["min_records"]))
    ids = F.concat_ws(", ", F.array_join(F.transform("schema_ids", lambda i: i.cast("string")), ", "),
                      F.array_join("schema_guids", ", "))
    return emit(agg, "topic.unknown_schema", "warning", "topic", F.col("topic"),
                {"records": F.col("records"), "schema_ids": F.col("schema_ids"),
                 "schema_guids": F.col("schema_guids"), "producers": F.col("producers")},
                fmt("%s value(s) on topic %s name schema id(s) %s that no schema given or learned explains: "
                    "they stay undecoded.", F.col("records"), F.col("topic"), ids),
                "Export the schemas (curl REGISTRY/schemas/ids/N > schemas/N.json) and decode with --schemas "
                "schemas/, or with --schema-registry URL; a registry that does not know them means the producer "
                "wrote to another one (schema.registry.url).",
                _show())


def schema_changes(inp: Inputs, th: Thresholds) -> DataFrame:
    v = _values(inp)
    if v is None:
        return _empty(inp)
    framed = v.where(F.col("value_schema_id").isNotNull())
    per = (framed.groupBy("capture", "topic", "value_schema_id")
           .agg(F.min("ts").alias("since"), F.max("ts").alias("until"), F.count(F.lit(1)).alias("n")))
    agg = (per.groupBy("capture", "topic")
           .agg(F.count(F.lit(1)).alias("schemas"),
                F.sort_array(F.collect_list(F.struct(F.col("since"), F.col("value_schema_id").alias("schema_id"),
                                                     F.col("n").alias("records")))).alias("history"),
                F.min("since").alias("first_ts"), F.max("until").alias("last_ts"))
           .where(F.col("schemas") >= th["min_schemas"]))
    ids = F.array_join(F.transform("history", lambda h: h["schema_id"].cast("string")), " -> ")
    return emit(agg, "topic.schema_changes", "info", "topic", F.col("topic"),
                {"value_schemas": F.col("schemas"),
                 "schema_ids": F.transform("history", lambda h: h["schema_id"]),
                 "records": F.transform("history", lambda h: h["records"])},
                fmt("Topic %s carries values of %s schemas in the window (ids %s, in order of first use).",
                    F.col("topic"), F.col("schemas"), ids),
                "A schema changed: check that every consumer can read the new one (the subject's compatibility "
                "level, consumers' specific.avro.reader / generated classes) before the old one goes.",
                _show())


RULES = (
    Rule("topic.mixed_formats", "values framed for a Schema Registry and unframed values on one topic",
         "framed and unframed values, unframed formats, producers of each", "every producer on the registry "
         "serializer (value.serializer), or a topic per format", mixed_formats, {"min_records": 1},
         applies=has_records),
    Rule("topic.unknown_schema", "framed values whose schema id no schema given or learned explains",
         "records, schema ids and GUIDs, producers", "--schemas DIR (exported: curl REGISTRY/schemas/ids/N), "
         "--schema-registry URL; the producer's schema.registry.url", unknown_schema, {"min_records": 1},
         applies=has_records),
    Rule("topic.schema_changes", "more than one value schema id on a topic in the window",
         "value schemas, their ids in order of first use, records of each", "the subject's compatibility level; "
         "consumers' reader schemas", schema_changes, {"min_schemas": 2}, severity="info",
         applies=has_records),
)
