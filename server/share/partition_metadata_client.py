"""The end offsets of partitions, wherever they are led (Kafka's NetworkPartitionMetadataClient):
what the lag of a share partition (KIP-1226) is measured against.

Kafka asks each partition's leader with ListOffsets (latest, read_uncommitted: the high watermark).
Here a partition this broker leads is read from its replica; one led by another broker of a
ZooKeeper cluster is asked for with ListOffsets over the inter-broker listener, one request per
leader, on a connection opened for the call (this serves admin requests, which are rare). A
partition without a live leader answers LEADER_NOT_AVAILABLE; one the metadata does not know,
UNKNOWN_TOPIC_OR_PARTITION; an unreachable leader, NETWORK_EXCEPTION.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class

if TYPE_CHECKING:
    from ..context import BrokerServices

log = logging.getLogger("samsa.partition_metadata_client")

ListOffsetsRequest = request_class(ApiKey.LIST_OFFSETS)
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
LIST_OFFSETS_VERSION = 7  # what both Kafka 3.9 and 4.4 serve
NO_LEADER = -1

TopicPartition = tuple[str, int]


class PartitionMetadataClient:
    def __init__(self, services: BrokerServices) -> None:
        self._services = services

    async def list_latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """Each partition's (end offset, error code); the offset is -1 with an error."""
        results: dict[TopicPartition, tuple[int, int]] = {}
        remote: dict[int, list[TopicPartition]] = {}
        services = self._services
        listener = services.config.inter_broker_listener_name
        leaders: dict[str, dict[int, int]] = {}
        for topic, index in partitions:
            if topic not in leaders:
                metadata = services.metadata_cache.partition_metadata(topic, listener) or []
                leaders[topic] = {p.partition_index: p.leader_id for p in metadata}
            leader = leaders[topic].get(index)
            if leader is None:
                results[(topic, index)] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif leader == services.node_id:
                results[(topic, index)] = self._local(topic, index)
            elif leader == NO_LEADER:
                results[(topic, index)] = (-1, ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                remote.setdefault(leader, []).append((topic, index))

        async def ask(leader: int, led: list[TopicPartition]) -> None:
            results.update(await self._ask(leader, led, listener))

        async with trio.open_nursery() as nursery:
            for leader, led in remote.items():
                nursery.start_soon(ask, leader, led)
        return results

    def _local(self, topic: str, index: int) -> tuple[int, int]:
        partition = self._services.replica_manager.get(topic, index)
        if partition is None or not partition.is_leader:
            return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition.read_bound(READ_UNCOMMITTED), ErrorCode.NONE

    async def _ask(self, leader: int, partitions: list[TopicPartition], listener: str) -> dict[TopicPartition,
                                                                                                 tuple[int, int]]:
        node = self._services.metadata_cache.alive_node(leader, listener)
        if node is None:
            return dict.fromkeys(partitions, (-1, ErrorCode.LEADER_NOT_AVAILABLE))
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=READ_UNCOMMITTED, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1,
                                                        timestamp=LATEST_TIMESTAMP) for i in indexes])
            for topic, indexes in by_topic.items()])
        try:
            connection = await BrokerConnection.connect(
                node.host, node.port, f"broker-{self._services.node_id}-partition-metadata-client",
                self._services.config.get_int("request.timeout.ms"))
            try:
                response = await connection.call(request, LIST_OFFSETS_VERSION)
            finally:
                with trio.CancelScope(shield=True):
                    await connection.aclose()
        except (BrokerUnreachable, CodecError) as e:
            log.info("ListOffsets to broker %d failed: %s", leader, e)
            return dict.fromkeys(partitions, (-1, ErrorCode.NETWORK_EXCEPTION))
        # a partition left unanswered
        results: dict[TopicPartition, tuple[int, int]] = dict.fromkeys(partitions, (-1, ErrorCode.UNKNOWN_SERVER_ERROR))
        for topic in response.topics:
            for p in topic.partitions:
                if (topic.name, p.partition_index) in results:
                    results[(topic.name, p.partition_index)] = (p.offset if p.error_code == ErrorCode.NONE else -1,
                                                                p.error_code)
        return results
