"""``kdissect compare``: kdissect's decoding of a capture next to Wireshark's, message by message.

Wireshark runs as ``tshark -T pdml``: unlike ``-T fields``, PDML keeps each
Kafka PDU of a TCP segment as its own element, in order, with the
``_ws.malformed`` marker right after the PDU it belongs to. Ports Wireshark
should decode as Kafka are the broker ports kdissect found (or ``ports``).

Messages pair up by (connection, direction, correlation id); for each pair the
api, version, client id, non-zero error codes and topic names (and topic ids)
are compared, and whether each side could decode the body at all. Error codes
and topics are compared only when both sides decoded the body: a partial decode
proves nothing. A message kdissect decoded and tshark could not (a version or
api that tshark's Wireshark predates, a response whose request it did not
decode, a field it stopped on) is counted apart, with the reason, rather than
as a disagreement; the summary names the tshark it ran.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, TextIO

from capture import CaptureError, CaptureOptions, read_capture
from dissector.events import Anomaly, Exchange, Request, Response
from dissector.schema import api_name

from kdissect.errors import DamagedInput, KdissectError
from kdissect.commands.filters import topics_of
from kdissect.run.source import check_keylogs
from kdissect.run.summary import DAMAGE

KINDS = ("api", "version", "client_id", "decoded", "errors", "topics")


@dataclass(slots=True)
class Message:
    """One Kafka message as one decoder saw it; None where that decoder could not tell."""

    conn: str                    # "client_ip:port-broker_ip:port#n", as capture.ConnectionInfo.id
    direction: str               # request / response
    correlation_id: int
    ts: float                    # epoch seconds of the message's last byte
    api_key: int | None
    api_version: int | None
    client_id: str | None
    errors: frozenset[int]       # non-zero error codes anywhere in the body
    topics: frozenset[str]
    problem: str | None          # why the body was not (fully) decoded, None if it was
    frame: int | None = None     # Wireshark's frame number
    inferred: bool = False       # api/version guessed: the request was not in the capture
    unsupported: str | None = None   # Wireshark's: why its dissector does not know this api or version


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    ours: str
    wireshark: str


# -- our side ----------------------------------------------------------------------------------

def _error_codes(node: Any) -> Iterator[int]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "error_code" and isinstance(value, int):
                if value:
                    yield value
            elif isinstance(value, (dict, list)):
                yield from _error_codes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _error_codes(item)


def _our_message(conn: str, msg: Request | Response, api_key: int | None, api_version: int | None) -> Message:
    kind = "request" if isinstance(msg, Request) else "response"
    if msg.failure is not None:
        problem: str | None = f"{msg.failure.error}: {msg.failure.detail}"
    elif msg.body is None:
        problem = "body not decoded (api or version unknown)"
    else:
        problem = None
    return Message(conn, kind, msg.correlation_id, msg.last_ts / 1e9, api_key, api_version,
                   msg.client_id if isinstance(msg, Request) else None,
                   frozenset(_error_codes(msg.body)), frozenset(topics_of(msg, kind)), problem,
                   inferred=isinstance(msg, Response) and msg.inferred)


def kdissect_messages(path: str, ports: Iterable[int] | None = None) -> tuple[list[Message], set[int]]:
    """Our decoding of ``path``: its messages, and the broker ports of the Kafka connections found."""
    messages, plain_ports, tls_ports = kdissect_decoding(path, ports)
    return messages, plain_ports | tls_ports


def open_capture(path: str, ports: Iterable[int] | None = None, tls_keylog: tuple[str, ...] = ()) -> Any:
    """The capture run our decoding reads; a file that is not a capture is :class:`DamagedInput`."""
    try:
        return read_capture(path, CaptureOptions(ports=frozenset(ports) if ports else None, tls_keylog=tls_keylog))
    except CaptureError as exc:
        raise DamagedInput(str(exc)) from None


def kdissect_decoding(path: str, ports: Iterable[int] | None = None, tls_keylog: tuple[str, ...] = (),
                      damage: list[str] | None = None) -> tuple[list[Message], set[int], set[int]]:
    """Our messages, and the broker ports of the plaintext and of the (decrypted) TLS connections.
    ``damage`` gets what is damaged in the capture file itself (cut short, a corrupt record)."""
    return our_decoding(open_capture(path, ports, tls_keylog), damage)


def our_decoding(run: Any, damage: list[str] | None = None) -> tuple[list[Message], set[int], set[int]]:
    """:func:`kdissect_decoding` of a capture run :func:`open_capture` opened; closes it."""
    messages: list[Message] = []
    broker_ports: set[int] = set()
    tls_ports: set[int] = set()
    try:
        for ce in run:
            ex = ce.event
            if damage is not None and ce.conn is None and isinstance(ex, Anomaly) and ex.kind in DAMAGE:
                damage.append(ex.detail)
            if not isinstance(ex, Exchange) or ce.conn is None:
                continue
            (tls_ports if ce.conn.tls is not None else broker_ports).add(ce.conn.broker_port)
            if ex.request is not None:
                messages.append(_our_message(ce.conn.id, ex.request, ex.api_key, ex.api_version))
            if ex.response is not None:
                messages.append(_our_message(ce.conn.id, ex.response, ex.response.api_key,
                                             ex.response.api_version))
    finally:
        run.close()
    return messages, broker_ports, tls_ports


# -- Wireshark's side --------------------------------------------------------------------------

def tshark_command(path: str, ports: Iterable[int], tshark: str = "tshark", tls_ports: Iterable[int] = (),
                   keylog: str | None = None) -> list[str]:
    cmd = [tshark, "-n", "-r", path]
    if keylog is not None:
        cmd += ["-o", f"tls.keylog_file:{keylog}"]
    for port in sorted(set(ports)):
        cmd += ["-d", f"tcp.port=={port},kafka"]
    for port in sorted(set(tls_ports)):      # Kafka inside TLS: Wireshark needs both layers named
        cmd += ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka"]
    # -J keeps what we read; frames without a Kafka PDU (mid-PDU segments, ACKs) are left out.
    return cmd + ["-Y", "kafka", "-T", "pdml", "-J", "frame ip ipv6 tcp kafka _ws.malformed"]


def _endpoint(ip: str, port: int) -> str:
    try:
        ip = str(ipaddress.ip_address(ip))   # the spelling capture uses, IPv6 compressed alike
    except ValueError:
        pass
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class _PdmlReader:
    """PDML packets -> :class:`Message` per Kafka PDU; elements are dropped once read (flat memory)."""

    def __init__(self, ports: set[int]) -> None:
        self.ports = ports
        self._streams: dict[str, str] = {}        # tcp.stream -> connection id
        self._serials: Counter[str] = Counter()   # 4-tuple -> connections seen with it

    def read(self, stream: IO[bytes]) -> Iterator[Message]:
        root = None
        for event, elem in ET.iterparse(stream, events=("start", "end")):
            if root is None:
                root = elem
            elif event == "end" and elem.tag == "packet":
                yield from self._packet(elem)
                root.clear()

    def _packet(self, packet: ET.Element) -> Iterator[Message]:
        frame, ts, src, dst, sport, dport, stream = None, 0.0, "", "", 0, 0, ""
        pdus: list[dict[str, Any]] = []
        for proto in packet:
            name = proto.get("name")
            if name == "geninfo":
                for f in proto:
                    if f.get("name") == "num":
                        frame = int(f.get("show", "0"))
                    elif f.get("name") == "timestamp":
                        ts = float(f.get("value", "0"))
            elif name in ("ip", "ipv6"):
                for f in proto:
                    if f.get("name") in ("ip.src", "ipv6.src"):
                        src = f.get("show", "")
                    elif f.get("name") in ("ip.dst", "ipv6.dst"):
                        dst = f.get("show", "")
            elif name == "tcp":
                for f in proto:
                    n = f.get("name")
                    if n == "tcp.srcport":
                        sport = int(f.get("show", "0"))
                    elif n == "tcp.dstport":
                        dport = int(f.get("show", "0"))
                    elif n == "tcp.stream":
                        stream = f.get("show", "")
            elif name == "kafka":
                pdus.append(self._pdu(proto))
            elif name == "_ws.malformed" and pdus:
                # An exception ended the PDU just before this marker; keep what led to it.
                before = pdus[-1]["problem"]
                pdus[-1]["problem"] = f"{before}, then malformed" if before else "malformed (exception)"
        for pdu in pdus:
            if pdu["correlation_id"] is None:
                continue
            request = self._is_request(pdu, sport, dport)
            client, broker = ((src, sport), (dst, dport)) if request else ((dst, dport), (src, sport))
            yield Message(self._conn(stream, client, broker), "request" if request else "response",
                          pdu["correlation_id"], ts, pdu["api_key"], pdu["api_version"], pdu["client_id"],
                          frozenset(pdu["errors"]), frozenset(pdu["topics"]), pdu["problem"], frame,
                          unsupported=pdu["unsupported"])

    def _is_request(self, pdu: dict[str, Any], sport: int, dport: int) -> bool:
        if pdu["request"] is not None:
            return bool(pdu["request"])
        return dport in self.ports and sport not in self.ports

    def _conn(self, stream: str, client: tuple[str, int], broker: tuple[str, int]) -> str:
        conn = self._streams.get(stream)
        if conn is None:
            tuple_id = f"{_endpoint(*client)}-{_endpoint(*broker)}"
            self._serials[tuple_id] += 1   # a 4-tuple reused later is a new connection, #2, #3...
            conn = self._streams[stream] = f"{tuple_id}#{self._serials[tuple_id]}"
        return conn

    @staticmethod
    def _pdu(proto: ET.Element) -> dict[str, Any]:
        pdu: dict[str, Any] = {"request": None, "api_key": None, "api_version": None, "correlation_id": None,
                               "client_id": None, "errors": set(), "topics": set(), "problem": None,
                               "unsupported": None}
        for f in proto:   # the header: direct children only (member client ids share kafka.client_id)
            name, show = f.get("name"), f.get("show", "")
            if name in ("kafka.request_key", "kafka.response_key"):
                pdu["request"] = name == "kafka.request_key"
                pdu["api_key"] = int(show)
            elif name in ("kafka.request.version", "kafka.response.version"):
                pdu["api_version"] = int(show)
            elif name == "kafka.correlation_id":
                pdu["correlation_id"] = int(show)
            elif name == "kafka.client_id":
                pdu["client_id"] = show
            elif name == "_ws.expert" and _has(f, "kafka.request_missing"):
                # Unpaired, Wireshark does not know the api and leaves the body undecoded.
                pdu["request"] = False
                pdu["problem"] = "request missing: body not decoded"
            elif name in ("kafka.api_version", "kafka.api_key"):
                for bad in ("kafka.unsupported_api_version", "kafka.unknown_api_key"):
                    if _has(f, bad):
                        # 4.0 gives up ("Unsupported Metadata version. Supports v0-9."); 4.4 adds that it
                        # goes on as the newest it knows ("Dissecting assuming v3.").
                        said = " ".join(_experts(f)) or bad
                        pdu["problem"] = pdu["unsupported"] = said
        last_expert = None
        for f in proto.iter():   # the body; the malformed marker may be a nested <proto>
            name = f.get("name")
            if name == "kafka.error":
                code = int(f.get("show", "0"))
                if code:
                    pdu["errors"].add(code)
            elif name == "kafka.topic_name":
                pdu["topics"].add(f.get("show", ""))
            elif name == "kafka.topic_id":
                topic_id = _topic_id(f.get("value", ""))
                if topic_id is not None:
                    pdu["topics"].add(topic_id)
            elif name == "_ws.expert.message":
                last_expert = f.get("show")
            elif name == "_ws.malformed" and f.tag == "proto":
                pdu["problem"] = "malformed: " + (last_expert or "exception while dissecting")
        return pdu


def _has(elem: ET.Element, name: str) -> bool:
    return any(f.get("name") == name for f in elem.iter())


def _experts(elem: ET.Element) -> list[str]:
    return [f.get("show", "") for f in elem.iter() if f.get("name") == "_ws.expert.message"]


def _topic_id(hex_value: str) -> str | None:
    """Wireshark's topic id (16 bytes in hex) as Kafka and kdissect write it: URL-safe base64, unpadded;
    None for the zero id, which means "no id" (a Metadata request naming its topics)."""
    try:
        raw = bytes.fromhex(hex_value)
    except ValueError:
        return hex_value
    if not raw.strip(b"\0"):
        return None
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _expert(elem: ET.Element) -> str | None:
    """The last expert message under ``elem`` (the one nearest the failure)."""
    found = None
    for f in elem.iter():
        if f.get("name") == "_ws.expert.message":
            found = f.get("show")
    return found


def wireshark_messages(path: str, ports: Iterable[int], tshark: str = "tshark", tls_ports: Iterable[int] = (),
                       keylog: str | None = None, damaged: bool = False) -> list[Message]:
    """Wireshark's decoding of ``path`` with ``ports`` decoded as Kafka (``tls_ports``: inside TLS).
    ``damaged``: the capture is known to be cut short or corrupt, so tshark's failing on it is expected;
    the messages it gave before are compared."""
    ports = set(ports)
    tls_ports = set(tls_ports)
    # stderr to a file: a pipe nobody reads while stdout streams could fill and stall tshark.
    with tempfile.TemporaryFile() as errfile, \
            subprocess.Popen(tshark_command(path, ports, tshark, tls_ports, keylog), stdout=subprocess.PIPE,
                             stderr=errfile) as proc:
        assert proc.stdout is not None
        messages: list[Message] = []
        try:
            messages.extend(_PdmlReader(ports | tls_ports).read(proc.stdout))
        except ET.ParseError:
            pass             # tshark failed half-way: its exit status and stderr say why
        if proc.wait() != 0 and not damaged:
            errfile.seek(0)
            err = errfile.read().decode(errors="replace")
            why = next((ln for ln in err.splitlines() if ln and not ln.startswith("Running as user")), "")
            raise KdissectError(f"tshark failed on {path} (exit {proc.returncode}): {why}")
    return messages


# -- comparing ---------------------------------------------------------------------------------

def match(ours: list[Message], theirs: list[Message]
          ) -> tuple[list[tuple[Message, Message]], list[Message], list[Message]]:
    """Pairs by (connection, direction, correlation id), in order where an id repeats; and the unpaired."""
    waiting: dict[tuple[str, str, int], deque[Message]] = defaultdict(deque)
    for m in ours:
        waiting[(m.conn, m.direction, m.correlation_id)].append(m)
    pairs: list[tuple[Message, Message]] = []
    only_theirs: list[Message] = []
    for t in theirs:
        queue = waiting.get((t.conn, t.direction, t.correlation_id))
        if queue:
            pairs.append((queue.popleft(), t))
        else:
            only_theirs.append(t)
    only_ours = [m for queue in waiting.values() for m in queue]
    return pairs, only_ours, only_theirs


def _show(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, frozenset):
        return "{" + ",".join(str(v) for v in sorted(value)) + "}"
    return str(value)


def differences(ours: Message, theirs: Message) -> list[Difference]:
    diffs = []
    guess = " (inferred)" if ours.inferred else ""
    fields = [("api", _api(ours.api_key) + guess, _api(theirs.api_key)),
              ("version", _show(ours.api_version) + guess, _show(theirs.api_version))]
    if ours.direction == "request":
        fields.append(("client_id", _show(ours.client_id), _show(theirs.client_id)))
    for kind, a, b in fields:
        if a.removesuffix(guess) != b:
            diffs.append(Difference(kind, a, b))
    if (ours.problem is None) != (theirs.problem is None):
        diffs.append(Difference("decoded", ours.problem or "decoded", theirs.problem or "decoded"))
    elif ours.problem is None:
        if ours.errors != theirs.errors:
            diffs.append(Difference("errors", _show(ours.errors), _show(theirs.errors)))
        if ours.topics != theirs.topics:
            diffs.append(Difference("topics", _show(ours.topics), _show(theirs.topics)))
    return diffs


def _api(key: int | None) -> str:
    return "?" if key is None else api_name(key)


def _label(m: Message, ours: Message | None = None) -> str:
    """Frame, connection, direction and correlation id of ``m``; its api and version, or when it has
    none (tshark did not know the request), kdissect's ``ours``."""
    named = ours if m.api_key is None and ours is not None else m
    api = _api(named.api_key)
    version = "" if named.api_version is None else f" v{named.api_version}"
    frame = f"frame {m.frame} " if m.frame is not None else ""
    return f"{frame}{m.conn} {m.direction} corr={m.correlation_id} {api}{version}"


def _one_keylog(files: tuple[str, ...], tmp: str) -> str | None:
    """tshark takes one key log file: several are joined in a private temporary copy."""
    if len(files) <= 1:
        return files[0] if files else None
    joined = os.path.join(tmp, "keys.log")
    with open(os.open(joined, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        for name in files:
            with open(name, "rb") as f:
                out.write(f.read().rstrip(b"\n") + b"\n")
    return joined


# Why tshark could not decode a message kdissect decoded: counted apart from disagreements.
UNDECODED = {
    "version": "a version this tshark does not know",
    "api": "an api this tshark does not know",
    "request": "its request not decoded by tshark",
    "malformed": "tshark stopped on a field (malformed)",
}


NEWER_WIRESHARK = (4, 4)   # knows the flexible versions of Kafka 2.4+ (Metadata v12, Produce v9+, Fetch v12+)


def tshark_undecoded(ours: Message, theirs: Message) -> str | None:
    """Why tshark could not decode a message kdissect decoded (a key of :data:`UNDECODED`), or None
    when both decoded it, or kdissect did not: then the two are compared as they are."""
    if ours.problem is not None or theirs.problem is None:
        return None
    if theirs.unsupported is not None:
        return "api" if theirs.api_key is not None and "unknown" in theirs.unsupported.lower() \
            and "version" not in theirs.unsupported.lower() else "version"
    if theirs.problem.startswith("request missing"):
        return "request"
    return "malformed"


def tshark_version(exe: str) -> str | None:
    """``4.0.17`` from ``tshark --version``; None when it does not say."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"TShark \(Wireshark\) (\d+(?:\.\d+)+)", proc.stdout + proc.stderr)
    return m.group(1) if m else None


def run_compare(path: str, ports: list[int] | Iterable[int] | None, out: TextIO,
                tshark: str = "tshark", tls_keylog: tuple[str, ...] = (), damage: list[str] | None = None) -> int:
    """Print where Wireshark and kdissect disagree on ``path``, then a summary; 0 once compared.

    Raises :class:`KdissectError` (one line, exit 1 from the CLI) when tshark is missing or fails, and
    :class:`DamagedInput` (exit 3) for a file that is not a capture. ``damage`` gets what is damaged inside
    the capture (cut short, a corrupt record): what could be read on both sides is compared.
    """
    damage = [] if damage is None else damage
    check_keylogs(tls_keylog)                      # an unreadable key log is bad use, not a damaged capture
    run = open_capture(path, ports, tls_keylog)    # not a capture: said whether tshark is there or not
    exe = shutil.which(tshark)
    if exe is None:
        run.close()
        raise KdissectError(f"{tshark} not found: compare needs Wireshark's tshark "
                            "(Debian/Ubuntu: apt-get install tshark)")
    version = tshark_version(exe)
    ours, broker_ports, tls_ports = our_decoding(run, damage)
    kafka_ports = (set(ports or ()) | broker_ports) - tls_ports
    with tempfile.TemporaryDirectory(prefix="kdissect-keys-") as tmp:
        keylog = _one_keylog(tls_keylog, tmp)
        theirs = (wireshark_messages(path, kafka_ports, exe, tls_ports, keylog, damaged=bool(damage))
                  if kafka_ports | tls_ports else [])
    kafka_ports |= tls_ports
    pairs, only_ours, only_theirs = match(ours, theirs)

    by_kind: Counter[str] = Counter()
    undecoded: Counter[str] = Counter()
    unknown_versions: Counter[str] = Counter()
    disagreeing = 0
    lines: list[tuple[float, str]] = []
    for a, b in pairs:
        why = tshark_undecoded(a, b)
        if why is not None:
            undecoded[why] += 1
            if why in ("version", "api"):
                unknown_versions[f"{_api(a.api_key)} v{a.api_version}"] += 1
            lines.append((b.ts, f"tshark could not decode  {_label(b, a)}: {UNDECODED[why]} "
                                f"({b.unsupported if why in ('version', 'api') else b.problem})"))
            continue
        diffs = differences(a, b)
        if diffs:
            disagreeing += 1
            by_kind.update(d.kind for d in diffs)
            what = "; ".join(f"{d.kind}: kdissect {d.ours}, wireshark {d.wireshark}" for d in diffs)
            lines.append((b.ts, f"differ  {_label(b)}: {what}"))
    lines += [(m.ts, f"only kdissect   {_label(m)}") for m in only_ours]
    lines += [(m.ts, f"only wireshark  {_label(m)}" + (f" ({m.problem})" if m.problem else ""))
              for m in only_theirs]
    for _, line in sorted(lines, key=lambda x: x[0]):
        print(line, file=out)

    if lines:
        print(file=out)
    kinds = ", ".join(f"{k} {by_kind[k]}" for k in KINDS if by_kind[k])
    why = ", ".join(f"{UNDECODED[k]} {undecoded[k]}" for k in UNDECODED if undecoded[k])
    wireshark = f"Wireshark {version}" if version else "its Wireshark"
    print(f"tshark                  {exe} ({wireshark})", file=out)
    print(f"ports decoded as Kafka  {','.join(map(str, sorted(kafka_ports))) or '-'}", file=out)
    print(f"messages compared       {len(pairs)}", file=out)
    print(f"agreeing                {len(pairs) - disagreeing - sum(undecoded.values())}", file=out)
    print(f"tshark could not decode {sum(undecoded.values())}" + (f"  ({why})" if why else ""), file=out)
    print(f"disagreeing             {disagreeing}" + (f"  ({kinds})" if kinds else ""), file=out)
    print(f"only kdissect           {len(only_ours)}", file=out)
    print(f"only wireshark          {len(only_theirs)}", file=out)
    if unknown_versions:
        listed = ", ".join(k for k, _ in unknown_versions.most_common(6))
        more = f" and {len(unknown_versions) - 6} more" if len(unknown_versions) > 6 else ""
        older = version is not None and tuple(int(n) for n in version.split(".")[:2]) < NEWER_WIRESHARK
        newer = ("a newer tshark decodes more of them (Wireshark 4.4: Debian 13's tshark, or wireshark.org)"
                 if older else "a later Wireshark may know them (wireshark.org)")
        print(f"note: {wireshark} does not know {listed}{more}; {newer}; --tshark PATH runs another", file=out)
    return 0
