"""DeleteTopics (key 20), v0-6: by name (v0-5) or by name or topic id (v6+). Follows
ControllerApis.deleteTopics and ReplicationControlManager.deleteTopics: DELETE on the topic (and
DESCRIBE to learn the name of one asked by id), delete.topic.enable, the controller mutation quota.
The AdminManager deletes the topic (server/metadata/admin_manager.py: the single broker at once, so
the topic is gone when the answer comes; in a ZooKeeper cluster it is marked for the controller to
delete), and the answer waits up to timeout_ms for it to be gone (REQUEST_TIMED_OUT otherwise), as
Kafka's DelayedDeleteTopics.
A topic's error carries its error's message (v5+), as Kafka 4.4's ControllerApis answers (ApiError);
in a ZooKeeper cluster none, as Kafka 3.9's KafkaApis answers.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
"""

from __future__ import annotations

import uuid

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, DESCRIBE, TOPIC
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from . import ListenerType, handler

DeleteTopicsResponse = response_class(ApiKey.DELETE_TOPICS)
Result = DeletableTopicResult = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)


async def delete_one(ctx, name: str | None, topic_id: uuid.UUID, mutations):
    services = ctx.services
    image = services.metadata_cache
    if name is None:
        topic = image.topics_by_id.get(topic_id)
        if topic is None:
            return Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
        # Asked by id without DESCRIBE on the topic: its name is not disclosed.
        if not ctx.authorize(DESCRIBE, TOPIC, topic.name):
            return Result(name=None, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if not ctx.authorize(DELETE, TOPIC, topic.name):
            return Result(name=topic.name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    else:
        if not ctx.authorize(DELETE, TOPIC, name):
            return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        topic = image.topics.get(name)
        if topic is None:
            return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not services.config.get("delete.topic.enable"):
        return Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED)
    if not record_mutations(mutations, topic.num_partitions):
        return Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                      error_message=THROTTLING_QUOTA_EXCEEDED_MESSAGE)
    await services.admin.delete_topic(services, topic.name)
    return Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE)


@handler(ApiKey.DELETE_TOPICS, 0, 6, forwarded=True)
async def handle(ctx, request):
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    mutations = mutation_quota(ctx, strict_since_version=5)
    results = [await delete_one(ctx, n, i, mutations) for n, i in wanted]
    deleted = [r for r in results if r.error_code == ErrorCode.NONE]
    if deleted:
        remaining = await ctx.services.admin.finish_deletions(ctx.services, {r.name for r in deleted},
                                                              request.timeout_ms)
        for result in deleted:
            if result.name in remaining:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
    if ctx.services.listener_type != ListenerType.ZK_BROKER:
        for result in results:
            if result.error_code != ErrorCode.NONE and result.error_message is None:
                result.error_message = ErrorCode(result.error_code).message
    finish_mutations(ctx, mutations)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
