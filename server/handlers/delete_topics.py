"""DeleteTopics (key 20), v0-6: by name (v0-5) or by name or topic id (v6+). Follows
ControllerApis.deleteTopics and ReplicationControlManager.deleteTopics: DELETE on the topic (and
DESCRIBE to learn the name of one asked by id), delete.topic.enable, the controller mutation quota.
Deviations: the topic is gone when the answer comes (no controller round trip); v0 is served as in
Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
In a ZooKeeper cluster the topic is marked for deletion in /admin/delete_topics/<t> (Kafka 3.9's
AdminZkClient.deleteTopic), the controller deletes it, and the answer waits up to timeout_ms for
its UpdateMetadata to drop the topic (REQUEST_TIMED_OUT otherwise), as Kafka's DelayedDeleteTopics.
"""

from __future__ import annotations

import uuid

import trio

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, DESCRIBE, TOPIC
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from . import handler

DeleteTopicsResponse = response_class(ApiKey.DELETE_TOPICS)
Result = DeletableTopicResult = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)


def delete_one(ctx, name: str | None, topic_id: uuid.UUID, mutations):
    services = ctx.services
    image = services.metadata if services.zk_metadata is None else services.zk_metadata
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
    if services.zk_metadata is not None:
        return Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE)  # see delete_in_zookeeper
    services.replica_manager.delete_topic(topic.name)
    services.fetch_sessions.remove_topic(topic.name)
    return Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE)


async def delete_in_zookeeper(ctx, results: list, timeout_ms: int) -> None:
    """Mark the topics for the controller, then wait (timeout_ms) until its UpdateMetadata drops them."""
    cache, client = ctx.services.zk_metadata, ctx.services.zookeeper.client
    deleting = [r for r in results if r.error_code == ErrorCode.NONE]
    for result in deleting:
        await client.mark_topic_for_deletion(result.name)
    if timeout_ms <= 0:
        return
    with trio.move_on_after(timeout_ms / 1000):
        await cache.wait_until(lambda: not any(r.name in cache.topics for r in deleting))
    for result in deleting:
        if result.name in cache.topics:
            result.error_code = ErrorCode.REQUEST_TIMED_OUT


@handler(ApiKey.DELETE_TOPICS, 0, 6)
async def handle(ctx, request):
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    mutations = mutation_quota(ctx, strict_since_version=5)
    results = [delete_one(ctx, n, i, mutations) for n, i in wanted]
    if ctx.services.zk_metadata is not None:
        await delete_in_zookeeper(ctx, results, request.timeout_ms)
    else:
        await ctx.services.groups.topics_deleted({r.name for r in results if r.error_code == ErrorCode.NONE})
    finish_mutations(ctx, mutations)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
