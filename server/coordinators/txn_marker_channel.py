"""Transaction markers for partitions led by other brokers of a ZooKeeper cluster (Kafka 3.9's
TransactionMarkerChannelManager, reduced to what the sans-I/O coordinator needs): WriteTxnMarkers
to each partition's leader as the controller's metadata (the ZooKeeper metadata cache) names it,
over the broker's `inter.broker.listener.name`, one connection per leader, one request at a time.

The coordinator retries what is not done (coordinator/transaction_coordinator.py,
_markers_written): a partition without a live leader, a leader that is unreachable or answers
NOT_LEADER_OR_FOLLOWER is answered with a retriable error, and its marker is sent again after
`retry.backoff.ms` with the metadata of that time. A partition whose topic is gone from the
metadata is UNKNOWN_TOPIC_OR_PARTITION, which completes it (Kafka drops such markers too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from ..metadata.cache import BrokerInfo

log = logging.getLogger("samsa.txn_marker_channel")

WriteTxnMarkersRequest = request_class(ApiKey.WRITE_TXN_MARKERS)
# v1 (flexible): what Kafka 3.9 sends and serves, and Kafka 4 still does (it removed v0).
WRITE_TXN_MARKERS_VERSION = 1
NO_LEADER = -1

TopicPartition = tuple[str, int]


# Read-only members (properties), so that a class holding them as plain attributes of narrower
# types (ZkMetadataCache's dicts of PartitionState) is one.
class PartitionLeader(Protocol):
    @property
    def leader(self) -> int: ...


class ClusterState(Protocol):
    """What the channel reads of what the controller last said (a ZooKeeper cluster's metadata cache)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def partition_states(self) -> Mapping[str, Mapping[int, PartitionLeader]]: ...

    def alive_node(self, node_id: int, listener: str) -> BrokerInfo | None: ...


class TxnMarkerChannel:
    def __init__(self, cluster: ClusterState, config: KafkaConfig) -> None:
        self._cluster = cluster
        self._config = config
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}
        self._locks: dict[int, trio.Lock] = {}

    def leader_of(self, partition: TopicPartition) -> int | None:
        """The partition's leader as the controller last said, NO_LEADER if it has none, None for a
        partition the metadata does not know."""
        topic, index = partition
        state = self._cluster.partition_states.get(topic, {}).get(index)
        return None if state is None else state.leader

    def led_elsewhere(self, partition: TopicPartition) -> bool:
        """Whether the marker of `partition` is for another broker (or for no one yet)."""
        return self.leader_of(partition) != self._cluster.broker_id

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's marker, written by its leader: the error code per partition."""
        errors: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for partition in partitions:
            leader = self.leader_of(partition)
            if leader is None:
                errors[partition] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif leader == NO_LEADER or self._cluster.alive_node(leader, self._listener) is None:
                errors[partition] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(leader, []).append(partition)

        async def send(leader: int, led: list[TopicPartition]) -> None:
            errors.update(await self._send(leader, producer_id, producer_epoch, commit, coordinator_epoch, led))

        async with trio.open_nursery() as nursery:
            for leader, led in by_leader.items():
                nursery.start_soon(send, leader, led)
        return errors

    @property
    def _listener(self) -> str:
        return self._config.inter_broker_listener_name

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=indexes)
                    for t, indexes in topics.items()])])
        lock = self._locks.setdefault(leader, trio.Lock())
        async with lock:  # a connection carries one request at a time
            try:
                connection = await self._connection(leader)
                response = await connection.call(request, WRITE_TXN_MARKERS_VERSION)
            except (BrokerUnreachable, CodecError) as e:
                log.info("Sending transaction markers to broker %d failed (%s); they will be retried", leader, e)
                await self._drop(leader)
                return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        # a partition left unanswered
        errors: dict[TopicPartition, int] = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for marker in response.markers:
            for topic in marker.topics:
                for result in topic.partitions:
                    if (topic.name, result.partition_index) in errors:
                        errors[(topic.name, result.partition_index)] = result.error_code
        return errors

    async def _connection(self, broker_id: int) -> BrokerConnection:
        node = self._cluster.alive_node(broker_id, self._listener)
        if node is None:
            raise BrokerUnreachable(f"broker {broker_id} is not alive")
        address = (node.host, node.port)
        known = self._connections.get(broker_id)
        if known is not None and known[0] == address:
            return known[1]
        await self._drop(broker_id)
        connection = await BrokerConnection.connect(*address, f"broker-{self._cluster.broker_id}-txn-marker-sender",
                                                    self._config.get_int("request.timeout.ms"))
        self._connections[broker_id] = (address, connection)
        return connection

    async def _drop(self, broker_id: int) -> None:
        known = self._connections.pop(broker_id, None)
        if known is not None:
            with trio.CancelScope(shield=True):
                await known[1].aclose()

    async def aclose(self) -> None:
        for broker_id in list(self._connections):
            await self._drop(broker_id)
