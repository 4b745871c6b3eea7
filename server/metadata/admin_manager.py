"""The admin operations whose effect depends on where the cluster's metadata lives (Kafka 3.9's
ZkAdminManager and, in KRaft, the controller's managers): creating, growing and deleting topics,
topic, broker and group configs, client-metrics resources, client quotas, SCRAM credentials, ACLs, topics
created on first need and the coordinators' brokers. Handlers call `AdminManager` and never know
which implementation answers: the single broker, its own controller, changes its image and logs at
once (server/metadata/local_admin.py); a broker of a ZooKeeper cluster writes ZooKeeper for the
controller and the other brokers (server/zookeeper/admin_manager.py); a broker of a KRaft cluster
forwards the client's request to the active controller (server/kraft/admin_manager.py).

Each method takes the broker's services (server/context.py's BrokerServices), as handlers do.
Refusals raise AdminError with Kafka's error code and message, or (the config operations)
ConfigApiError.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ...coordinator.group_coordinator import OFFSETS_TOPIC
from ...coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC
from ...coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from ...coordinator.client_quotas import Entity
    from ...wire.codec import Message
    from ..context import BrokerServices, RequestContext
    from ..security.authorizer import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from ..security.scram import ScramCredential, ScramMechanism
    from .cache import BrokerInfo, TopicInfo


class AdminError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class NewPartitions:
    """How a topic grows: the replicas of each partition added."""

    added: dict[int, list[int]]  # partition id -> replicas


class AdminManager(Protocol):
    # Whether a controller makes this broker's metadata changes (a KRaft cluster's broker): the
    # requests Kafka's brokers forward go to it (forward), and the APIs only a controller answers
    # are served by forwarding them (server/handlers/controller_apis.py).
    forwards_to_controller: bool

    async def forward(self, ctx: RequestContext, request: Message) -> Message | None:
        """The active controller's answer to a client's request (KafkaApis.forwardToController),
        where a controller makes this broker's metadata changes; None where this broker makes them
        (its handler answers)."""

    def controller_versions(self) -> Mapping[int, tuple[int, int] | None] | None:
        """The versions the active controller serves of each API it accepts forwarded (Kafka's
        ApiKeys.forwardable; None: not served), which this broker advertises no wider
        (ApiVersionsResponse.intersectForwardableApis); None where no controller answers them, or
        while its versions are not known. The same object until they change."""

    # --- topics ---------------------------------------------------------------------------------

    def assign_replicas(self, services: BrokerServices, partitions: int, replication_factor: int,
                        assignment: dict[int, list[int]] | None) -> dict[int, list[int]]:
        """The replicas of each partition of a new topic: `assignment` as asked (checked), or placed
        over the live brokers."""

    async def create_topic(self, services: BrokerServices, name: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> uuid.UUID:
        """Create the topic (or, in a cluster, have it created); its id."""

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        """Wait up to timeout_ms for every partition of the topics (name -> partition count) to have
        a leader; the topics still without."""

    async def delete_topic(self, services: BrokerServices, name: str) -> None:
        """Delete the topic (or mark it for the controller to delete)."""

    async def finish_deletions(self, services: BrokerServices, names: set[str], timeout_ms: int) -> set[str]:
        """After delete_topic of each: what follows them; the topics still there after timeout_ms."""

    async def plan_new_partitions(self, services: BrokerServices, topic: str, count: int,
                                  assignments: list[list[int]] | None) -> NewPartitions:
        """How `topic` grows to `count` partitions, as asked or placed over the live brokers."""

    async def add_partitions(self, services: BrokerServices, topic: str, plan: NewPartitions) -> None: ...

    async def auto_create_topic(self, services: BrokerServices, name: str) -> tuple[int, TopicInfo | None]:
        """A topic Metadata names, created on first need (auto.create.topics.enable, or a
        coordinator's topic): (NONE, the topic) when it can be answered now, else (the error
        code to answer, None)."""

    async def coordinator(self, services: BrokerServices, topic: str, partition: int,
                          listener: str) -> tuple[int, BrokerInfo | None]:
        """The broker that coordinates the keys of `partition` of a coordinator topic (its leader),
        as reachable on `listener`: (NONE, it), or (COORDINATOR_NOT_AVAILABLE, None)."""

    # --- configs --------------------------------------------------------------------------------

    async def read_topic_configs(self, services: BrokerServices, name: str) -> None:
        """Before a topic's configs are described: make the metadata cache hold its overrides as
        they are now where they are kept."""

    async def alter_topic_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        """AlterConfigs (replace) or IncrementalAlterConfigs (edit) of a topic's overrides."""

    async def alter_broker_configs(self, services: BrokerServices, resource_name: str, configs: Mapping[str, str],
                                   validate_only: bool) -> None:
        """A BROKER resource's new dynamic configs ("" for the cluster-wide defaults)."""

    def client_metrics_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        """A client-metrics resource's configs (KIP-714)."""

    async def alter_client_metrics(self, services: BrokerServices, name: str, changes, incremental: bool,
                                   validate_only: bool) -> None: ...

    def group_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        """A group's configs (the GROUP config resource), as stored."""

    async def alter_group_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        """AlterConfigs (replace) or IncrementalAlterConfigs (edit) of a group's configs; stored,
        and in force in `services.group_configs` at once."""

    # --- quotas, credentials, ACLs --------------------------------------------------------------

    async def alter_client_quotas(self, services: BrokerServices,
                                  changes: dict[Entity, dict[str, float | None]]) -> None: ...

    async def alter_scram_credentials(self, services: BrokerServices, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None: ...

    async def change_acls(self, services: BrokerServices, acls: Sequence[AclBinding]) -> None:
        """CreateAcls' or DeleteAcls' new ACLs in force."""

    # --- delegation tokens ----------------------------------------------------------------------

    async def store_delegation_token(self, services: BrokerServices, token: TokenInformation) -> None:
        """A token created, renewed or given a new expiry: stored, and in every broker's cache."""

    async def remove_delegation_token(self, services: BrokerServices, token_id: str) -> None:
        """A token expired: removed from the store and from every broker's cache."""


def creatable_topic(services: BrokerServices, name: str) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, configs) of a topic a cluster broker has created on first need: a
    coordinator's internal topic, or one with the broker's defaults."""
    get_int = services.config.get_int
    if name == OFFSETS_TOPIC:
        return (get_int("offsets.topic.num.partitions"), get_int("offsets.topic.replication.factor"),
                services.groups.topic_configs())
    if name == TRANSACTION_STATE_TOPIC:
        return (get_int("transaction.state.log.num.partitions"), get_int("transaction.state.log.replication.factor"),
                services.transactions.cluster_topic_configs())
    if name == SHARE_GROUP_STATE_TOPIC:
        return (get_int("share.coordinator.state.topic.num.partitions"),
                get_int("share.coordinator.state.topic.replication.factor"), services.share_coordinator.topic_configs())
    return get_int("num.partitions"), get_int("default.replication.factor"), {}
