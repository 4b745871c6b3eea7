"""Topics created on first need in a ZooKeeper cluster, as Kafka 3.9's AutoTopicCreationManager does
in ZooKeeper mode: FindCoordinator's coordinator topics (`__consumer_offsets` with
offsets.topic.num.partitions and offsets.topic.replication.factor, `__transaction_state` with the
transaction.state.log.* settings, each with its coordinator's topic configs) and the topics Metadata
names when auto.create.topics.enable allows it (num.partitions, default.replication.factor).

The topic is written to ZooKeeper (replicas by AdminUtils' assignment over the live brokers) and the
controller does the rest; the caller answers at once (COORDINATOR_NOT_AVAILABLE, LEADER_NOT_AVAILABLE)
and the client asks again. While fewer brokers are alive than the replication factor nothing is
created (Kafka's InvalidReplicationFactorException, logged). A topic already being created is not
written twice (Kafka's inflightTopics).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...coordinator.group_coordinator import OFFSETS_TOPIC
from ...coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC
from ...wire.errors import ErrorCode
from . import admin as zk_admin
from .replica_assignment import AdminOperationError, InvalidReplicationFactor, assign_replicas_to_brokers

if TYPE_CHECKING:
    from ..context import BrokerServices

log = logging.getLogger("samsa.auto_topic_creation")


class AutoTopicCreationManager:
    def __init__(self) -> None:
        self._inflight: set[str] = set()

    def creatable_topic(self, services: BrokerServices, name: str) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, configs) of a topic created on first need."""
        get = services.config.get
        if name == OFFSETS_TOPIC:
            return (get("offsets.topic.num.partitions"), get("offsets.topic.replication.factor"),
                    services.groups.topic_configs())
        if name == TRANSACTION_STATE_TOPIC:
            return (get("transaction.state.log.num.partitions"), get("transaction.state.log.replication.factor"),
                    services.transactions.cluster_topic_configs())
        return get("num.partitions"), get("default.replication.factor"), {}

    async def create_topic(self, services: BrokerServices, name: str) -> int:
        """Write `name` to ZooKeeper for the controller. LEADER_NOT_AVAILABLE when written (or there
        already), UNKNOWN_TOPIC_OR_PARTITION while another request is writing it, else why not."""
        if name in self._inflight:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self._inflight.add(name)
        try:
            partitions, replication, configs = self.creatable_topic(services, name)
            brokers = [(b.node_id, b.rack) for b in services.zk_metadata.alive_brokers.values()]
            try:
                assignment = assign_replicas_to_brokers(brokers, partitions, replication)
            except (InvalidReplicationFactor, AdminOperationError) as e:
                log.info("Cannot create topic %s yet: %s", name, e)
                return (ErrorCode.INVALID_REPLICATION_FACTOR if isinstance(e, InvalidReplicationFactor)
                        else ErrorCode.UNKNOWN_SERVER_ERROR)
            try:
                await zk_admin.create_topic(services, name, assignment, configs)
            except zk_admin.AdminError as e:
                if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    return e.code
            return ErrorCode.LEADER_NOT_AVAILABLE
        finally:
            self._inflight.discard(name)
