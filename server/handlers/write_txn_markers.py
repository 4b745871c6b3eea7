"""WriteTxnMarkers (key 27), v0-2: a transaction coordinator (on another broker, in a cluster) has
this broker write COMMIT or ABORT markers to its partitions; the coordinator here writes its own
markers through the same function (server/coordinators/txn_markers.py). Follows
KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION on the cluster; each marker acknowledged
once the partition's ISR has it (acks=all, within request.timeout.ms); logs flushed before answering.
v2 (KIP-1228) names each marker's transaction version: from 2 the partition takes a marker only on
an epoch above the producer's (or the same one again, a retry once the transaction is over),
INVALID_PRODUCER_EPOCH otherwise; v0-1 markers are version 0. A ZooKeeper cluster serves v0-1, as
Kafka 3.9.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
"""

from __future__ import annotations

import trio

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ..coordinators.txn_markers import await_markers_replicated, write_txn_markers
from . import handler

WriteTxnMarkersResponse = response_class(ApiKey.WRITE_TXN_MARKERS)
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


def marker_result(marker, error_of):
    return MarkerResult(producer_id=marker.producer_id, topics=[
        TopicResult(name=t.name, partitions=[PartitionResult(partition_index=index, error_code=error_of(t.name, index))
                                             for index in t.partition_indexes])
        for t in marker.topics])


@handler(ApiKey.WRITE_TXN_MARKERS, 0, 2, zk_max_version=1)
async def handle(ctx, request):
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return WriteTxnMarkersResponse(markers=[
            marker_result(m, lambda topic, index: ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in request.markers])
    results = []
    to_flush = []
    for marker in request.markers:
        partitions = [(t.name, index) for t in marker.topics for index in t.partition_indexes]
        errors, logs = write_txn_markers(ctx.services.replica_manager, ctx.services.groups.complete_transaction,
                                         marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                         marker.coordinator_epoch, partitions,
                                         marker.transaction_version if ctx.api_version >= 2 else 0)
        to_flush += logs
        await await_markers_replicated(ctx.services.replica_manager, errors, ctx.services.config.get("request.timeout.ms"))
        results.append(marker_result(marker, lambda topic, index, errors=errors: errors[(topic, index)]))
    for log_ in dict.fromkeys(to_flush):
        await trio.to_thread.run_sync(log_.flush, limiter=ctx.services.disk_limiter)
    return WriteTxnMarkersResponse(markers=results)
