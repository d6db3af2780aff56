"""``kdissect show``: one line per Kafka message, like tshark's packet list."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from capture import ConnectionInfo
from dissector.events import Anomaly, Exchange, Request, Response, Status
from dissector.topics import ZERO_UUID, TopicRegistry
from dissector.v07.events import api_name_of, error_name_of

from kdissect.dataset.bodies import body_error
from kdissect.commands.filters import MessageFilter, topics_of
from kdissect.dataset.rows import message_partitions
from kdissect.run.source import DecodeOptions, open_capture_run
from kdissect.run.summary import DAMAGE
from kdissect.commands.tree import message_tree

_MAX_TOPICS = 60   # characters of the topic/partition summary
COMPACT_WIDTH = 120   # --compact's line width when the output is not a terminal


@dataclass(frozen=True, slots=True)
class ShowOptions:
    filter: MessageFilter = field(default_factory=MessageFilter)
    verbose: bool = False          # -V: the decoded tree under each line
    absolute: bool = False         # UTC wall-clock times instead of seconds since the first message
    limit: int | None = None       # stop after this many lines
    width: int | None = None       # --compact: ports only, shorter words, lines cut at this width


class CaptureNames(TopicRegistry):
    """Topic names by id for ``--topic``: those the capture taught so far, else those it teaches later.

    Fetch v13+ names topics by id; a Metadata response maps ids to names, usually before the Fetch,
    but a capture begun after it teaches them later or not at all. The first id met unknown makes
    ``ahead`` read the whole capture once for its names, so a filter by name misses none. A pipe
    cannot be read twice: its unknown ids are kept in ``missed``."""

    def __init__(self, taught: TopicRegistry, ahead: Callable[[], TopicRegistry] | None) -> None:
        super().__init__()
        self.taught = taught
        self.ahead = ahead
        self.later: TopicRegistry | None = None
        self.missed: set[str] = set()

    def name(self, topic_id: str | None) -> str | None:
        found = self.taught.name(topic_id)
        if found is not None or not topic_id or topic_id == ZERO_UUID:
            return found
        if self.later is None and self.ahead is not None:
            self.later = self.ahead()
        found = self.later.name(topic_id) if self.later is not None else None
        if found is None:
            self.missed.add(topic_id)
        return found


def _partition_summary(msg: Request | Response, kind: str, names: TopicRegistry | None) -> str:
    parts: dict[str, list[int]] = {}
    for p in message_partitions(msg, kind, names):
        name = p.topic or p.topic_id or "?"
        if p.partition is not None:
            parts.setdefault(name, []).append(p.partition)
        else:
            parts.setdefault(name, [])
    if not parts:
        names_seen = sorted(topics_of(msg, kind, names))
        text = " ".join(names_seen)
    else:
        text = " ".join(f"{t}[{','.join(map(str, sorted(set(ps))))}]" if ps else t for t, ps in parts.items())
    return text if len(text) <= _MAX_TOPICS else text[:_MAX_TOPICS - 3] + "..."


def _version(msg: Request | Response) -> str:
    return "0.7" if msg.protocol == "0.7" else f"v{msg.api_version}"


class Printer:
    """Lines of a capture's messages, as the capture's events arrive; ``frame``: the number of the packet
    whose arrival completed the message, as Wireshark numbers it (the frame it shows the message in)."""

    def __init__(self, out: TextIO, options: ShowOptions, damage: list[str] | None = None,
                 payloads: Any = None, names: TopicRegistry | None = None) -> None:
        self.out = out
        self.options = options
        self.filter = options.filter
        self.damage = damage   # gets the details of damage to the capture file itself
        self.payloads = payloads       # with -V: a payloads.PayloadDecoder, record values decoded in the tree
        self.names = names     # topic names by id
        self.first_ts: int | None = None
        self.printed = 0
        # Requests shown (or, with --unanswered, that would be), until their exchange ends: its frame.
        self._asked: dict[int, int] = {}

    def _time(self, ts: int) -> str:
        if self.first_ts is None:
            self.first_ts = ts
        if self.options.absolute:
            return datetime.fromtimestamp(ts / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        return f"{(ts - self.first_ts) / 1e9:10.6f}"

    @property
    def done(self) -> bool:
        return self.options.limit is not None and self.printed >= self.options.limit

    def _emit(self, line: str, tree: list[str] | None = None) -> None:
        width = self.options.width
        if width is not None and len(line) > width:
            line = line[:width - 3] + "..."
        self.out.write(line + "\n")
        if tree:
            self.out.write("\n".join(tree) + "\n")
        self.printed += 1

    def _learn(self, msg: Request | Response, kind: str) -> None:
        """Schemas from the ``_schemas`` records a message carries, whether it is shown or not."""
        from dissector.records import decode_records
        from payloads import SCHEMAS_TOPIC, PayloadError
        for p in message_partitions(msg, kind, None):
            data = getattr(p.records, "data", None)
            if p.topic != SCHEMAS_TOPIC or not data:
                continue
            for batch in decode_records(data, strict=False).batches:
                for r in batch.leaves():
                    try:
                        self.payloads.learn(r.key, r.value)
                    except PayloadError:
                        pass                 # a malformed _schemas record teaches nothing

    def _peers(self, conn: ConnectionInfo, arrow: str) -> str:
        if self.options.width is not None:
            return f"{conn.client_port:>5}{'>' if arrow == '->' else '<'}{conn.broker_port:<5}"
        return f"{conn.client_ip}:{conn.client_port} {arrow} {conn.broker_ip}:{conn.broker_port}"

    def _request_line(self, conn: ConnectionInfo, req: Request, frame: int, ts: str) -> str:
        api = api_name_of(req) or "Unknown"
        version = _version(req)
        if self.options.width is not None:
            line = f"{frame:6d} {ts} {self._peers(conn, '->')} {api} {version} req #{req.correlation_id} " \
                   f"{req.client_id or '-'}"
        else:
            line = (f"{frame:6d} {ts}  {self._peers(conn, '->')}  {api} {version} request  "
                    f"corr={req.correlation_id}  client={req.client_id or '-'}")
        extra = _partition_summary(req, "request", self.names)
        if req.failure is not None:
            extra = f"[malformed: {req.failure.error}] " + extra
        return line + "  " + extra if extra else line

    def request(self, conn: ConnectionInfo, req: Request, frame: int) -> None:
        if self.payloads is not None and req.api_key == 0:
            self._learn(req, "request")
        ts = self._time(req.first_ts)
        assert self.first_ts is not None
        filt = self.filter
        if not (filt.when_matches(req.first_ts, frame, self.first_ts) and filt.request_matches(req, self.names)):
            return
        self._asked[id(req)] = frame
        if filt.responses_only or filt.unanswered:
            return
        api = api_name_of(req) or "Unknown"
        self._emit(self._request_line(conn, req, frame, ts),
                   message_tree(req, "request", api, self.payloads) if self.options.verbose else None)

    def exchange(self, conn: ConnectionInfo, ex: Exchange, frame: int) -> None:
        """The end of an exchange: its response's line, or the news that its request got none."""
        asked = self._asked.pop(id(ex.request), None) if ex.request is not None else None
        if ex.response is not None:
            self.response(conn, ex, frame, asked)
        elif ex.status is Status.NO_RESPONSE and asked is not None and ex.request is not None:
            self.unanswered(conn, ex.request, asked)

    def unanswered(self, conn: ConnectionInfo, req: Request, frame: int) -> None:
        ts = self._time(req.first_ts)
        if self.filter.unanswered:
            self._emit(self._request_line(conn, req, frame, ts) + "  [no response]")
        elif not self.filter.responses_only:
            api = api_name_of(req) or "Unknown"
            version = _version(req)
            self._emit(f"     ! {ts}  {conn.id}  no_response: {api} {version} request corr={req.correlation_id} "
                       f"(frame {frame}) got no response in the capture")

    def response(self, conn: ConnectionInfo, ex: Exchange, frame: int, asked: int | None = None) -> None:
        resp = ex.response
        assert resp is not None
        if self.payloads is not None and resp.api_key == 1:
            self._learn(resp, "response")
        ts = self._time(resp.first_ts)
        assert self.first_ts is not None
        code, name = body_error(resp.body)
        if code is not None and resp.protocol == "0.7":
            name = error_name_of(resp, code)
        malformed = ex.status is Status.MALFORMED or resp.failure is not None
        filt = self.filter
        if not (filt.when_matches(resp.first_ts, frame, self.first_ts)
                and filt.response_matches(ex, code, malformed, self.names)):
            return
        api = api_name_of(resp) or "Unknown"
        version = f" {_version(resp)}" if resp.protocol == "0.7" or resp.api_version is not None else ""
        latency = ex.latency_ns / 1e6 if ex.latency_ns is not None else None
        if self.options.width is not None:
            line = f"{frame:6d} {ts} {self._peers(conn, '<-')} {api}{version} resp #{resp.correlation_id} {name or '-'}"
        else:
            line = (f"{frame:6d} {ts}  {self._peers(conn, '<-')}  {api}{version} response "
                    f"corr={resp.correlation_id}  {name or '-'}")
        if latency is not None:
            line += f"  {latency:.3f} ms"
        if ex.status is not Status.OK:
            line += f"  [{ex.status.value}{', api inferred' if resp.inferred else ''}]"
        elif malformed:
            line += "  [malformed]"
        extra = _partition_summary(resp, "response", self.names) if resp.api_key is not None else ""
        if extra:
            line += "  " + extra
        tree = None
        if self.options.verbose:
            tree = message_tree(resp, "response", api, self.payloads)
            if asked is not None:       # where Wireshark puts its [Request Frame: N]
                tree.insert(3, f"        [request in frame {asked}]")
        self._emit(line, tree)

    def anomaly(self, conn: ConnectionInfo | None, a: Anomaly) -> None:
        if conn is None and a.kind in DAMAGE and self.damage is not None:
            self.damage.append(a.detail)
        if self.filter.active:
            return
        where = conn.id if conn is not None else "capture"
        ts = self._time(a.ts) if a.ts else " " * 10
        quirk = a.extra.get("quirk") if a.extra else None
        known = f"  (known quirk of {quirk.of}: {quirk.reason})" if quirk is not None else ""
        self._emit(f"     ! {ts}  {where}  {a.kind}: {a.detail}{known}")


def show(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], out: TextIO, options: ShowOptions,
         decode: DecodeOptions | None = None, damage: list[str] | None = None,
         notes: list[str] | None = None) -> int:
    """Print the messages of a capture (a file, or a rotated capture's files in order); returns the
    number of lines printed. ``damage`` gets what is damaged in the capture file itself (cut short, a
    corrupt record), whatever the filters; ``notes``: what the user should know about the lines
    (topic ids a pipe named before it taught their names)."""
    decode = decode or DecodeOptions()
    payloads = None
    if options.verbose:                  # record keys and values decoded in the tree
        from kdissect.dataset.payload_columns import payload_decoder
        payloads = payload_decoder(decode.schemas, decode.schema_registry, decode.validate_json)
    taught = TopicRegistry()
    run = open_capture_run(path, decode, topics=taught)
    names: TopicRegistry = taught
    wanted = options.filter.topics
    if wanted:
        names = CaptureNames(taught, _names_ahead(path, decode) if _rereadable(path) else None)
    p = Printer(out, options, damage, payloads, names)
    stats = run.stats
    try:
        for ce in run:
            ev = ce.event
            conn: Any = ce.conn
            if isinstance(ev, Request):
                p.request(conn, ev, stats.packets)
            elif isinstance(ev, Exchange):
                p.exchange(conn, ev, stats.packets)
            elif isinstance(ev, Anomaly):
                p.anomaly(conn, ev)
            if p.done:
                break
    finally:
        run.close()
    if wanted and isinstance(names, CaptureNames) and notes is not None:
        notes.extend(_unnamed(names, taught, wanted))
    return p.printed


def _unnamed(names: CaptureNames, taught: TopicRegistry, wanted: frozenset[str]) -> list[str]:
    """What ``--topic`` could not match: ids named too late for a pipe, or never named."""
    late = sorted({n for n in map(taught.name, names.missed) if n is not None} & wanted)
    never = sorted(i for i in names.missed if taught.name(i) is None and i not in wanted)
    out = []
    if late:
        out.append(f"messages naming {', '.join(late)} by topic id before the capture taught the name are not "
                   "shown: a pipe is read once (give the file to show them)")
    if never:
        shown = ", ".join(never[:3]) + (f" and {len(never) - 3} more" if len(never) > 3 else "")
        out.append(f"messages naming topics only by id ({shown}), which no Metadata response in the capture "
                   "names, are not matched by name: give --topic the id")
    return out


def _rereadable(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> bool:
    first = path if isinstance(path, (str, os.PathLike)) else path[0]
    try:
        return os.path.isfile(first)
    except OSError:
        return False


def _names_ahead(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 decode: DecodeOptions) -> Callable[[], TopicRegistry]:
    def read() -> TopicRegistry:
        names = TopicRegistry()
        run = open_capture_run(path, decode, topics=names)
        try:
            for _ in run:
                pass
        finally:
            run.close()
        return names
    return read
