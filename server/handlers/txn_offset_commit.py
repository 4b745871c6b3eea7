"""TxnOffsetCommit (key 28), v0-6: commit a group's offsets within a producer's transaction; they
count as committed once its COMMIT marker reaches `__consumer_offsets` (never after an ABORT).
Follows KafkaApis.handleTxnOffsetCommitRequest and GroupMetadataManager: WRITE on the transactional
id, READ on the group and each topic; unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the group's
partition must be in the transaction (AddOffsetsToTxn), as the coordinator vouches (KIP-890); from v5
(a producer of transaction version 2, which sends no AddOffsetsToTxn) it is added to it here. v6
names topics by id (KIP-1319): an unknown one is UNKNOWN_TOPIC_ID. A ZooKeeper cluster serves v0-4,
as Kafka 3.9.
Deviations: none known.
"""

from __future__ import annotations

import copy

from ...coordinator.group_coordinator import GroupCoordinator, txn_commit_response
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey
from ..security.authorizer import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from . import handler
from .offset_commit import errors_by_partition, split_known

FIRST_TOPIC_ID_VERSION = 6


def by_topic_id(ctx, request):
    """v6+: a copy of `request` with each topic's name found by its id ("" for an unknown id), and
    the indexes of the topics whose id is unknown."""
    named = copy.copy(request)
    named.topics, unknown = [], set()
    by_id = ctx.services.metadata_cache.topics_by_id
    for i, topic in enumerate(request.topics):
        info = by_id.get(topic.topic_id)
        if info is None:
            unknown.add(i)
        topic = copy.copy(topic)
        topic.name = "" if info is None else info.name
        named.topics.append(topic)
    return named, unknown


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 6, zk_max_version=4)
async def handle(ctx, request):
    if ctx.api_version >= FIRST_TOPIC_ID_VERSION:
        ids = [t.topic_id for t in request.topics]
        request, unknown_ids = by_topic_id(ctx, request)
        response = await commit(ctx, request)
        for i, (topic, topic_id) in enumerate(zip(response.topics, ids)):
            topic.topic_id = topic_id
            if i in unknown_ids:
                for p in topic.partitions:
                    p.error_code = ErrorCode.UNKNOWN_TOPIC_ID
        return response
    return await commit(ctx, request)


async def commit(ctx, request):
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return txn_commit_response(request, lambda topic, index: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(READ, GROUP, request.group_id):
        return txn_commit_response(request, lambda topic, index: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics if t.name])
    known, unknown = split_known(ctx, request)
    known.topics = [t for t in known.topics if t.name in readable]
    errors = {}
    if known.topics:
        groups = ctx.services.groups
        groups.ensure_offsets_topic()
        error, guard = await ctx.services.transactions.verify_offsets_partition(
            request.transactional_id, request.producer_id, request.producer_epoch,
            groups.partition_for(request.group_id), ctx.api_version)
        if error != ErrorCode.NONE:
            errors = {(t.name, p.partition_index): error for t in known.topics for p in t.partitions}
        else:
            errors = errors_by_partition((await groups.submit(ctx, GroupCoordinator.txn_offset_commit, known.group_id,
                                                              known, guard)).topics)

    def error_of(topic: str, index: int) -> int:
        if topic not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return errors.get((topic, index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return txn_commit_response(request, error_of)
