"""AlterShareGroupOffsets (key 91), v0: the start offsets of an empty share group's share
partitions (a group that does not exist is created), initialized through the persister
(GroupService.alter_share_group_offsets). Follows KafkaApis.handleAlterShareGroupOffsetsRequest: READ
on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic (its partitions
TOPIC_AUTHORIZATION_FAILED), a topic the metadata lacks UNKNOWN_TOPIC_OR_PARTITION; those come
first in the answer, then the coordinator's. A refusal of the group is the answer's error alone.
UNSUPPORTED_VERSION while share.version is 0
(server/features.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import GROUP, READ, TOPIC
from . import handler

AlterShareGroupOffsetsResponse = response_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
Partition = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition


@handler(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, feature=SHARE_GROUPS)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return AlterShareGroupOffsetsResponse(error_code=refused, error_message=refused.message)
    topics_ = ctx.services.metadata_cache.topics
    readable = ctx.authorized(READ, TOPIC, [t.topic_name for t in request.topics])
    # Kafka's AlterShareGroupOffsetsResponse.Builder: one entry per topic name, partitions appended.
    answer: dict[str, Any] = {}

    def topic(name: str) -> Any:
        if name not in answer:
            info = topics_.get(name)
            answer[name] = Topic(topic_name=name, topic_id=info.topic_id if info else uuid.UUID(int=0), partitions=[])
        return answer[name]

    allowed = []
    for t in request.topics:
        error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.topic_name not in readable
                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if t.topic_name not in topics_ else None)
        if error is None:
            allowed.append(t)
        else:
            topic(t.topic_name).partitions += [Partition(partition_index=p.partition_index, error_code=error,
                                                         error_message=error.message) for p in t.partitions]
    request.topics = allowed
    response = await ctx.services.groups.alter_share_group_offsets(ctx, request)
    if response.error_code != ErrorCode.NONE:
        return AlterShareGroupOffsetsResponse(error_code=response.error_code, error_message=response.error_message)
    for t in response.responses:
        topic(t.topic_name).partitions += [Partition(partition_index=p.partition_index, error_code=p.error_code,
                                                     error_message=p.error_message) for p in t.partitions]
    return AlterShareGroupOffsetsResponse(responses=list(answer.values()))
