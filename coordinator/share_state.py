"""A share partition's durable state, as the share coordinator keeps it and the persister carries it.

Kafka's PersisterStateBatch and the partition data of ReadShareGroupState/WriteShareGroupState:
the share-partition start offset (SPSO), the epochs, and the state of the in-flight records past it
that are not simply AVAILABLE with no deliveries, as ranges of offsets with one state and count.
Shared by the share partition (coordinator/share_partition.py), the share coordinator
(coordinator/share_coordinator.py) and the persister between them (server/share/persister.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

# A start offset of -1: the partition's state was initialized without one (a new share partition);
# its leader resolves it by the group's share.auto.offset.reset (Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET).
UNINITIALIZED_START_OFFSET = -1


class RecordState(IntEnum):
    """A record's state in a share partition (Kafka's RecordState; its ids are what is persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True)
class PersisterStateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # a RecordState id
    delivery_count: int


@dataclass(frozen=True)
class SharePartitionState:
    state_epoch: int
    start_offset: int
    leader_epoch: int = -1
    state_batches: list[PersisterStateBatch] = field(default_factory=list)
    # WriteShareGroupState v1 / ReadShareGroupStateSummary v1 (KIP-1226, lag): records past the
    # start offset that are acknowledged or archived; -1 when unknown.
    delivery_complete_count: int = -1
