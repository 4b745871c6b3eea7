"""Where a share partition's state is kept (Kafka's Persister): the share coordinator of the
partition's key, reached as Kafka's brokers reach it (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary).

Every method answers an error code of the protocol (ErrorCode.NONE on success), never raises for a
refusal; callers retry as Kafka's DefaultStatePersister does for the retriable ones.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from ...coordinator.share_state import SharePartitionState


class Persister(Protocol):
    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> int:
        """Start (or restart, with a higher state epoch) a share partition's state at start_offset."""
        ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        """The state a share partition's new leader resumes from (the leader epoch fences older leaders)."""
        ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: SharePartitionState) -> int:
        """Record a share partition's changed state (its batches replace those they overlap)."""
        ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> dict[int, int]:
        """Forget share partitions' state (a deleted group or offsets); the error code of each partition."""
        ...

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> tuple[int, SharePartitionState | None]:
        """The state without its batches (start offset, epochs, delivery complete count): for admin and lag."""
        ...
