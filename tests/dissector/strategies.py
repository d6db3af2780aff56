"""Hypothesis strategies: random valid bodies for any message the schema defines.

Bodies follow the decoders' conventions (see ``dissector.encoder``), so that
``decode(encode(body)) == body`` must hold exactly: every tagged field is
present (at its default when "absent"), uuids are base64 strings, records are
raw bytes.
"""

from __future__ import annotations

from base64 import urlsafe_b64encode
from functools import cache

from hypothesis import strategies as st

from dissector import schema
from dissector.schema import Field

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
MAX_ARRAY = 3

def rarely(common: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """``rare`` about one draw in ten: long values everywhere would make every test slow."""
    return st.integers(0, 9).flatmap(lambda i: rare if i == 9 else common)  # shrinks towards common


# Any unicode but lone surrogates, which UTF-8 cannot carry; now and then past 127 bytes,
# where compact lengths need a second varint byte.
texts = rarely(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
               st.text("abcé€", min_size=100, max_size=140))
blobs = rarely(st.binary(max_size=24), st.binary(min_size=126, max_size=140))
uuids = st.binary(min_size=16, max_size=16).map(lambda raw: urlsafe_b64encode(raw)[:22].decode("ascii"))


def _primitive(ftype: str) -> st.SearchStrategy:
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "float64":
        return st.floats(allow_nan=False)  # NaN != NaN would break equality, not decoding
    if ftype == "bool":
        return st.booleans()
    if ftype == "string":
        return texts
    if ftype in ("bytes", "records"):
        return blobs
    if ftype == "uuid":
        return uuids
    raise AssertionError(f"no strategy for {ftype}")


def value_strategy(f: Field, flexible: bool) -> st.SearchStrategy:
    if f.type == "[]struct":
        inner = st.lists(struct_strategy(f.children or (), flexible), max_size=MAX_ARRAY)
    elif f.type.startswith("[]"):
        elem = _primitive(f.type[2:])
        # Primitive arrays are cheap: sometimes long enough for a two-byte compact count.
        inner = rarely(st.lists(elem, max_size=MAX_ARRAY), st.lists(elem, min_size=127, max_size=130))
    elif f.type == "struct":
        inner = struct_strategy(f.children or (), flexible)
    else:
        inner = _primitive(f.type)
    return st.one_of(st.none(), inner) if f.nullable else inner


def _default(f: Field) -> st.SearchStrategy:
    # A fresh list each time: bodies may be mutated downstream.
    return st.builds(list) if f.default == [] else st.just(f.default)


def struct_strategy(fields: tuple[Field, ...], flexible: bool) -> st.SearchStrategy[dict]:
    parts = {}
    for f in fields:
        value = value_strategy(f, flexible)
        parts[f.name] = st.one_of(_default(f), value) if f.tag is not None else value
    base = st.fixed_dictionaries(parts)
    if not flexible:
        return base
    known = {f.tag for f in fields if f.tag is not None}
    unknown = st.dictionaries(st.integers(0, 300).filter(lambda t: t not in known), blobs, max_size=2)

    def merge(pair: tuple[dict, dict]) -> dict:
        body, tags = pair
        if tags:
            body["_unknown_tags"] = tags  # the decoder only adds the key when there are some
        return body

    return st.tuples(base, unknown).map(merge)


@cache
def body_strategy(api_key: int, kind: str, version: int) -> st.SearchStrategy[dict]:
    msg = schema.message(api_key, kind, version)
    assert msg is not None, (api_key, kind, version)
    return struct_strategy(msg.fields, msg.flexible)


@cache
def data_strategy(name: str, version: int) -> st.SearchStrategy[dict]:
    msg = schema.data_message(name, version)
    assert msg is not None, (name, version)
    return struct_strategy(msg.fields, msg.flexible)


def all_messages() -> list[tuple[int, str, int]]:
    """Every (api key, kind, version) the schema defines."""
    out = []
    for key in schema.api_keys():
        lo, hi = schema.version_range(key)  # type: ignore[misc]
        for version in range(lo, hi + 1):
            for kind in ("request", "response"):
                if schema.message(key, kind, version) is not None:
                    out.append((key, kind, version))
    return out


def all_api_versions() -> list[tuple[int, int]]:
    return sorted({(k, v) for k, _, v in all_messages()})


messages = st.sampled_from(all_messages())


@st.composite
def message_and_body(draw) -> tuple[int, str, int, dict]:
    key, kind, version = draw(messages)
    return key, kind, version, draw(body_strategy(key, kind, version))
