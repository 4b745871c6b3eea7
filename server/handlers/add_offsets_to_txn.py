"""AddOffsetsToTxn (key 25), v0-4: put the group's partition of `__consumer_offsets` in the
producer's transaction, so that TxnOffsetCommit may write there and its marker reaches it. Follows
KafkaApis.handleAddOffsetsToTxnRequest and TransactionCoordinator.handleAddPartitionsToTransaction:
WRITE on the transactional id, READ on the group; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import OFFSETS_TOPIC
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ, TRANSACTIONAL_ID, WRITE
from ..coordinators.txn_service import error_for_version
from . import handler

AddOffsetsToTxnResponse = response_class(ApiKey.ADD_OFFSETS_TO_TXN)


@handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle(ctx, request):
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(READ, GROUP, request.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    groups = ctx.services.groups
    groups.ensure_offsets_topic()
    offsets_partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
    service = ctx.services.transactions
    error = await service.call(request.transactional_id, lambda coordinator, now_ms, ticket: coordinator.add_partitions(
        now_ms, ticket, request.transactional_id, request.producer_id, request.producer_epoch, [offsets_partition]))
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error_for_version(error, ctx.api_version, 2))
