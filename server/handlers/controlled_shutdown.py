"""ControlledShutdown (key 7), v0-3, controller side: a broker about to stop asks the controller
to move its leaderships away (Kafka 3.9's KafkaApis.handleControlledShutdownRequest,
KafkaController.doControlledShutdown, in coordinator/controller/). Served in cluster mode only.
CLUSTER_ACTION on the cluster; a broker that is not the controller answers NOT_CONTROLLER. The
answer lists the partitions the broker still leads (it asks again until none)."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.messages.controlled_shutdown_response import RemainingPartition
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ..control_plane import UNKNOWN_BROKER_EPOCH
from . import handler

ControlledShutdownResponse = response_class(ApiKey.CONTROLLED_SHUTDOWN)


@handler(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, cluster_only=True)
async def handle(ctx, request):
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.services.controller
    broker_epoch = request.broker_epoch if ctx.api_version >= 2 else UNKNOWN_BROKER_EPOCH
    answer = None if controller is None else await controller.call("controlled_shutdown", request.broker_id,
                                                                   broker_epoch)
    if answer is None:
        return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    error, remaining = answer
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        RemainingPartition(topic, partition) for topic, partition in remaining])
