"""A topic as the data commands need it: its id (Produce v13, Fetch v13, OffsetFetch v10 and
OffsetCommit v10 name topics by id, earlier versions by name), its partitions and their leaders."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any, NamedTuple

from ..wire.errors import ErrorCode
from . import CommandError
from .client import KafkaClient, check_error


class TopicInfo(NamedTuple):
    name: str
    topic_id: uuid.UUID
    leaders: dict[int, int]  # partition -> leader's node id (-1: none now)

    @property
    def partitions(self) -> list[int]:
        return sorted(self.leaders)

    def by_leader(self, partitions: list[int]) -> dict[int, list[int]]:
        """`partitions` grouped by their leader's node id; CommandError for one without a leader."""
        grouped: dict[int, list[int]] = defaultdict(list)
        for partition in partitions:
            leader = self.leaders.get(partition, -1)
            if leader < 0:
                code = ErrorCode.LEADER_NOT_AVAILABLE if partition in self.leaders else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise CommandError(f"{self.name}-{partition}: {code.name}: {code.message}")
            grouped[leader].append(partition)
        return grouped


async def describe_topic(client: KafkaClient, topic: str) -> TopicInfo:
    """The topic's id, partitions and leaders by Metadata; CommandError (exit 1) for an unknown topic."""
    metadata = await client.metadata([topic])
    for found in metadata.topics:
        if found.name == topic:
            check_error(found.error_code, None, topic)
            return TopicInfo(topic, found.topic_id, {p.partition_index: p.leader_id for p in found.partitions})
    check_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, topic)
    raise AssertionError("unreachable")


def topic_reference(info: TopicInfo, version: int, ids_since: int, name_field: str = "name") -> dict[str, Any]:
    """The field naming the topic in a request at `version`: its id from `ids_since` on, else its
    name (in the field `name_field`: Fetch calls it `topic`)."""
    return {"topic_id": info.topic_id} if version >= ids_since else {name_field: info.name}


def response_topic_name(topic: Any, info: TopicInfo) -> str:
    """The topic a response's topic entry speaks of, whether it carries the name or the id."""
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    return name or (info.name if getattr(topic, "topic_id", None) == info.topic_id else "")
