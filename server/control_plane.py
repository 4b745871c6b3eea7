"""What the handlers of a controller's requests need of the cluster mode: the broker side of
LeaderAndIsr, UpdateMetadata and StopReplica (`ControlPlane`, Kafka 3.9's ZkSupport in KafkaApis)
and the controller side of AlterPartition, ControlledShutdown, ElectLeaders, the partition
reassignment APIs and AllocateProducerIds (`Controller`). Both exist only where a controller sends
brokers these requests, a ZooKeeper cluster (server/zookeeper/); the single broker has neither and
does not serve those APIs (their handlers are `cluster_only`)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..coordinator.controller.kafka_controller import KafkaController
    from .metadata.cache import TopicInfo

UNKNOWN_BROKER_EPOCH = -1  # Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH: a version without it


class ControlPlane(Protocol):
    def is_broker_epoch_stale(self, in_request: int, request_name: str, request) -> bool:
        """Whether a controller's request carries an older epoch of this broker's registration."""

    def take_controller_epoch(self, request, request_name: str, correlation_id: int) -> bool:
        """False for a request of a controller older than the latest one seen (STALE_CONTROLLER_EPOCH)."""

    def update_metadata(self, request, version: int, correlation_id: int) -> tuple[int, dict[str, uuid.UUID]]:
        """Take an UpdateMetadata into the metadata cache; its error code, and the topics it deleted
        (their last partitions gone), by name with their ids."""

    def replica_endpoints(self, listener: str) -> dict[int, tuple[str, int]]:
        """Where each live broker listens on `listener` (followers fetch from their leaders there)."""

    def known_topic(self, name: str) -> TopicInfo | None:
        """A topic as the controller last stated it."""

    async def topic_configs(self, name: str) -> dict[str, str]:
        """A topic's config overrides where the cluster keeps them (a new local log takes them)."""


class Controller(Protocol):
    """The controller's shell on this broker: `controller` is its state machine while this broker
    is the active controller, None otherwise."""

    controller: KafkaController | None

    @property
    def is_active(self) -> bool: ...

    async def call(self, kind: str, *args) -> Any:
        """Run `kind` (a method of KafkaController) among the controller's events; None when this
        broker is not the controller (the handler answers NOT_CONTROLLER)."""
