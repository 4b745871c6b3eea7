"""EndTxn (key 26), v0-5: commit or abort a producer's transaction; answered once the decision is
durable in `__transaction_state`, the markers written after it. Follows KafkaApis.handleEndTxnRequest
and TransactionCoordinator.handleEndTransaction: WRITE on the transactional id. v5 is transaction
version 2 (KIP-890 part 2, TransactionVersion.transactionVersionForEndTxn): every end bumps the
producer epoch and the response names the producer id and epoch to go on with; older versions are
version 0 and keep the epoch. A ZooKeeper cluster serves v0-4, as Kafka 3.9.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.transaction_metadata import TV_0, TV_2
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ...wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from ..security.authorizer import TRANSACTIONAL_ID, WRITE
from ..coordinators.txn_service import error_for_version
from . import handler

EndTxnResponse = response_class(ApiKey.END_TXN)
FIRST_TRANSACTION_VERSION_2 = 5


@handler(ApiKey.END_TXN, 0, 5, zk_max_version=4)
async def handle(ctx, request):
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
    version = TV_2 if ctx.api_version >= FIRST_TRANSACTION_VERSION_2 else TV_0
    service = ctx.services.transactions
    error, producer_id, epoch = await service.call(
        request.transactional_id, lambda coordinator, now_ms, ticket: coordinator.end_transaction(
            now_ms, ticket, request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
            version))
    return EndTxnResponse(throttle_time_ms=0, error_code=error_for_version(error, ctx.api_version, 2),
                          producer_id=producer_id, producer_epoch=epoch)
