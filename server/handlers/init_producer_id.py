"""InitProducerId (key 22), v0-5: a producer id and epoch. Follows KafkaApis.handleInitProducerIdRequest
and TransactionCoordinator.handleInitProducerId: without a transactional id every request gets a new
producer id at epoch 0, even one naming its current id and epoch (v3+, KIP-360); with one, the
transaction coordinator (server/coordinators/txn_service.py) gives the id a new epoch, fencing older producers.
The epoch bump of every transaction of version 2 (KIP-890 part 2) is EndTxn v5's (end_txn.py).
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.producer_id_manager import ProducerIdsUnavailable
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ...wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from ..security.authorizer import CLUSTER, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
from ..coordinators.txn_service import error_for_version
from . import handler

InitProducerIdResponse = response_class(ApiKey.INIT_PRODUCER_ID)


def error_response(code: int):
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                                  producer_epoch=NO_PRODUCER_EPOCH)


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle(ctx, request):
    # Kafka 3.x: a transactional producer needs WRITE on its transactional id; an idempotent one
    # IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, transactional_id):
            return error_response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (ctx.authorize(IDEMPOTENT_WRITE, CLUSTER, log_if_denied=False) or ctx.authorize_by_resource_type(WRITE, TOPIC)):
        return error_response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    # Kafka's KafkaApis: a producer id without an epoch, or an epoch without an id, is malformed.
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return error_response(ErrorCode.INVALID_REQUEST)
    if transactional_id is None:
        try:
            producer_id = ctx.services.producer_ids.generate_producer_id()
        except ProducerIdsUnavailable as e:
            return error_response(e.error_code)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                                      producer_epoch=0)
    expected = None if request.producer_id == NO_PRODUCER_ID else (request.producer_id, request.producer_epoch)
    error, producer_id, epoch = await ctx.services.transactions.call(transactional_id, (
        lambda coordinator, now_ms, ticket: coordinator.init_producer_id(now_ms, ticket, transactional_id,
                                                                         request.transaction_timeout_ms, expected)))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error_for_version(error, ctx.api_version, 4),
                                  producer_id=producer_id, producer_epoch=epoch)
