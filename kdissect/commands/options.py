"""The command line's shared pieces: option groups more than one command takes (the decode options, the
payload options, ...) and the types of numeric values, each a one-line error when a value does not fit."""

from __future__ import annotations

import argparse


def _number(kind: type, text: str) -> float:
    """``text`` as a whole number (``kind`` int) or a finite number (float)."""
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive(kind: type) -> object:
    """A count (int: at least 1) or an amount (float: greater than 0)."""
    if kind is int:
        return at_least(int, 1)

    def parse(text: str) -> object:
        value = _number(kind, text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be a finite number greater than 0, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def at_least(kind: type, minimum: float) -> object:
    def parse(text: str) -> object:
        value = _number(kind, text)
        if value < minimum:
            whole = "a whole number, " if kind is int else ""
            raise argparse.ArgumentTypeError(f"must be {whole}at least {minimum:g}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def common_options(p: argparse.ArgumentParser, records: bool) -> None:
    p.add_argument("--ports", metavar="LIST",
                   help="Kafka ports, e.g. 9092,9093 or 9092-9094 (default: detect Kafka on any port)")
    p.add_argument("--protocol", action="append", metavar="PROTO[=PORTS]",
                   help="decode as Kafka 0.7 or 0.8+ instead of detecting it per connection, for every "
                        "connection or only those to PORTS (like Wireshark's Decode As), e.g. 0.7 or "
                        "0.7=9092,9093; repeatable")
    p.add_argument("--keep-secrets", action="store_true",
                   help="keep SASL tokens and credentials in the output (redacted by default)")
    tls_keylog_option(p)
    if records:
        p.add_argument("--records", action="store_true",
                       help="also write OUTDIR/records/: one row per Kafka record")
        p.add_argument("--record-bytes", action="store_true",
                       help="put record key and value bytes in the records table (implies --records)")
        p.add_argument("--max-decompressed", type=int, default=64, metavar="MIB",
                       help="stop decompressing a records field past this many MiB, reported as an anomaly "
                            "(a guard against decompression bombs; default 64)")
    payload_options(p, records)


def payload_options(p: argparse.ArgumentParser, records: bool = True) -> None:
    """``records``: a command writing the dataset (its records table); else show, whose -V decodes them."""
    implies = " (implies --records)" if records else ""
    shown = "" if records else "with -V, "
    p.add_argument("--schemas", metavar="DIR",
                   help=f"{shown}decode record keys and values with the schemas in DIR: the registry's JSON saved "
                        "as {id}.json (curl REGISTRY/schemas/ids/{id}), or {id}.avsc, {id}.proto, "
                        f"{{id}}.schema.json{implies}")
    p.add_argument("--schema-registry", metavar="URL",
                   help=f"{shown}fetch the schemas of the ids seen from this Schema Registry"
                        + (f", cached in OUTDIR/schemas/{implies}" if records else " (kept in memory only)"))
    p.add_argument("--validate-json", action="store_true",
                   help=f"{shown}check JSON Schema values against their schema (needs jsonschema){implies}")


def separate_files(p: argparse.ArgumentParser) -> None:
    p.add_argument("--separate-files", action="store_true",
                   help="decode every file as its own capture, even files that continue one another "
                        "(rotated captures are joined by default)")


def max_series(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-max-series", type=positive(int), default=1000, metavar="N",
                   help="at most N series per metric; later label combinations are added to one series "
                        "labelled 'other' (default 1000)")


def tls_keylog_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-keylog", action="append", default=[], metavar="FILE",
                   help="decrypt TLS with the session keys in this NSS key log file (SSLKEYLOGFILE format); "
                        "repeatable; keys embedded in a pcapng file are used without it")
