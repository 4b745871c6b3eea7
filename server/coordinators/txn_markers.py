"""Writing transaction markers (Kafka's KafkaApis.handleWriteTxnMarkersRequest): a COMMIT or ABORT
control batch appended, as the coordinator, to each partition of a transaction. The transaction
coordinator's own markers and the WriteTxnMarkers API take this one path. A marker written to
`__consumer_offsets` completes the transaction's offsets in the group coordinator."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ...coordinator.group_coordinator import OFFSETS_TOPIC
from ...storage.errors import StorageError
from ...storage.log import AppendOrigin
from ...wire.errors import ErrorCode
from ...wire.records import build_control_batch
from ..clock import wall_clock_ms
from .runtime import await_replication

if TYPE_CHECKING:
    from ..replication.replica_manager import ReplicaManager

# complete_offsets(producer_id, commit, partitions of __consumer_offsets): the group service's
# complete_transaction.
CompleteOffsets = Callable[[int, bool, set[int]], None]


def write_txn_markers(replicas: ReplicaManager, complete_offsets: CompleteOffsets, producer_id: int,
                      producer_epoch: int, commit: bool, coordinator_epoch: int,
                      partitions: Iterable[tuple[str, int]],
                      transaction_version: int = 0) -> tuple[dict[tuple[str, int], int], list[Any]]:
    """(error code by partition, logs to flush before the writes are acknowledged). Markers
    written to `__consumer_offsets` are reported to `complete_offsets`. `transaction_version`: the
    transaction's (WriteTxnMarkers v2, KIP-1228; 0 before), which the partition checks the epoch by."""
    errors: dict[tuple[str, int], int] = {}
    to_flush = []
    offsets_partitions = set()
    for topic, index in partitions:
        partition = replicas.get(topic, index)
        if partition is None:
            errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not partition.is_leader:  # in a cluster: a follower's log takes only what its leader has
            errors[(topic, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        marker = bytearray(build_control_batch("COMMIT" if commit else "ABORT", producer_id, producer_epoch,
                                               coordinator_epoch, 0, wall_clock_ms()))
        try:
            info = partition.append(marker, origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version)
        except StorageError as e:
            errors[(topic, index)] = e.error_code
            continue
        errors[(topic, index)] = ErrorCode.NONE
        if info.flush_needed:
            to_flush.append(partition.log)
        if topic == OFFSETS_TOPIC:
            offsets_partitions.add(index)
    if offsets_partitions:
        complete_offsets(producer_id, commit, offsets_partitions)
    return errors, to_flush


async def await_markers_replicated(replicas: ReplicaManager, errors: dict[tuple[str, int], int],
                                   timeout_ms: int) -> None:
    """Kafka writes markers with acks=all: each written one counts once the partition's ISR has it
    (at once for a partition without followers); `errors` is updated in place."""
    for (topic, index), error in errors.items():
        partition = replicas.get(topic, index)
        if error == ErrorCode.NONE and partition is not None:
            errors[(topic, index)] = await await_replication(partition, partition.log.log_end_offset,
                                                             partition.leader_epoch, timeout_ms)
