"""CreatePartitions (key 37), v0-3: grow a topic's partition count. Follows
ControllerApis.createPartitions and ReplicationControlManager.createPartitions (Kafka's messages):
ALTER on the topic, validate_only, the controller mutation quota (KIP-599).
The AdminManager plans and adds the partitions (server/metadata/admin_manager.py: the single broker
at once, refusing an assignment naming another broker; in a ZooKeeper cluster written to
/brokers/topics/<t> as Kafka 3.9's ZkAdminManager.createPartitions does), and the answer waits up to
timeout_ms for them to have leaders (REQUEST_TIMED_OUT otherwise).
"""

from __future__ import annotations

from collections import Counter

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, TOPIC
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from ..metadata.admin_manager import AdminError
from ...coordinator.client_metrics import java_hash_order
from . import ListenerType, handler

CreatePartitionsResponse = response_class(ApiKey.CREATE_PARTITIONS)
Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def grow(ctx, topic, request, mutations):
    admin = ctx.services.admin
    assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    try:
        plan = await admin.plan_new_partitions(ctx.services, topic.name, topic.count, assignments)
        if not record_mutations(mutations, len(plan.added)):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED_MESSAGE
        if not request.validate_only:
            await admin.add_partitions(ctx.services, topic.name, plan)
    except AdminError as e:
        return e.code, str(e) or None
    if not request.validate_only and request.timeout_ms > 0:
        if await admin.wait_for_leaders({topic.name: topic.count}, request.timeout_ms):
            return ErrorCode.REQUEST_TIMED_OUT, None
    return ErrorCode.NONE, None


@handler(ApiKey.CREATE_PARTITIONS, 0, 3, forwarded=True)
async def handle(ctx, request):
    counts = Counter(t.name for t in request.topics)
    mutations = mutation_quota(ctx, strict_since_version=3)
    results = []
    kraft = ctx.services.listener_type != ListenerType.ZK_BROKER
    if kraft:  # Kafka 4.4's ControllerApis: each duplicate name answered once, first
        results += [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                    for name in java_hash_order(name for name, count in counts.items() if count > 1)]
    for topic in request.topics:
        if counts[topic.name] > 1:
            if kraft:
                continue
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."  # Kafka 3.9's: each entry
        elif not ctx.authorize(ALTER, TOPIC, topic.name):
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed."
        else:
            code, message = await grow(ctx, topic, request, mutations)
        results.append(Result(name=topic.name, error_code=code, error_message=message))
    finish_mutations(ctx, mutations)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
