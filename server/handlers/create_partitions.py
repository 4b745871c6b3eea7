"""CreatePartitions (key 37), v0-3: grow a topic's partition count. Follows
ControllerApis.createPartitions and ReplicationControlManager.createPartitions (Kafka's messages):
ALTER on the topic, validate_only, the controller mutation quota (KIP-599).
Deviations: one broker, so an assignment naming any other broker is INVALID_REPLICA_ASSIGNMENT.
In a ZooKeeper cluster the new partitions are written to /brokers/topics/<t> as Kafka 3.9's
ZkAdminManager.createPartitions does (server/zookeeper/admin.py), and the answer waits up to timeout_ms for
the controller to give them leaders (REQUEST_TIMED_OUT otherwise).
"""

from __future__ import annotations

from collections import Counter

from ...storage.errors import KafkaStorageException
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, TOPIC
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from ..zookeeper.admin import AdminError, add_partitions, plan_new_partitions
from . import handler

CreatePartitionsResponse = response_class(ApiKey.CREATE_PARTITIONS)
Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def grow(ctx, topic, validate_only: bool, mutations):
    services = ctx.services
    info = services.metadata.topics.get(topic.name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic.name}' does not exist."
    if topic.count == info.num_partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.num_partitions} partition(s)."
    if topic.count < info.num_partitions:
        return ErrorCode.INVALID_PARTITIONS, (f"The topic {topic.name} currently has {info.num_partitions} "
                                              f"partition(s); {topic.count} would not be an increase.")
    if topic.assignments is not None:
        if len(topic.assignments) != topic.count - info.num_partitions:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"Attempted to add {topic.count - info.num_partitions} additional partition(s), but only "
                f"{len(topic.assignments)} assignment(s) were specified.")
        for a in topic.assignments:
            if not a.broker_ids or any(b != services.node_id for b in a.broker_ids):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in assignment {a.broker_ids}."
    if not record_mutations(mutations, topic.count - info.num_partitions):
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED_MESSAGE
    if not validate_only:
        try:
            services.replica_manager.add_partitions(topic.name, topic.count)
        except KafkaStorageException as e:
            return e.error_code, str(e)
    return ErrorCode.NONE, None


async def grow_in_cluster(ctx, topic, request, mutations):
    """grow() in a ZooKeeper cluster."""
    assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    try:
        plan = await plan_new_partitions(ctx.services, topic.name, topic.count, assignments)
    except AdminError as e:
        return e.code, str(e)
    if not record_mutations(mutations, len(plan.added)):
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED_MESSAGE
    if not request.validate_only:
        await add_partitions(ctx.services, topic.name, plan)
    if not request.validate_only and request.timeout_ms > 0:
        if await ctx.services.zk_metadata.wait_for_leaders({topic.name: topic.count}, request.timeout_ms):
            return ErrorCode.REQUEST_TIMED_OUT, None
    return ErrorCode.NONE, None


@handler(ApiKey.CREATE_PARTITIONS, 0, 3)
async def handle(ctx, request):
    counts = Counter(t.name for t in request.topics)
    mutations = mutation_quota(ctx, strict_since_version=3)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        elif not ctx.authorize(ALTER, TOPIC, topic.name):
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed."
        elif ctx.services.zk_metadata is not None:
            code, message = await grow_in_cluster(ctx, topic, request, mutations)
        else:
            code, message = grow(ctx, topic, request.validate_only, mutations)
        results.append(Result(name=topic.name, error_code=code, error_message=message))
    finish_mutations(ctx, mutations)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
