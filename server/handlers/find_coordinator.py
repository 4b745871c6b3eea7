"""FindCoordinator (key 10), v0-6: this broker coordinates every group and every transactional id
(it leads every partition of `__consumer_offsets` and `__transaction_state`); v4+ asks for many keys
at once (KIP-699). Follows KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group or
transactional id. Deviations: the coordinator topic is created on first need and the answer given at
once, where Kafka answers COORDINATOR_NOT_AVAILABLE until AutoTopicCreationManager has created it;
key type 2 (share groups, KIP-932) answers INVALID_REQUEST.
In a ZooKeeper cluster the coordinator is the leader of the key's partition of the coordinator topic
as the controller last told (COORDINATOR_NOT_AVAILABLE without one), as Kafka 3.9 answers; a missing
coordinator topic is written to ZooKeeper for the controller to create (server/zookeeper/auto_topic_creation.py)
and the answer is COORDINATOR_NOT_AVAILABLE until it has a leader, as Kafka 3.9's getCoordinator.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import partition_for
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security import authorizer as acl
from . import handler

FindCoordinatorResponse = response_class(ApiKey.FIND_COORDINATOR)
Coordinator = FindCoordinatorResponse.Coordinator
GROUP, TRANSACTION = 0, 1


async def cluster_coordinator(ctx, topic: str, index: int):
    """The live leader of the key's partition `index` of `topic` on this listener (Kafka's
    ZooKeeper-mode getCoordinator), else COORDINATOR_NOT_AVAILABLE; a missing topic is created."""
    cluster = ctx.services.zk_metadata
    if topic not in cluster.topics:
        await ctx.services.auto_topic_creation.create_topic(ctx.services, topic)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    partitions = cluster.partition_metadata(topic, ctx.listener) or []
    leader = next((p.leader_id for p in partitions if p.partition_index == index), -1)
    node = cluster.alive_node(leader, ctx.listener)
    return (ErrorCode.NONE, node) if node is not None else (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)


async def group_coordinator(ctx, key: str):
    if ctx.services.zk_metadata is not None:
        return await cluster_coordinator(ctx, "__consumer_offsets", ctx.services.groups.partition_for(key))
    ctx.services.groups.ensure_offsets_topic()
    return ErrorCode.NONE, ctx.services.broker_info(ctx.listener)


async def transaction_coordinator(ctx, key: str):
    if ctx.services.zk_metadata is not None:
        return await cluster_coordinator(ctx, "__transaction_state",
                                         partition_for(key, ctx.services.transactions.num_partitions()))
    ctx.services.transactions.ensure_transaction_topic()
    return ErrorCode.NONE, ctx.services.broker_info(ctx.listener)


async def find(ctx, key_type: int, key: str):
    """(error code, error message, node or None) for one key."""
    if key_type == GROUP:
        if not ctx.authorize(acl.DESCRIBE, acl.GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED.message, None
        code, node = await group_coordinator(ctx, key)
    elif key_type == TRANSACTION:
        if not ctx.authorize(acl.DESCRIBE, acl.TRANSACTIONAL_ID, key):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return code, code.message, None
        code, node = await transaction_coordinator(ctx, key)
    else:
        return ErrorCode.INVALID_REQUEST, f"Invalid coordinator type: {key_type}", None
    # Kafka's Errors.message(): the exception's text, "NONE" for success.
    return code, code.message or code.name, node


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle(ctx, request):
    if ctx.api_version < 4:
        code, message, node = await find(ctx, request.key_type, request.key)
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=code, error_message=message, node_id=node.node_id if node else -1,
            host=node.host if node else "", port=node.port if node else -1)
    coordinators = []
    for key in request.coordinator_keys:
        code, message, node = await find(ctx, request.key_type, key)
        coordinators.append(Coordinator(key=key, node_id=node.node_id if node else -1, host=node.host if node else "",
                                        port=node.port if node else -1, error_code=code, error_message=message))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
