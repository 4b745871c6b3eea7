"""EndTxn (key 26), v0-4: commit or abort a producer's transaction; answered once the decision is
durable in `__transaction_state`, the markers written after it. Follows KafkaApis.handleEndTxnRequest
and TransactionCoordinator.handleEndTransaction: WRITE on the transactional id.
Deviations: v5 (the epoch bump of transaction version 2, KIP-890 part 2; a stable version in Kafka 4.4)
is not served: Samsa implements transaction version 1 (ApiVersions finalizes transaction.version 1).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import TRANSACTIONAL_ID, WRITE
from ..coordinators.txn_service import error_for_version
from . import handler

EndTxnResponse = response_class(ApiKey.END_TXN)


@handler(ApiKey.END_TXN, 0, 4)
async def handle(ctx, request):
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    service = ctx.services.transactions
    error = await service.call(request.transactional_id, lambda coordinator, now_ms, ticket: coordinator.end_transaction(
        now_ms, ticket, request.transactional_id, request.producer_id, request.producer_epoch, request.committed))
    return EndTxnResponse(throttle_time_ms=0, error_code=error_for_version(error, ctx.api_version, 2))
