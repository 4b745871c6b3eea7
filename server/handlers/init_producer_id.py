"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

Without a transactional id every request gets a new producer id at epoch 0, as Kafka's
TransactionCoordinator does, even one that names its current id and epoch (v3+, KIP-360): an
idempotent producer asks again to start over after an unrecoverable sequence error.

A transactional id needs a transaction coordinator, which this broker does not have yet. Kafka
would answer a retriable coordinator error (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), on which
clients retry until their own timeout; INVALID_REQUEST is fatal in every client, whose message
says the broker is incompatible, so a transactional producer fails at once and clearly.
"""

from __future__ import annotations

import logging

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ...wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from ..authorizer import CLUSTER, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
from . import handler

log = logging.getLogger("samsa.init_producer_id")
InitProducerIdResponse = response_class(ApiKey.INIT_PRODUCER_ID)


def error_response(code: int):
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                                  producer_epoch=NO_PRODUCER_EPOCH)


@handler(ApiKey.INIT_PRODUCER_ID)
async def handle(ctx, request):
    # Kafka 3.x: a transactional producer needs WRITE on its transactional id; an idempotent one
    # IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    if request.transactional_id is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return error_response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (ctx.authorize(IDEMPOTENT_WRITE, CLUSTER, log_if_denied=False) or ctx.authorize_by_resource_type(WRITE, TOPIC)):
        return error_response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if request.transactional_id is not None:
        log.warning("InitProducerId for transactional id %r from %s refused: transactions are not supported yet",
                    request.transactional_id, ctx.client_id)
        return error_response(ErrorCode.INVALID_REQUEST)
    # Kafka's KafkaApis: a producer id without an epoch, or an epoch without an id, is malformed.
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return error_response(ErrorCode.INVALID_REQUEST)
    producer_id = ctx.broker.producer_ids.generate_producer_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=0)
