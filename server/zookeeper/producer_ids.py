"""Producer id blocks from ZooKeeper for a broker of a cluster (Kafka 3.9's ZkProducerIdManager):
each block of 1000 is taken in `/latest_producer_id_block` by a conditional write on the znode's
version, so that no two brokers, Apache Kafka's included, ever hand out the same id.

The pure ProducerIdManager (coordinator/producer_id_manager.py) asks for a block synchronously, in
the middle of InitProducerId. A spare block is therefore taken ahead of need, in the background,
at startup and after each block handed out; only when none is ready (more than a block's worth of
producers in one burst) is the request's ZooKeeper round trip waited for on the spot, as Kafka's
ZkProducerIdManager waits for it in the request thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ...wire import zk_data

if TYPE_CHECKING:
    from .zk_client import KafkaZkClient

log = logging.getLogger("samsa.zk_producer_ids")


class ZkProducerIdBlocks:
    def __init__(self, client: KafkaZkClient, broker_id: int, block_size: int) -> None:
        self._client = client
        self._broker_id = broker_id
        self._block_size = block_size
        self._spare: zk_data.ProducerIdBlock | None = None
        self._spare_taken = trio.Event()

    def allocate_block(self, size: int) -> int:
        """ProducerIdManager's allocate_block: the first id of a block of `size` ids of its own."""
        block, self._spare = self._spare, None
        self._spare_taken.set()
        if block is None or block.size != size:
            log.info("No spare producer id block: taking one from ZooKeeper now")
            block = self._client.new_producer_id_block_blocking(self._broker_id, size)
        return block.first_producer_id

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Keep a spare block: one taken at startup, another each time it is used."""
        task_status.started()
        while True:
            if self._spare is None:
                try:
                    self._spare = await self._client.new_producer_id_block(self._broker_id, self._block_size)
                except Exception as e:  # ZooKeeper unreachable for now: the next need takes it on the spot
                    log.warning("Could not take a producer id block from ZooKeeper: %s", e)
            self._spare_taken = trio.Event()
            await self._spare_taken.wait()
