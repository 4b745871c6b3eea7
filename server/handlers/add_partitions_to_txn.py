"""AddPartitionsToTxn (key 24), v0-5: add partitions to a producer's transaction. v0-3 come from
clients and name one transaction; v4+ (KIP-890) come from brokers and batch several, each added or,
with verify_only, only checked. Follows KafkaApis.handleAddPartitionsToTransactionRequest and
TransactionCoordinator.handleAddPartitionsToTransaction: a transaction naming an unknown (or, v0-3,
unwritable) topic gets that error there and OPERATION_NOT_ATTEMPTED for its other partitions.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.transaction_metadata import TV_0, TV_2
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION, TOPIC, TRANSACTIONAL_ID, WRITE
from ..coordinators.txn_service import error_for_version
from . import handler

AddPartitionsToTxnResponse = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult


def topic_results(partitions: list[tuple[str, int]], error_of) -> list:
    by_topic: dict[str, list] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=index,
                                                              partition_error_code=error_of((topic, index))))
    return [TopicResult(name=topic, results_by_partition=results) for topic, results in by_topic.items()]


async def add_or_verify(ctx, transactional_id: str, producer_id: int, producer_epoch: int, topics,
                        verify_only: bool = False) -> list:
    """The topic results of one transaction."""
    partitions = list(dict.fromkeys((t.name, index) for t in topics for index in t.partitions))
    image = ctx.services.metadata_cache.topics
    refused = {}
    for topic in {t for t, _ in partitions}:
        if ctx.api_version < 4 and not ctx.authorize(WRITE, TOPIC, topic):
            refused[topic] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic not in image:
            refused[topic] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    unknown = {(t, i) for t, i in partitions if t in image and not 0 <= i < image[t].num_partitions}
    if refused or unknown:
        return topic_results(partitions, lambda tp: refused.get(
            tp[0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED))
    service = ctx.services.transactions
    if verify_only:
        errors = service.coordinator_for(transactional_id).verify_partitions(transactional_id, producer_id,
                                                                             producer_epoch, partitions)
        return topic_results(partitions, errors.__getitem__)
    # Kafka's TransactionVersion.transactionVersionForAddPartitionsToTxn: a broker's (v4+) adds for
    # a producer of transaction version 2.
    version = TV_2 if ctx.api_version >= 4 else TV_0
    error = await service.call(transactional_id, lambda coordinator, now_ms, ticket: coordinator.add_partitions(
        now_ms, ticket, transactional_id, producer_id, producer_epoch, partitions, version))
    error = error_for_version(error, ctx.api_version, 2)
    return topic_results(partitions, lambda tp: error)


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def handle(ctx, request):
    if ctx.api_version < 4:
        partitions = [(t.name, index) for t in request.v3_and_below_topics for index in t.partitions]
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
            results = topic_results(partitions, lambda tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            results = await add_or_verify(ctx, request.v3_and_below_transactional_id,
                                          request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                                          request.v3_and_below_topics)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    results = []
    for txn in request.transactions:
        topics = await add_or_verify(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                     txn.verify_only)
        results.append(Result(transactional_id=txn.transactional_id, topic_results=topics))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)
