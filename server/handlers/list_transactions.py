"""ListTransactions (key 66), v0-2: the transactional ids this coordinator knows, filtered by state,
producer id, (v1, KIP-994) how long the transaction has been running and (v2, KIP-1152) a regular
expression the whole id must match (RE2/J's syntax: coordinator/re2j.py; empty or null: every id; one
RE2/J refuses: INVALID_REGULAR_EXPRESSION). Follows KafkaApis.handleListTransactionsRequest and
TransactionStateManager.listTransactionStates: only ids the sender may DESCRIBE are listed.
Deviations: none known.
"""

from __future__ import annotations

import re

from ...coordinator import re2j
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, TRANSACTIONAL_ID
from ..clock import wall_clock_ms
from . import handler

ListTransactionsResponse = response_class(ApiKey.LIST_TRANSACTIONS)
TransactionState = ListTransactionsResponse.TransactionState


@handler(ApiKey.LIST_TRANSACTIONS, 0, 2)
async def handle(ctx, request):
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    error, unknown, found = ctx.services.transactions.list_transactions(
        wall_clock_ms(), request.state_filters, request.producer_id_filters, duration)
    id_pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    if error == ErrorCode.NONE and id_pattern:
        try:
            pattern = re2j.compile(id_pattern)
        except re.error:
            return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=[], transaction_states=[])
        found = [m for m in found if pattern.fullmatch(m.transactional_id)]
    allowed = ctx.authorized(DESCRIBE, TRANSACTIONAL_ID, [m.transactional_id for m in found])
    return ListTransactionsResponse(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
                                    transaction_states=[
                                        TransactionState(transactional_id=m.transactional_id,
                                                         producer_id=m.producer_id,
                                                         transaction_state=m.state.state_name)
                                        for m in found if m.transactional_id in allowed])
