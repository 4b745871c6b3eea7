"""Producer id blocks from the KRaft controller (Kafka's RPCProducerIdManager): AllocateProducerIds
(key 67) with this broker's id and epoch; the controller hands out each block once, across the
cluster. As in ZooKeeper mode (server/zookeeper/producer_ids.py), the pure ProducerIdManager asks
for a block synchronously, so a spare block is taken ahead of need in the background; when none is
ready (before the first block came, or when producers used a block up faster than the controller
answered) allocate_block raises ProducerIdsUnavailable, which InitProducerId answers with
COORDINATOR_LOAD_IN_PROGRESS as Kafka does while its request to the controller is in flight, and
the client retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ...coordinator.producer_id_manager import ProducerIdsUnavailable
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class
from .controller_channel import ControllerChannel

log = logging.getLogger("samsa.kraft.producer_ids")
AllocateProducerIdsRequest = request_class(ApiKey.ALLOCATE_PRODUCER_IDS)
RETRY_BACKOFF_MS = 50  # Kafka's RPCProducerIdManager.RetryBackoffMs


class KraftProducerIdBlocks:
    def __init__(self, channel: ControllerChannel, broker_id: int, broker_epoch: Callable[[], int]) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._spare: tuple[int, int] | None = None  # (first id, length)
        self._spare_taken = trio.Event()

    def allocate_block(self, size: int) -> int:
        """ProducerIdManager's allocate_block (the controller's block size is Kafka's, 1000)."""
        block, self._spare = self._spare, None
        self._spare_taken.set()
        if block is None:
            raise ProducerIdsUnavailable("Producer ID block is full. Waiting for next block")  # Kafka's message
        return block[0]

    async def run(self, registered: trio.Event, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await registered.wait()  # the request carries the broker epoch
        while True:
            while self._spare is None:
                response = await self._channel.call(AllocateProducerIdsRequest(
                    broker_id=self._broker_id, broker_epoch=self._broker_epoch()), 0)
                if response is not None and response.error_code == ErrorCode.NONE:
                    self._spare = (response.producer_id_start, response.producer_id_len)
                    log.info("Acquired new producerId block ProducerIdsBlock(assignedBrokerId=%d, "
                             "firstProducerId=%d, size=%d)", self._broker_id, *self._spare)
                else:
                    await trio.sleep(RETRY_BACKOFF_MS / 1000)
            self._spare_taken = trio.Event()
            await self._spare_taken.wait()
