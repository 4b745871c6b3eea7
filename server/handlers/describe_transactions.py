"""DescribeTransactions (key 65), v0: the state of transactional ids. Follows
KafkaApis.handleDescribeTransactionsRequest and TransactionCoordinator.handleDescribeTransactions:
DESCRIBE on each id, and the partitions shown only of topics the sender may describe.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, TOPIC, TRANSACTIONAL_ID
from . import handler

DescribeTransactionsResponse = response_class(ApiKey.DESCRIBE_TRANSACTIONS)
TransactionState = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData


def describe(ctx, transactional_id: str):
    state = TransactionState(error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state="",
                             transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                             producer_epoch=-1, topics=[])
    if not ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
        state.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return state
    error, metadata = ctx.services.transactions.coordinator_for(transactional_id).describe(transactional_id)
    state.error_code = error
    if metadata is None:
        return state
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.topic_partitions):
        by_topic.setdefault(topic, []).append(partition)
    describable = ctx.authorized(DESCRIBE, TOPIC, by_topic)
    state.transaction_state = metadata.state.state_name
    state.transaction_timeout_ms = metadata.txn_timeout_ms
    state.transaction_start_time_ms = metadata.txn_start_timestamp
    state.producer_id = metadata.producer_id
    state.producer_epoch = metadata.producer_epoch
    state.topics = [TopicData(topic=topic, partitions=partitions) for topic, partitions in by_topic.items()
                    if topic in describable]
    return state


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def handle(ctx, request):
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=[describe(ctx, t) for t in request.transactional_ids])
