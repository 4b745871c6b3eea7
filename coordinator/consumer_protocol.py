"""The topics in a classic consumer's subscription (ConsumerProtocolSubscription, protocol type
"consumer"), which the coordinator needs for offset expiry and OffsetDelete.

Every version of the subscription starts with an int16 version, then the v0 fields (topics, user
data); Kafka reads that v0 prefix whatever the version, so newer clients never break the broker.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The subscription's topics, or None when the bytes do not follow the consumer protocol."""
    try:
        pos = 2  # version
        (count,) = _I.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            (length,) = _H.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(bytes(metadata[pos:pos + length]).decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
