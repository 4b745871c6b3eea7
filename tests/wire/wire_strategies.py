"""Hypothesis strategies for any generated message at any version, built from the classes' _schema.

Only fields present in the version get values; the rest keep their defaults, since a version
cannot carry them. Shared by the round-trip, differential and fuzz tests.
"""

from __future__ import annotations

import uuid
from functools import cache

from hypothesis import strategies as st

from samsa.wire.codec import FieldInfo, Message, Struct

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
MAX_ITEMS = 3
UNKNOWN_TAG_BASE = 10_000  # above every tag a schema uses


def scalar(kafka_type: str) -> st.SearchStrategy:
    if kafka_type in INT_RANGES:
        lo, hi = INT_RANGES[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(f"no strategy for {kafka_type}")


def field_values(f: FieldInfo, version: int, flexible: bool, unknown_tags: bool) -> st.SearchStrategy:
    element = f.type[2:] if f.is_array else f.type
    if f.struct is not None:
        one = struct_strategy(f.struct, version, flexible, unknown_tags)
    else:
        one = scalar(element)
    values = st.lists(one, max_size=MAX_ITEMS) if f.is_array else one
    return st.one_of(st.none(), values) if f.nullable_in(version) else values


def unknown_tagged() -> st.SearchStrategy:
    entry = st.tuples(st.integers(UNKNOWN_TAG_BASE, UNKNOWN_TAG_BASE + 50), st.binary(max_size=8))
    tags = st.lists(entry, max_size=2, unique_by=lambda t: t[0])
    return tags.map(lambda ts: sorted(ts) or None)


@cache
def struct_strategy(cls: type[Struct], version: int, flexible: bool, unknown_tags: bool = True
                    ) -> st.SearchStrategy:
    """Instances of `cls` holding values that `version` can carry."""
    present = {f.name: field_values(f, version, flexible, unknown_tags) for f in cls._schema if f.in_version(version)}
    if flexible and unknown_tags:
        present["_unknown_tagged"] = unknown_tagged()
    return st.fixed_dictionaries(present).map(lambda values: cls(**values))


def message_strategy(cls: type[Message], version: int, unknown_tags: bool = True) -> st.SearchStrategy:
    return struct_strategy(cls, version, cls.is_flexible(version), unknown_tags)


def unknown_tags_of(s: Struct) -> list:
    """Every struct's _unknown_tagged in a message, depth first: Struct.__eq__ leaves them out."""
    found = [s._unknown_tagged]
    for f in s._schema:
        value = getattr(s, f.name)
        if f.struct is None or value is None:
            continue
        for item in value if f.is_array else [value]:
            found.extend(unknown_tags_of(item))
    return found


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """`data` with a few bytes flipped, inserted, deleted or set to length-like extremes."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "extreme", "truncate"]))
        if kind == "flip" and at < len(out):
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del out[at:at + draw(st.integers(1, 4))]
        elif kind == "extreme":
            out[at:at + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
                                                   b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"]))
        elif kind == "truncate":
            del out[at:]
    return bytes(out)
