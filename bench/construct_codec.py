"""The latest MetadataResponse and ProduceRequest written with construct, to measure what a
declarative construct codec would cost against the generated struct-based one (bench/codec.py).

Kept to the two messages and versions measured: MetadataResponse v12 and ProduceRequest v11, both
flexible (compact lengths as unsigned varints, tagged-field sections). Values are construct
Containers; uuids stay 16 raw bytes.
"""

from __future__ import annotations

from construct import (
    Array,
    Bytes,
    Construct,
    ExprAdapter,
    Flag,
    FocusedSeq,
    GreedyBytes,
    Int16sb,
    Int32sb,
    PascalString,
    Prefixed,
    PrefixedArray,
    Rebuild,
    Struct,
    VarInt,
    len_,
    this,
)
from construct.core import stream_read, stream_write

CompactLength = ExprAdapter(VarInt, decoder=lambda n, ctx: n - 1, encoder=lambda n, ctx: n + 1)
CompactString = PascalString(CompactLength, "utf8")


class CompactNullableBytes(Construct):
    """Unsigned varint N, then N - 1 bytes; N = 0 is null."""

    def _parse(self, stream, context, path):
        n = VarInt._parse(stream, context, path)
        return None if n == 0 else stream_read(stream, n - 1, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            stream_write(stream, b"\x00", 1, path)
        else:
            VarInt._build(len(obj) + 1, stream, context, path)
            stream_write(stream, obj, len(obj), path)
        return obj


class CompactNullableString(CompactNullableBytes):
    def _parse(self, stream, context, path):
        raw = super()._parse(stream, context, path)
        return None if raw is None else raw.decode()

    def _build(self, obj, stream, context, path):
        super()._build(None if obj is None else obj.encode(), stream, context, path)
        return obj


def CompactArray(element):
    return FocusedSeq("items", "count" / Rebuild(CompactLength, len_(this.items)), "items" / Array(this.count, element))


TaggedFields = PrefixedArray(VarInt, Struct("tag" / VarInt, "data" / Prefixed(VarInt, GreedyBytes)))

MetadataResponseV12 = Struct(
    "throttle_time_ms" / Int32sb,
    "brokers" / CompactArray(Struct(
        "node_id" / Int32sb,
        "host" / CompactString,
        "port" / Int32sb,
        "rack" / CompactNullableString(),
        "tagged" / TaggedFields,
    )),
    "cluster_id" / CompactNullableString(),
    "controller_id" / Int32sb,
    "topics" / CompactArray(Struct(
        "error_code" / Int16sb,
        "name" / CompactNullableString(),
        "topic_id" / Bytes(16),
        "is_internal" / Flag,
        "partitions" / CompactArray(Struct(
            "error_code" / Int16sb,
            "partition_index" / Int32sb,
            "leader_id" / Int32sb,
            "leader_epoch" / Int32sb,
            "replica_nodes" / CompactArray(Int32sb),
            "isr_nodes" / CompactArray(Int32sb),
            "offline_replicas" / CompactArray(Int32sb),
            "tagged" / TaggedFields,
        )),
        "topic_authorized_operations" / Int32sb,
        "tagged" / TaggedFields,
    )),
    "tagged" / TaggedFields,
)

ProduceRequestV11 = Struct(
    "transactional_id" / CompactNullableString(),
    "acks" / Int16sb,
    "timeout_ms" / Int32sb,
    "topic_data" / CompactArray(Struct(
        "name" / CompactString,
        "partition_data" / CompactArray(Struct(
            "index" / Int32sb,
            "records" / CompactNullableBytes(),
            "tagged" / TaggedFields,
        )),
        "tagged" / TaggedFields,
    )),
    "tagged" / TaggedFields,
)
