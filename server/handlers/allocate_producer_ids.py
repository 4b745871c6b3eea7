"""AllocateProducerIds (key 67), v0, controller side: a Kafka 3.9 broker in ZooKeeper mode (IBP
3.0-IV0 and later, its RPCProducerIdManager) asks the controller for a block of producer ids
(Kafka 3.9's KafkaApis.handleAllocateProducerIdsRequest, KafkaController.processAllocateProducerIds).
Served in cluster mode only. CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED
otherwise); a broker that is not the controller answers NOT_CONTROLLER; an unregistered broker
BROKER_ID_NOT_REGISTERED, an old broker epoch STALE_BROKER_EPOCH; else the next block of
/latest_producer_id_block (server/zookeeper/controller.py)."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from . import handler

AllocateProducerIdsResponse = response_class(ApiKey.ALLOCATE_PRODUCER_IDS)


@handler(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0, cluster_only=True)
async def handle(ctx, request):
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return AllocateProducerIdsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.services.controller
    answer = None if controller is None else await controller.call(
        "allocate_producer_ids", request.broker_id, request.broker_epoch)
    if answer is None:
        return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    error, block = answer
    if block is None:
        return AllocateProducerIdsResponse(error_code=error)
    return AllocateProducerIdsResponse(producer_id_start=block.first_producer_id, producer_id_len=block.size)
