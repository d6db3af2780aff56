"""``kdissect show``: one line per Kafka message, like tshark's packet list."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from capture import ConnectionInfo
from dissector.events import Anomaly, Exchange, Request, Response, Status
from dissector.v07.events import api_name_of, error_name_of

from kdissect.dataset.bodies import body_error
from kdissect.commands.filters import MessageFilter, topics_of
from kdissect.dataset.rows import message_partitions
from kdissect.run.source import DecodeOptions, open_capture_run
from kdissect.run.summary import DAMAGE
from kdissect.commands.tree import message_tree

_MAX_TOPICS = 60   # characters of the topic/partition summary


@dataclass(frozen=True, slots=True)
class ShowOptions:
    filter: MessageFilter = field(default_factory=MessageFilter)
    verbose: bool = False          # -V: the decoded tree under each line
    absolute: bool = False         # UTC wall-clock times instead of seconds since the first message
    limit: int | None = None       # stop after this many lines


def _partition_summary(msg: Request | Response, kind: str) -> str:
    parts: dict[str, list[int]] = {}
    for p in message_partitions(msg, kind, None):
        name = p.topic or p.topic_id or "?"
        if p.partition is not None:
            parts.setdefault(name, []).append(p.partition)
        else:
            parts.setdefault(name, [])
    if not parts:
        names = sorted(topics_of(msg, kind))
        text = " ".join(names)
    else:
        text = " ".join(f"{t}[{','.join(map(str, sorted(set(ps))))}]" if ps else t for t, ps in parts.items())
    return text if len(text) <= _MAX_TOPICS else text[:_MAX_TOPICS - 3] + "..."


class Printer:
    def __init__(self, out: TextIO, options: ShowOptions, damage: list[str] | None = None,
                 payloads: Any = None) -> None:
        self.out = out
        self.options = options
        self.damage = damage   # gets the details of damage to the capture file itself
        self.payloads = payloads       # with -V: a payloads.PayloadDecoder, record values decoded in the tree
        self.first_ts: int | None = None
        self.number = 0        # every message counts, shown or not, so numbers survive filtering
        self.printed = 0

    def _time(self, ts: int) -> str:
        if self.options.absolute:
            return datetime.fromtimestamp(ts / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        if self.first_ts is None:
            self.first_ts = ts
        return f"{(ts - self.first_ts) / 1e9:10.6f}"

    @property
    def done(self) -> bool:
        return self.options.limit is not None and self.printed >= self.options.limit

    def _emit(self, line: str, tree: list[str] | None = None) -> None:
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

    def request(self, conn: ConnectionInfo, req: Request) -> None:
        if self.payloads is not None and req.api_key == 0:
            self._learn(req, "request")
        self.number += 1
        ts = self._time(req.first_ts)
        if not self.options.filter.request_matches(req):
            return
        api = api_name_of(req) or "Unknown"
        version = "0.7" if req.protocol == "0.7" else f"v{req.api_version}"
        line = (f"{self.number:6d} {ts}  {conn.client_ip}:{conn.client_port} -> {conn.broker_ip}:{conn.broker_port}  "
                f"{api} {version} request  corr={req.correlation_id}  client={req.client_id or '-'}")
        extra = _partition_summary(req, "request")
        if req.failure is not None:
            extra = f"[malformed: {req.failure.error}] " + extra
        if extra:
            line += "  " + extra
        self._emit(line, message_tree(req, "request", api, self.payloads) if self.options.verbose else None)

    def response(self, conn: ConnectionInfo, ex: Exchange) -> None:
        resp = ex.response
        assert resp is not None
        if self.payloads is not None and resp.api_key == 1:
            self._learn(resp, "response")
        self.number += 1
        ts = self._time(resp.first_ts)
        code, name = body_error(resp.body)
        if code is not None and resp.protocol == "0.7":
            name = error_name_of(resp, code)
        latency = ex.latency_ns / 1e6 if ex.latency_ns is not None else None
        malformed = ex.status is Status.MALFORMED or resp.failure is not None
        if not self.options.filter.response_matches(resp, ex.request, code, malformed, latency):
            return
        api = api_name_of(resp) or "Unknown"
        version = " 0.7" if resp.protocol == "0.7" else f" v{resp.api_version}" if resp.api_version is not None else ""
        line = (f"{self.number:6d} {ts}  {conn.client_ip}:{conn.client_port} <- {conn.broker_ip}:{conn.broker_port}  "
                f"{api}{version} response corr={resp.correlation_id}  {name or '-'}")
        if latency is not None:
            line += f"  {latency:.3f} ms"
        if ex.status is not Status.OK:
            line += f"  [{ex.status.value}{', api inferred' if resp.inferred else ''}]"
        elif malformed:
            line += "  [malformed]"
        extra = _partition_summary(resp, "response") if resp.api_key is not None else ""
        if extra:
            line += "  " + extra
        self._emit(line, message_tree(resp, "response", api, self.payloads) if self.options.verbose else None)

    def anomaly(self, conn: ConnectionInfo | None, a: Anomaly) -> None:
        if conn is None and a.kind in DAMAGE and self.damage is not None:
            self.damage.append(a.detail)
        if self.options.filter.active:
            return
        where = conn.id if conn is not None else "capture"
        ts = self._time(a.ts) if a.ts else " " * 10
        self._emit(f"     ! {ts}  {where}  {a.kind}: {a.detail}")


def show(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], out: TextIO, options: ShowOptions,
         decode: DecodeOptions | None = None, damage: list[str] | None = None) -> int:
    """Print the messages of a capture (a file, or a rotated capture's files in order); returns the
    number of lines printed. ``damage`` gets what is damaged in the capture file itself (cut short, a
    corrupt record), whatever the filters."""
    decode = decode or DecodeOptions()
    payloads = None
    if options.verbose:                  # record keys and values decoded in the tree
        from kdissect.dataset.payload_columns import payload_decoder
        payloads = payload_decoder(decode.schemas, decode.schema_registry, decode.validate_json)
    run = open_capture_run(path, decode)
    p = Printer(out, options, damage, payloads)
    try:
        for conn, ev in _events(run):
            if isinstance(ev, Request):
                p.request(conn, ev)  # type: ignore[arg-type]
            elif isinstance(ev, Exchange):
                if ev.response is not None:
                    p.response(conn, ev)  # type: ignore[arg-type]
            elif isinstance(ev, Anomaly):
                p.anomaly(conn, ev)
            if p.done:
                break
    finally:
        run.close()
    return p.printed


def _events(run: object) -> Iterator[tuple[ConnectionInfo | None, object]]:
    for ce in run:  # type: ignore[attr-defined]
        yield ce.conn, ce.event
