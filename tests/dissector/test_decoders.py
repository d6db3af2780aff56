"""The generated body decoders' code cache (dissector.decoders.CodeCache).

What the cached code decodes is held to the real samples in
tests/kdissect/run/test_codecache.py; here, the cache's own rules: keyed by source,
read back instead of compiled, and anything unreadable compiled again.
"""

from __future__ import annotations

import marshal

from dissector import schema
from dissector.decoders import Decoders, code_key, message_source
from dissector.encoder import encode_body


class MemoryCache:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.loads = self.stores = 0

    def load(self, key: str) -> bytes | None:
        self.loads += 1
        return self.data.get(key)

    def store(self, key: str, data: bytes) -> None:
        self.stores += 1
        self.data[key] = data


# Classic and flexible versions, with records, arrays of structs and tagged fields.
MESSAGES = [(0, "request", 3), (0, "request", 11), (0, "response", 11), (1, "response", 4), (1, "response", 16),
            (3, "response", 12), (18, "response", 3)]


def _decode_all(decoders: Decoders) -> list:
    out = []
    for api, kind, version in MESSAGES:
        body = encode_body(api, kind, version, {})
        whole = decoders.decode(api, kind, version, body, 0)
        cut = decoders.decode(api, kind, version, body[:len(body) // 2], 0)   # fails: its offset comes from the frame
        out.append((whole.body, whole.end, whole.failure, cut.body, cut.end, cut.failure))
    return out


def test_cached_code_decodes_as_compiled_code() -> None:
    expected = _decode_all(Decoders())
    cache = MemoryCache()
    assert _decode_all(Decoders(code_cache=cache)) == expected
    assert cache.stores == len(cache.data) > 0
    stored = cache.stores
    assert _decode_all(Decoders(code_cache=cache)) == expected      # a new process: every decoder read back
    assert cache.stores == stored
    assert any(f[5] is not None and f[5].offset > 0 for f in expected)


def test_the_key_is_the_source() -> None:
    keys = {v: code_key(message_source(schema.message(0, "request", v))) for v in range(13)}
    # Produce requests changed layout at v3 (transactional id) and v9 (flexible): versions
    # between share one entry, and the three layouts have three keys.
    assert len({keys[v] for v in (0, 1, 2)}) == len({keys[v] for v in (3, 8)}) == len({keys[v] for v in (9, 12)}) == 1
    assert len({keys[0], keys[3], keys[9]}) == 3
    assert keys[9] != code_key(message_source(schema.message(0, "response", 9)))


def test_unreadable_entries_are_compiled_again() -> None:
    expected = _decode_all(Decoders())
    cache = MemoryCache()
    _decode_all(Decoders(code_cache=cache))
    keys = sorted(cache.data)
    cache.data[keys[0]] = b"not marshal data"
    cache.data[keys[1]] = marshal.dumps(compile("x = 1", "<elsewhere>", "exec"))   # code, but not a decoder's
    cache.data[keys[2]] = marshal.dumps(["a list"])
    stores = cache.stores
    assert _decode_all(Decoders(code_cache=cache)) == expected
    assert cache.stores == stores + 3
    again = MemoryCache()
    _decode_all(Decoders(code_cache=again))
    assert cache.data == again.data                                   # and replaced by good entries


def test_decoders_global_look_ups_are_specialized() -> None:
    # Python specializes a global read only in a globals dict whose keys table is of the all-string
    # kind; a compiled dict literal of the decoders' namespace was not, and every read of _S_i,
    # _uvar or len took the slow path. A performance property, checked where it can be seen.
    import dis
    import sys
    if sys.version_info < (3, 11):
        return
    fn = Decoders().get(0, "response", 11)
    body = encode_body(0, "response", 11, {"responses": [{"name": "t", "partition_responses": [{"index": 0}]}]})
    for _ in range(200):
        fn(body, 0, {})
    ops = {i.opname for i in dis.get_instructions(fn, adaptive=True)}
    assert {"LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN"} & ops, sorted(o for o in ops if "GLOBAL" in o)
