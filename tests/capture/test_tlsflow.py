"""TLS connections through the whole capture pipeline: real samples, with right, wrong, partial or no keys."""

from __future__ import annotations

import datetime
import ssl
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from capture import CaptureOptions, ConnectionEnd, read_capture
from capture.detect import KafkaProbe
from capture.flows import ConnectionInfo
from capture.tls.keylog import KeyLog
from capture.tlsflow import TlsConnection
from dissector.events import Anomaly, Direction, Exchange
from tests.capture import pcaptools as pt

TLS = Path(__file__).resolve().parents[2] / "samples" / "tls"
NAMES = ["tls13", "tls13-chacha", "tls13-aes128", "tls12-gcm", "tls12-chacha", "tls12-cbc", "tls-resumed", "tls13-port19443"]


def decode(path: Path, *keylogs: Path, **kw) -> tuple[dict[str, list], dict[str, list[Anomaly]], dict]:
    """Exchanges and anomalies per connection id, and the connections' TLS info."""
    exchanges: dict[str, list] = defaultdict(list)
    anomalies: dict[str, list[Anomaly]] = defaultdict(list)
    infos = {}
    run = read_capture(path, CaptureOptions(tls_keylog=tuple(map(str, keylogs)), **kw))
    for ce in run:
        cid = ce.conn.id if ce.conn is not None else None
        if isinstance(ce.event, Exchange):
            exchanges[cid].append(ce.event)
        elif isinstance(ce.event, Anomaly):
            anomalies[cid].append(ce.event)
        elif isinstance(ce.event, ConnectionEnd):
            infos[cid] = ce.conn.tls
    return exchanges, anomalies, infos


def keys(name: str) -> Path:
    return TLS / f"{name}.keys"


def key_lines(name: str) -> list[str]:
    return [ln for ln in keys(name).read_text().splitlines() if ln and not ln.startswith("#")]


@pytest.mark.parametrize("name", NAMES)
def test_every_connection_decrypts_with_the_clients_keys(name: str) -> None:
    exchanges, anomalies, infos = decode(TLS / f"{name}.pcap", keys(name))
    assert not anomalies
    assert infos and all(i is not None and i.decrypted and i.sni == "broker.kafka.test" for i in infos.values())
    assert sum(map(len, exchanges.values())) >= 70


def test_no_keys_is_one_tls_anomaly_per_connection_with_what_the_handshake_said() -> None:
    exchanges, anomalies, infos = decode(TLS / "tls12-gcm.pcap")
    assert not exchanges
    assert len(infos) == 10 and set(anomalies) == set(infos)
    for conn, found in anomalies.items():
        assert [a.kind for a in found] == ["tls"]
        assert "TLS 1.2, TLS_ECDHE_RSA_WITH_AES_" in found[0].detail
        assert "SNI broker.kafka.test" in found[0].detail and "--tls-keylog" in found[0].detail


def test_wrong_keys_fail_once_per_connection_and_invent_nothing(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.keys"
    lines = []
    for ln in key_lines("tls13"):
        label, rnd, secret = ln.split()
        lines.append(f"{label} {rnd} {secret[:-2]}{(int(secret[-2:], 16) ^ 1):02x}")
    wrong.write_text("\n".join(lines) + "\n")
    exchanges, anomalies, infos = decode(TLS / "tls13.pcap", wrong)
    assert not exchanges
    assert set(anomalies) == set(infos) and len(infos) == 10
    assert all([a.kind for a in found] == ["tls_decrypt_failed"] for found in anomalies.values())
    assert all(ln.split()[2] not in a.detail for found in anomalies.values() for a in found for ln in lines)


def test_partial_keys_decode_their_connections_only(tmp_path: Path) -> None:
    # One client's key log: the kafka-python connections come first in the log.
    full_ex, _, infos = decode(TLS / "tls12-gcm.pcap", keys("tls12-gcm"))
    randoms = [ln.split()[1] for ln in key_lines("tls12-gcm")]
    half = tmp_path / "half.keys"
    half.write_text("".join(ln + "\n" for ln in key_lines("tls12-gcm") if ln.split()[1] in randoms[:4]))
    exchanges, anomalies, _ = decode(TLS / "tls12-gcm.pcap", half)
    assert len(exchanges) == 4 and not set(exchanges) & set(anomalies)
    assert len(anomalies) == len(infos) - 4
    assert all([a.kind for a in found] == ["tls"] and "no keys for this connection" in found[0].detail
               for found in anomalies.values())
    for conn, got in exchanges.items():
        assert [(e.api_key, e.correlation_id) for e in got] == [(e.api_key, e.correlation_id) for e in full_ex[conn]]


def test_a_truncated_key_log_decodes_what_it_holds(tmp_path: Path) -> None:
    text = keys("tls13").read_bytes()
    cut = tmp_path / "cut.keys"
    cut.write_bytes(text[: len(text) // 2 + 37])           # ends inside a line
    exchanges, anomalies, infos = decode(TLS / "tls13.pcap", cut)
    assert exchanges and anomalies
    for conn in infos:
        kinds = [a.kind for a in anomalies.get(conn, [])]
        assert kinds in ([], ["tls"]), kinds                 # decoded, or one anomaly: never both wrong
        assert bool(exchanges.get(conn)) or kinds == ["tls"]


def test_a_capture_starting_after_the_handshake_is_reported_not_guessed(tmp_path: Path) -> None:
    linktype, records = pt.read_records(TLS / "tls13.pcap")
    # From the 30th packet: the first connections' handshakes are gone, later ones are whole.
    late = pt.write_pcap(tmp_path / "late.pcap", linktype, records[30:])
    exchanges, anomalies, infos = decode(late, keys("tls13"))
    midstream = [c for c, found in anomalies.items() if any("handshake" in a.detail or "ClientHello" in a.detail
                                                             for a in found)]
    assert midstream and not set(midstream) & set(exchanges)
    assert all([a.kind for a in anomalies[c]] == ["tls"] for c in midstream)
    assert exchanges                                          # connections opened later still decode


def test_tls_on_another_port_is_kafka_only_with_keys() -> None:
    path = TLS / "tls13-port19443.pcap"
    exchanges, anomalies, infos = decode(path)
    assert not exchanges and not anomalies and not infos     # TLS on a random port: not claimed
    exchanges, anomalies, infos = decode(path, keys("tls13-port19443"))
    assert len(infos) == 10 and not anomalies and all(c.endswith(":19443#1") for c in exchanges)


def test_keys_embedded_in_pcapng_are_used_without_an_option() -> None:
    a, _, _ = decode(TLS / "tls13-port19443.pcapng")
    b, _, _ = decode(TLS / "tls13-port19443.pcap", keys("tls13-port19443"))
    assert {c: [(e.api_key, e.correlation_id, e.status) for e in v] for c, v in a.items()} == \
        {c: [(e.api_key, e.correlation_id, e.status) for e in v] for c, v in b.items()}


def test_resumed_sessions_are_recognised() -> None:
    _, anomalies, infos = decode(TLS / "tls-resumed.pcap", keys("tls-resumed"))
    assert not anomalies
    kinds = Counter((i.version, i.resumed) for i in infos.values())
    assert kinds[("TLS 1.3", True)] >= 1 and kinds[("TLS 1.2", True)] >= 1


def test_explicit_ports_take_tls_without_sniffing() -> None:
    exchanges, anomalies, _ = decode(TLS / "tls12-chacha.pcap", keys("tls12-chacha"), ports=frozenset({9093}))
    assert not anomalies and sum(map(len, exchanges.values())) >= 70


def _run_live(records, keylog: Path, write_keys_at: int, text: str) -> tuple[dict[str, list], dict[str, list]]:
    from capture.pipeline import Pipeline

    def source():
        for i, rec in enumerate(records):
            if i == write_keys_at:
                with open(keylog, "a") as f:      # the client appends its lines after the handshakes
                    f.write(text)
            yield rec
    p = Pipeline(CaptureOptions(tls_keylog=(str(keylog),), tls_keylog_live=True))
    exchanges: dict[str, list] = defaultdict(list)
    anomalies: dict[str, list] = defaultdict(list)
    for ce in p.run(source()):
        if isinstance(ce.event, Exchange):
            exchanges[ce.conn.id].append(ce.event)
        elif isinstance(ce.event, Anomaly):
            anomalies[ce.conn.id].append(ce.event)
    return exchanges, anomalies


def test_live_key_log_read_as_it_grows_holds_records_until_keys_appear(tmp_path: Path) -> None:
    _, records = pt.read_records(TLS / "tls13.pcap")
    full, _, _ = decode(TLS / "tls13.pcap", keys("tls13"))
    keylog = tmp_path / "live.keys"
    keylog.write_text("# SSL/TLS secrets log file\n")
    # The keys are written after the first connection's handshake and first requests (packet 12 of
    # 335; it ends at 14): its records wait for them.
    exchanges, anomalies = _run_live(records, keylog, 12, keys("tls13").read_text())
    assert not anomalies
    assert {c: [(e.api_key, e.correlation_id, e.status) for e in v] for c, v in exchanges.items()} == \
        {c: [(e.api_key, e.correlation_id, e.status) for e in v] for c, v in full.items()}


def test_live_key_log_that_never_gets_the_keys(tmp_path: Path) -> None:
    _, records = pt.read_records(TLS / "tls12-gcm.pcap")
    keylog = tmp_path / "live.keys"
    keylog.write_text("")
    exchanges, anomalies = _run_live(records, keylog, 10**9, "")
    assert not exchanges and len(anomalies) == 10
    assert all([a.kind for a in v] == ["tls"] for v in anomalies.values())


# -- TLS made in-process by OpenSSL on both ends (ssl.MemoryBIO, keys logged): what no sample holds ---

def _contexts(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tls.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("tls.test")]), critical=False)
            .sign(key, hashes.SHA256()))
    (tmp / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "c.pem", tmp / "k.pem")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(tmp / "c.pem")
    keys = tmp / "keys.log"
    client.keylog_filename = str(keys)
    return client, server, keys


def _conversation(tmp: Path, messages: list[tuple[int, bytes]]) -> tuple[list[tuple[int, bytes]], Path]:
    """The wire bytes (side, data) of a TLS connection carrying ``messages`` (side 0 = client)."""
    cctx, sctx, keys = _contexts(tmp)
    bios = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]       # (incoming, outgoing) per side
    ends = [cctx.wrap_bio(*bios[0], server_hostname="tls.test"), sctx.wrap_bio(*bios[1], server_side=True)]
    wire: list[tuple[int, bytes]] = []

    def pump() -> None:
        for side in (0, 1):
            data = bios[side][1].read()
            if data:
                wire.append((side, data))
                bios[1 - side][0].write(data)

    for _ in range(10):                                                   # the handshake
        for end in ends:
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        pump()
    for side, data in messages:
        ends[side].write(data)
        pump()
        try:
            ends[1 - side].read(65536)
        except ssl.SSLWantReadError:
            pass
        pump()
    return wire, keys


def _info() -> ConnectionInfo:
    return ConnectionInfo("c", "10.0.0.1", 40000, "10.0.0.2", 9093, 0, 0, "tls", True, "test")


def _feed(conn: TlsConnection, wire: list[tuple[int, bytes]]) -> list:
    events = []
    for side, data in wire:
        events += conn.feed(Direction.TO_BROKER if side == 0 else Direction.TO_CLIENT, data, 1)
    return events + conn.close(2)


def test_decrypted_but_not_kafka(tmp_path: Path) -> None:
    wire, keys = _conversation(tmp_path, [(0, b"GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n"),
                                          (1, b"HTTP/1.1 200 OK\r\n\r\n")])
    made: list = []
    for quiet in (False, True):
        conn = TlsConnection(KeyLog([keys]), lambda: made.append(1), _info(), probe=KafkaProbe.from_dissector(),
                             quiet=quiet, detect_limit=16384, max_held=1 << 20)
        events = _feed(conn, wire)
        assert conn.session.info.decrypted and conn.session.info.sni == "tls.test" and conn.not_kafka
        if quiet:                                     # off a Kafka port: no trace at all
            assert events == [] and conn.hidden
        else:
            assert [e.kind for e in events if isinstance(e, Anomaly)] == ["tls"]
            assert "not a Kafka request" in events[0].detail
    assert made == []                                 # no dissector connection was made


def test_kafka_bytes_inside_in_process_tls(tmp_path: Path) -> None:
    request = b"\x00\x00\x00\x0bkafka bytes"           # an explicit Kafka port: taken without sniffing
    wire, keys = _conversation(tmp_path, [(0, request)])
    fed: list = []

    class Recorder:
        def feed(self, direction, data, ts):
            fed.append((direction, data))
            return []

        def close(self, ts):
            return []
    conn = TlsConnection(KeyLog([keys]), Recorder, _info(), probe=None, quiet=False,
                         detect_limit=16384, max_held=1 << 20)
    assert _feed(conn, wire) == []
    assert b"".join(d for direction, d in fed if direction is Direction.TO_BROKER) == request


def test_sasl_inside_tls_is_decoded_and_redacted(tmp_path: Path) -> None:
    from dissector.connection import Connection, Options
    from dissector.encoder import request_frame, response_frame
    from dissector.events import Request
    from dissector.redact import REDACTED

    wire, keys = _conversation(tmp_path, [
        (0, request_frame(17, 1, 1, "c", {"mechanism": "PLAIN"})),
        (1, response_frame(17, 1, 1, {"error_code": 0, "mechanisms": ["PLAIN"]})),
        (0, request_frame(36, 2, 2, "c", {"auth_bytes": b"\x00alice\x00s3cret"})),
        (1, response_frame(36, 2, 2, {"error_code": 0, "error_message": None, "auth_bytes": b"",
                                      "session_lifetime_ms": 0})),
    ])
    conn = TlsConnection(KeyLog([keys]), lambda: Connection(Options()), _info(),
                         probe=KafkaProbe.from_dissector(), quiet=False, detect_limit=16384, max_held=1 << 20)
    events = _feed(conn, wire)
    requests = [e for e in events if isinstance(e, Request)]
    assert [(r.api_key, r.api_version) for r in requests] == [(17, 1), (36, 2)]
    assert requests[1].body["auth_bytes"] == REDACTED and requests[1].body["sasl_plain_username"] == "alice"
    assert "s3cret" not in repr(events)
    assert [e.status.value for e in events if isinstance(e, Exchange)] == ["ok", "ok"]


def test_live_tls13_waits_for_all_four_secrets_of_a_connection(tmp_path: Path) -> None:
    # A client writes a TLS 1.3 connection's lines one at a time: the keys read in between are partial.
    _, records = pt.read_records(TLS / "tls13.pcap")
    full, _, _ = decode(TLS / "tls13.pcap", keys("tls13"))
    lines = keys("tls13").read_text().splitlines(keepends=True)
    traffic = [ln for ln in lines if ln.startswith(("SERVER_TRAFFIC_SECRET_0", "SERVER_HANDSHAKE"))]
    rest = "".join(ln for ln in lines if ln not in traffic)
    keylog = tmp_path / "live.keys"
    keylog.write_text("".join(traffic))                  # the server-side secrets first
    exchanges, anomalies = _run_live(records, keylog, 12, rest)     # before the first connection ends (14)
    assert not anomalies
    assert {c: len(v) for c, v in exchanges.items()} == {c: len(v) for c, v in full.items()}
