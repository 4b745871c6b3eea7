"""A consumer group's committed offsets at its coordinator: read (OffsetFetch) and written
(OffsetCommit) as a "simple" consumer or the admin client does, with generation -1 and no member
id, which the coordinator accepts while the group has no active members.

OffsetFetch v8 asks for groups in a list, v10 and OffsetCommit v10 name topics by id."""

from __future__ import annotations

import uuid

from ..wire.protocol import message_class
from .client import KafkaClient, check_error
from .topic_metadata import TopicInfo, topic_reference

OffsetFetchRequest = message_class("OffsetFetchRequest")
OffsetCommitRequest = message_class("OffsetCommitRequest")

GROUPS_IN_A_LIST_SINCE = 8
TOPIC_IDS_SINCE = 10
NO_OFFSET = -1


async def committed_offsets(client: KafkaClient, group: str, info: TopicInfo | None = None) -> dict[tuple[str, int], int]:
    """(topic, partition) -> committed offset, of `info`'s partitions or (None) of every partition
    the group has an offset for."""
    coordinator = await client.coordinator(group)
    version = await client.api_version(OffsetFetchRequest, coordinator)
    if version >= GROUPS_IN_A_LIST_SINCE:
        topics = None if info is None else [OffsetFetchRequest.OffsetFetchRequestTopics(
            **topic_reference(info, version, TOPIC_IDS_SINCE), partition_indexes=info.partitions)]
        request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)])
    else:
        topics = None if info is None else [OffsetFetchRequest.OffsetFetchRequestTopic(
            name=info.name, partition_indexes=info.partitions)]
        request = OffsetFetchRequest(group_id=group, topics=topics)
    response = await client.send(request, coordinator)
    if version >= GROUPS_IN_A_LIST_SINCE:
        (answer,) = response.groups
        check_error(answer.error_code, None, group)
        topics_found = answer.topics
    else:
        check_error(response.error_code, None, group)
        topics_found = response.topics
    names = await _topic_names(client, topics_found) if version >= TOPIC_IDS_SINCE else {}
    offsets = {}
    for topic in topics_found:
        name = topic.name or names.get(topic.topic_id, str(topic.topic_id))
        for partition in topic.partitions:
            check_error(partition.error_code, None, f"{group}: {name}-{partition.partition_index}")
            if partition.committed_offset != NO_OFFSET:
                offsets[name, partition.partition_index] = partition.committed_offset
    return offsets


async def _topic_names(client: KafkaClient, topics) -> dict[uuid.UUID, str]:
    if all(topic.name for topic in topics):
        return {}
    metadata = await client.metadata(None)
    return {topic.topic_id: topic.name for topic in metadata.topics}


async def commit_offsets(client: KafkaClient, group: str, info: TopicInfo, offsets: dict[int, int]) -> None:
    """Commit `offsets` (partition -> the next offset to read) for the group; CommandError with the
    coordinator's refusal (a group with active members refuses a commit from outside it)."""
    coordinator = await client.coordinator(group)
    version = await client.api_version(OffsetCommitRequest, coordinator)
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(**topic_reference(info, version, TOPIC_IDS_SINCE), partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
            for p, offset in sorted(offsets.items())])])
    response = await client.send(request, coordinator)
    for topic in response.topics:
        for partition in topic.partitions:
            check_error(partition.error_code, None, f"{group}: {info.name}-{partition.partition_index}")
