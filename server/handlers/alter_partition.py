"""AlterPartition (key 56), v0-3, controller side: a partition leader asks the controller to change
its ISR (Kafka 3.9's KafkaApis.handleAlterPartitionRequest, KafkaController.processAlterPartition,
in coordinator/controller/). Served in cluster mode only. CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise); a broker that is not the controller answers
NOT_CONTROLLER; v0-1 name topics, v2+ give topic ids (an unknown id: UNKNOWN_TOPIC_ID), v3 gives
each ISR member with its broker epoch (a ZooKeeper controller looks at the ids only)."""

from __future__ import annotations

from ...coordinator.controller.kafka_controller import AlterPartitionItem
from ...wire.errors import ErrorCode
from ...wire.messages.alter_partition_response import PartitionData, TopicData
from ...wire.protocol import ApiKey, response_class
from ...wire.zk_data import PartitionState
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ...wire.zk_data import topic_id_string, topic_uuid
from . import handler

AlterPartitionResponse = response_class(ApiKey.ALTER_PARTITION)


@handler(ApiKey.ALTER_PARTITION, 0, 3, cluster_only=True)
async def handle(ctx, request):
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.services.controller
    if controller is None or controller.controller is None:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    use_ids = ctx.api_version > 1
    items, unknown_ids = [], []
    for topic in request.topics:
        name = controller.controller.topic_name(topic_id_string(topic.topic_id)) if use_ids else topic.topic_name
        if name is None:
            unknown_ids.append(topic)
            continue
        for p in topic.partitions:
            isr = [b.broker_id for b in p.new_isr_with_epochs] if ctx.api_version >= 3 else list(p.new_isr)
            items.append(AlterPartitionItem(name, p.partition_index, p.leader_epoch, tuple(isr),
                                            p.leader_recovery_state, p.partition_epoch))
    answer = await controller.call("alter_partition", request.broker_id, request.broker_epoch, items,
                                   ctx.api_version)
    if answer is None:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    error, results = answer
    response = AlterPartitionResponse(error_code=error)
    for topic in unknown_ids:
        response.topics.append(TopicData(topic_id=topic.topic_id, partitions=[
            PartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
            for p in topic.partitions]))
    by_topic: dict[str, TopicData] = {}
    for (name, partition), result in results.items():
        topic = by_topic.get(name)
        if topic is None:
            topic = by_topic[name] = TopicData(topic_name=name, topic_id=topic_uuid(
                controller.controller.ctx.topic_ids.get(name)) if use_ids else topic_uuid(None))
            response.topics.append(topic)
        if isinstance(result, PartitionState):
            topic.partitions.append(PartitionData(
                partition_index=partition, leader_id=result.leader, leader_epoch=result.leader_epoch,
                isr=list(result.isr), leader_recovery_state=result.leader_recovery_state,
                partition_epoch=result.zk_version))
        else:
            topic.partitions.append(PartitionData(partition_index=partition, error_code=result))
    return response
