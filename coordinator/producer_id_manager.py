"""Producer ids for InitProducerId (Kafka's ProducerIdManager), sans I/O.

Ids are handed out from blocks of 1000. Taking a block persists its end first (through
`allocate_block`, the metadata image here, the controller's ProducerIdsRecord in Kafka), so an id
is never handed out twice, across restarts too; the rest of a block in use when the broker stops
is skipped, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from ..wire.errors import ErrorCode

# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdsUnavailable(Exception):
    """No block of producer ids at hand yet (a KRaft broker's next block is still on its way from
    the controller). Kafka's RPCProducerIdManager throws COORDINATOR_LOAD_IN_PROGRESS then, which
    InitProducerId answers and the client retries; `allocate_block` raises it and no id is taken."""

    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[int], int], block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        """`allocate_block(size)` durably reserves the next `size` ids and returns the first."""
        self._allocate_block = allocate_block
        self._block_size = block_size
        self._next_id = 0
        self._block_end = 0  # exclusive; no block yet

    def generate_producer_id(self) -> int:
        """The next id; ProducerIdsUnavailable when a new block is needed and none can be had yet."""
        if self._next_id >= self._block_end:
            first = self._allocate_block(self._block_size)
            self._next_id, self._block_end = first, first + self._block_size
        producer_id = self._next_id
        self._next_id += 1
        return producer_id
