"""The message filters of ``kdissect show``: what a user reaches for first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from difflib import get_close_matches

from dissector.events import Exchange, Request, Response
from dissector.schema import api_keys, api_name
from dissector.v07.events import api_name_of
from dissector.v07.views import partition_rows as v07_partition_rows
from dissector.topics import TopicRegistry
from dissector.views import partition_rows, topic_names

from kdissect.errors import UsageError

# Kafka 0.7's multi-partition requests have no api key of their own: matched by name.
_V07_ONLY = {"multifetch": "MultiFetch", "multiproduce": "MultiProduce"}


def parse_apis(specs: Iterable[str]) -> frozenset[int | str] | None:
    """``["Produce", "fetch,3"]`` -> api keys; names are case-insensitive, numbers are keys.

    0.7's ``MultiFetch`` and ``MultiProduce`` are kept as names.
    """
    by_name = {api_name(k).lower(): k for k in api_keys()}
    keys: set[int | str] = set()
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            if part.lstrip("-").isdigit():
                keys.add(int(part))
            elif part.lower() in by_name:
                keys.add(by_name[part.lower()])
            elif part.lower() in _V07_ONLY:
                keys.add(_V07_ONLY[part.lower()])
            else:
                close = [api_name(by_name[n]) for n in get_close_matches(part.lower(), list(by_name), n=3)]
                hint = f" (did you mean {', '.join(close)}?)" if close else " (see: kdissect protocol)"
                raise UsageError(f"--api: unknown api {part!r}{hint}")
    return frozenset(keys) or None


def topics_of(msg: Request | Response, kind: str, names: TopicRegistry | None = None) -> set[str]:
    """Topic names a message's body mentions; a topic id stands for its topic while ``names`` does not
    know it."""
    if msg.protocol == "0.7":
        return {p.topic for p in v07_partition_rows(msg) if p.topic}  # type: ignore[arg-type]
    if msg.api_key is None or msg.api_version is None:
        return set()
    return topic_names(msg.api_key, kind, msg.api_version, msg.body, names)


# A Fetch that returned no records after waiting this share of its max_wait_ms is an idle long-poll: the
# broker waited as asked, which is no latency. analysis/jobs/latency.py's ``classified`` draws the same line.
IDLE_FRACTION = 0.9
FETCH = 1


def idle_fetch(ex: Exchange) -> bool:
    """An idle Fetch long-poll: no records back, after waiting (nearly) the request's max_wait_ms."""
    req, resp = ex.request, ex.response
    if req is None or resp is None or req.api_key != FETCH or req.protocol == "0.7" or not req.body:
        return False
    wait = req.body.get("max_wait_ms")
    latency = ex.latency_ns
    if not isinstance(wait, int) or wait <= 0 or latency is None or latency < wait * IDLE_FRACTION * 1e6:
        return False
    if resp.body is None or resp.api_version is None:
        return False
    return not any(p.record_count for p in partition_rows(FETCH, "response", resp.api_version, resp.body))


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_time(text: str, option: str) -> tuple[int, bool]:
    """``--since``/``--until``: seconds since the first message (the time column), or a UTC date and time
    (ISO 8601; an offset may follow). Returns (nanoseconds, absolute): since the epoch when absolute, else
    since the first message. In integers: a float of epoch nanoseconds is off by up to 128 ns."""
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            raise UsageError(f"{option}: expected a finite number of seconds, got {text!r}")
        return round(seconds * 1e9), False
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: expected seconds since the first message (12.5) or a UTC time "
                         f"(2024-05-01T12:00:00), got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - _EPOCH) // timedelta(microseconds=1) * 1000, True


def parse_frames(text: str) -> tuple[int, int]:
    """``--frames``: N, N-M, N- or -M (frame numbers, as Wireshark counts them, from 1)."""
    lo, sep, hi = text.partition("-")
    try:
        first = int(lo) if lo.strip() else 1
        last = (int(hi) if hi.strip() else 2 ** 62) if sep else first
    except ValueError:
        first = last = 0
    if first < 1 or last < first:
        raise UsageError(f"--frames: expected N, N-M, N- or -M with 1 <= N <= M, got {text!r}")
    return first, last


@dataclass(frozen=True, slots=True)
class MessageFilter:
    apis: frozenset[int | str] | None = None
    topics: frozenset[str] | None = None
    client_ids: frozenset[str] | None = None
    errors_only: bool = False
    slower_than_ms: float | None = None
    include_idle: bool = False            # --slower-than keeps idle Fetch long-polls
    unanswered: bool = False              # only requests never answered
    since: tuple[int, bool] | None = None     # (nanoseconds, absolute): see parse_time
    until: tuple[int, bool] | None = None
    frames: tuple[int, int] | None = None

    @property
    def active(self) -> bool:
        return bool(self.apis or self.topics or self.client_ids or self.errors_only or self.unanswered
                    or self.slower_than_ms is not None or self.since or self.until or self.frames)

    @property
    def responses_only(self) -> bool:
        # Errors and latency are facts of responses: requests cannot match them.
        return self.errors_only or self.slower_than_ms is not None

    def _api_matches(self, msg: Request | Response) -> bool:
        assert self.apis is not None
        if msg.protocol == "0.7":
            # By name: 0.7's Fetch and MultiFetch share Fetch's api key, but --api Fetch means Fetch.
            name = api_name_of(msg)
            return any((a if isinstance(a, str) else api_name(a)) == name for a in self.apis)
        return msg.api_key in self.apis

    def _topic_matches(self, wanted: frozenset[str], seen: set[str], msg: Request | Response | None,
                       kind: str) -> bool:
        if seen & wanted:
            return True
        # A topic id given as the filter matches even when its name is known.
        return msg is not None and bool(topics_of(msg, kind) & wanted)

    def when_matches(self, ts: int, frame: int, first_ts: int) -> bool:
        """The time range and frame numbers; ``first_ts``: the first message's, for relative times."""
        if self.frames is not None and not self.frames[0] <= frame <= self.frames[1]:
            return False
        for bound, after in ((self.since, True), (self.until, False)):
            if bound is not None:
                ns, absolute = bound
                limit = ns if absolute else first_ts + ns
                if (ts < limit) if after else (ts >= limit):     # [since, until), as analyze keeps
                    return False
        return True

    def request_matches(self, req: Request, names: TopicRegistry | None = None) -> bool:
        """Every filter a request can match (``unanswered`` aside: it is known later)."""
        if self.apis is not None and not self._api_matches(req):
            return False
        if self.client_ids is not None and req.client_id not in self.client_ids:
            return False
        if self.topics is not None and not self._topic_matches(self.topics, topics_of(req, "request", names),
                                                               req, "request"):
            return False
        return True

    def response_matches(self, ex: Exchange, error_code: int | None, malformed: bool,
                         names: TopicRegistry | None = None) -> bool:
        resp, req = ex.response, ex.request
        assert resp is not None
        if self.unanswered:
            return False
        if self.apis is not None and not self._api_matches(resp):
            return False
        if self.client_ids is not None and (req is None or req.client_id not in self.client_ids):
            return False
        if self.topics is not None:
            seen = topics_of(resp, "response", names) | (topics_of(req, "request", names) if req is not None
                                                          else set())
            if not (self._topic_matches(self.topics, seen, resp, "response")
                    or (req is not None and self._topic_matches(self.topics, set(), req, "request"))):
                return False
        if self.errors_only and not (error_code or malformed):
            return False
        if self.slower_than_ms is not None:
            latency = ex.latency_ns
            if latency is None or latency < self.slower_than_ms * 1e6:
                return False
            if not self.include_idle and idle_fetch(ex):
                return False
        return True
