"""Source adaptation (capture/sources.py): what a run learns of its source, once, on real captures."""

from __future__ import annotations

from pathlib import Path

from capture import CaptureOptions, Pipeline
from capture.capfile import open_capture
from capture.rotation import ChainSource
from capture.sources import SourceAdapter, adapt
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PCAP = SAMPLES / "tansu-admin-errors.pcap"
PCAPNG = SAMPLES / "tls" / "tls13-port19443.pcapng"


def test_a_pcap_reader_offers_its_counts_and_its_problems_list() -> None:
    reader = open_capture(PCAP)
    src = adapt(reader)
    assert src.records is reader and src.problems is reader.problems
    assert src.size == PCAP.stat().st_size and src.tls_secrets is None
    assert src.bytes_read is not None and src.drop_foreign is not None
    n = sum(1 for _ in src.records)
    assert n == reader.records and src.bytes_read() == PCAP.stat().st_size
    assert src.last_ts() == reader.last_ts and src.caplen_over_wirelen() == 0
    reader.close()


def test_a_pcapng_reader_offers_its_secrets_blocks_as_they_are_read() -> None:
    reader = open_capture(PCAPNG)
    src = adapt(reader)
    assert src.tls_secrets is reader.tls_secrets        # the same list: blocks read later are seen
    reader.close()


def test_a_chain_of_files_counts_across_them() -> None:
    chain = ChainSource([PCAP, SAMPLES / "tansu-aiokafka.pcap"])
    src = adapt(chain)
    list(src.records)
    assert src.bytes_read() == PCAP.stat().st_size + (SAMPLES / "tansu-aiokafka.pcap").stat().st_size
    assert src.size == src.bytes_read()
    chain.close()


def test_bare_records_offer_nothing_and_decode_alike() -> None:
    _, records = pt.read_records(PCAP)
    src = adapt(records)
    assert src.records is records and src.problems == [] and src.bytes_read is None
    assert src.size is None and src.tls_secrets is None and src.drop_foreign is None
    assert adapt(src) is src
    bare, read = Pipeline(), Pipeline()
    assert [repr(ce) for ce in bare.run(records)] == [repr(ce) for ce in read.run(open_capture(PCAP))]
    assert bare.stats.bytes_read == 0 and read.stats.bytes_read == PCAP.stat().st_size
    assert read.stats.size == PCAP.stat().st_size and bare.stats.size is None


def test_a_run_reads_the_reader_through_its_adapter() -> None:
    """A source may hand the run its own adapter: what it says there is what the run uses."""
    _, records = pt.read_records(PCAP)
    problems: list = []
    counted = iter(range(1, 10**9))
    p = Pipeline(CaptureOptions())
    events = list(p.run(SourceAdapter(records, problems, size=123, bytes_read=lambda: next(counted))))
    assert events and p.stats.size == 123 and p.stats.bytes_read == 1     # asked once, at the end (< 4096 packets)
