"""The message filters of ``kdissect show``: what a user reaches for first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import get_close_matches

from dissector.events import Request, Response
from dissector.schema import api_keys, api_name
from dissector.v07.events import api_name_of
from dissector.v07.views import partition_rows as v07_partition_rows
from dissector.views import topic_names

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


def topics_of(msg: Request | Response, kind: str) -> set[str]:
    """Topic names (or ids, when the name is unknown) a message's body mentions."""
    if msg.protocol == "0.7":
        return {p.topic for p in v07_partition_rows(msg) if p.topic}  # type: ignore[arg-type]
    if msg.api_key is None or msg.api_version is None:
        return set()
    return topic_names(msg.api_key, kind, msg.api_version, msg.body)


@dataclass(frozen=True, slots=True)
class MessageFilter:
    apis: frozenset[int | str] | None = None
    topics: frozenset[str] | None = None
    client_ids: frozenset[str] | None = None
    errors_only: bool = False
    slower_than_ms: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.apis or self.topics or self.client_ids or self.errors_only
                    or self.slower_than_ms is not None)

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

    def request_matches(self, req: Request) -> bool:
        if self.responses_only:
            return False
        if self.apis is not None and not self._api_matches(req):
            return False
        if self.client_ids is not None and req.client_id not in self.client_ids:
            return False
        if self.topics is not None and not (topics_of(req, "request") & self.topics):
            return False
        return True

    def response_matches(self, resp: Response, req: Request | None, error_code: int | None,
                         malformed: bool, latency_ms: float | None) -> bool:
        if self.apis is not None and not self._api_matches(resp):
            return False
        if self.client_ids is not None and (req is None or req.client_id not in self.client_ids):
            return False
        if self.topics is not None:
            seen = topics_of(resp, "response") | (topics_of(req, "request") if req is not None else set())
            if not seen & self.topics:
                return False
        if self.errors_only and not (error_code or malformed):
            return False
        if self.slower_than_ms is not None and (latency_ms is None or latency_ms < self.slower_than_ms):
            return False
        return True
