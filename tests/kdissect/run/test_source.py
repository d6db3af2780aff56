"""Options become DecodeOptions in one place, whoever read them: a command, the Spark reader, the API."""

from __future__ import annotations

from pathlib import Path

import pytest

from dissector.protocols import ProtocolChoice
from dissector.records import DEFAULT_MAX_DECOMPRESSED
from kdissect.commands.parser import build_parser
from kdissect.errors import UsageError
from kdissect.run.source import OPTION_NAMES, DecodeOptions, protocol_option


def test_protocol_by_port_and_default() -> None:
    assert protocol_option(["0.7=9092,9100-9101", "0.8+"]) == ProtocolChoice(
        "0.8+", ((9092, "0.7"), (9100, "0.7"), (9101, "0.7")))
    assert protocol_option("0.8") == ProtocolChoice("0.8+")
    assert protocol_option(None) is None and protocol_option([]) is None


@pytest.mark.parametrize("bad, says", [
    (["0.6"], "--protocol: unknown protocol '0.6' in '0.6'"),
    (["0.7=x"], "--protocol: bad port 'x' in '0.7=x' (expected N or N-M)"),
    (["0.7=0"], "--protocol: bad port range '0' in '0.7=0'"),
    (["0.7="], "--protocol: no ports in '0.7='"),
])
def test_a_bad_protocol_is_one_line_naming_the_value(bad: list[str], says: str) -> None:
    with pytest.raises(UsageError) as err:
        protocol_option(bad)
    assert str(err.value).startswith(says)


def test_decode_arguments() -> None:
    args = build_parser("decode").parse_args(
        ["decode", "x.pcap", "-o", "out", "--ports", "9092,9093", "--record-bytes", "--max-decompressed", "8",
         "--keep-secrets", "--tls-keylog", "a.log", "--tls-keylog", "b.log", "--protocol", "0.7=9093",
         "--separate-files"])
    assert DecodeOptions.from_args(args) == DecodeOptions(
        ports=frozenset({9092, 9093}), keep_secrets=True, records=True, record_bytes=True,
        max_decompressed=8 << 20, tls_keylog=("a.log", "b.log"), protocol=ProtocolChoice("auto", ((9093, "0.7"),)),
        rotated=False)


@pytest.mark.parametrize("argv", [
    ["show", "x.pcap"], ["doctor", "x.pcap"], ["live", "-i", "lo", "-o", "out"], ["spark-decode", "x.pcap", "-o", "o"],
])
def test_every_command_gets_the_defaults_for_what_it_does_not_take(argv: list[str]) -> None:
    options = DecodeOptions.from_args(build_parser(argv[0]).parse_args(argv))
    assert options == DecodeOptions()
    assert options.max_decompressed == DEFAULT_MAX_DECOMPRESSED


def test_bad_ports_are_bad_use() -> None:
    with pytest.raises(UsageError, match="--ports: bad port 'x'"):
        DecodeOptions.from_args(build_parser("show").parse_args(["show", "x.pcap", "--ports", "x"]))


@pytest.mark.parametrize("given", [
    {"record_bytes": True}, {"schemas": "s/"}, {"schema_registry": "http://r:8081"}, {"validate_json": True},
])
def test_record_bytes_and_each_payload_option_imply_records(given: dict) -> None:
    assert DecodeOptions.from_mapping(given).records
    assert DecodeOptions.from_mapping({**given, "records": False}).records


def test_absent_and_none_are_the_defaults() -> None:
    assert DecodeOptions.from_mapping({}) == DecodeOptions()
    assert DecodeOptions.from_mapping({name: None for name in OPTION_NAMES}) == DecodeOptions()


def test_options_as_users_give_them() -> None:
    options = DecodeOptions.from_mapping({"ports": "9092", "max_decompressed": "8", "tls_keylog": "a.log",
                                          "protocol": "0.7", "rotated": False, "schemas": Path("s")})
    assert options == DecodeOptions(ports=frozenset({9092}), max_decompressed=8 << 20, tls_keylog=("a.log",),
                                    protocol=ProtocolChoice("0.7"), rotated=False, schemas="s", records=True)
    assert DecodeOptions.from_mapping({"ports": frozenset({1})}).ports == frozenset({1})


def test_a_name_that_is_no_option_is_a_mistake() -> None:
    with pytest.raises(TypeError, match="not decode options: record"):
        DecodeOptions.from_mapping({"record": True})


def test_the_api_and_the_spark_reader_ask_as_the_command_line_does() -> None:
    from kdissect.api import _options
    from kdissect.spark.source import decode_options
    cli = DecodeOptions.from_args(build_parser("decode").parse_args(
        ["decode", "x.pcap", "-o", "out", "--ports", "9092", "--keep-secrets", "--tls-keylog", "a.log",
         "--schemas", "s/", "--max-decompressed", "8"]))
    assert decode_options({"ports": "9092", "keep_secrets": "true", "tls_keylog": "a.log", "schemas": "s/",
                           "max_decompressed": "8"}) == cli
    assert decode_options({"table": "records"}) == DecodeOptions(records=True)
    assert _options("9092", True, "a.log") == DecodeOptions.from_args(build_parser("show").parse_args(
        ["show", "x.pcap", "--ports", "9092", "--keep-secrets", "--tls-keylog", "a.log"]))
