"""TxnOffsetCommit (key 28), v0-5: commit a group's offsets within a producer's transaction; they
count as committed once its COMMIT marker reaches `__consumer_offsets` (never after an ABORT).
Follows KafkaApis.handleTxnOffsetCommitRequest and GroupMetadataManager: WRITE on the transactional
id, READ on the group and each topic; unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the group's
partition must be in the transaction (AddOffsetsToTxn), as the coordinator vouches (KIP-890); from v5
(a producer of transaction version 2, which sends no AddOffsetsToTxn) it is added to it here. A
ZooKeeper cluster serves v0-4, as Kafka 3.9.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator, txn_commit_response
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey
from ..security.authorizer import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from . import handler
from .offset_commit import errors_by_partition, split_known

@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 5, zk_max_version=4)
async def handle(ctx, request):
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return txn_commit_response(request, lambda topic, index: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(READ, GROUP, request.group_id):
        return txn_commit_response(request, lambda topic, index: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics])
    known, unknown = split_known(ctx, request)
    known.topics = [t for t in known.topics if t.name in readable]
    errors = {}
    if known.topics:
        groups = ctx.services.groups
        groups.ensure_offsets_topic()
        error = await ctx.services.transactions.verify_offsets_partition(
            request.transactional_id, request.producer_id, request.producer_epoch,
            groups.partition_for(request.group_id), ctx.api_version)
        if error != ErrorCode.NONE:
            errors = {(t.name, p.partition_index): error for t in known.topics for p in t.partitions}
        else:
            errors = errors_by_partition((await groups.submit(ctx, GroupCoordinator.txn_offset_commit, known.group_id, known)).topics)

    def error_of(topic: str, index: int) -> int:
        if topic not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return errors.get((topic, index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return txn_commit_response(request, error_of)
