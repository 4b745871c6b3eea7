"""The AdminManager of a KRaft cluster's broker. In a KRaft cluster the controller makes every
metadata change; Kafka's brokers forward those requests to it.

The requests Kafka's brokers forward (KafkaApis.forwardToController: topics, partitions, ACLs,
quotas, SCRAM credentials, reassignments, elections, features, delegation tokens, and the configs
left after the broker's own checks) go to the active controller whole, wrapped in an Envelope with
the client's principal (forward, server/kraft/forwarding.py), and the controller's answer is the
client's: as Kafka's broker, this one does not wait for new topics' leaders to show in the
metadata log before answering CreateTopics. The AdminManager's methods that would make those
changes here are never called (AdminManager.forward answers first).

Topics created on first need (Metadata with auto-creation, the coordinators' internal topics, a
streams group's internal topics) are created by a CreateTopics the broker sends as itself (Kafka's
AutoTopicCreationManager; deviation: Kafka wraps one that a client's Metadata request caused in an
Envelope with that client's principal). What needs no change is answered: a coordinator is its
partition's live leader, and configs are read from the metadata log.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

import logging

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class
from ..metadata.admin_manager import AdminError, NewPartitions, creatable_topic
from ..metadata.cache import live_leader
from .controller_channel import ControllerChannel
from .forwarding import ForwardingManager
from .metadata_cache import KraftMetadataCache

if TYPE_CHECKING:
    from ...coordinator.client_quotas import Entity
    from ...wire.codec import Message
    from ..context import BrokerServices, RequestContext
    from ..metadata.cache import BrokerInfo, TopicInfo
    from ..security.authorizer import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from ..security.scram import ScramCredential, ScramMechanism

log = logging.getLogger("samsa.kraft.admin")
CreateTopicsRequest = request_class(ApiKey.CREATE_TOPICS)
CREATE_TOPICS_VERSION = 7
CONTROLLER_TIMEOUT_MS = 30000  # what the controller may take to commit the change
PLACED_BY_CONTROLLER = -1  # a replica the controller places (assign_replicas without an assignment)


def _forwarded() -> NoReturn:
    """A change the controller makes: its request was forwarded (forward), never handled here."""
    raise AssertionError("a KRaft broker forwards this request to the controller")


class KraftAdminManager:
    forwards_to_controller = True

    def __init__(self, cache: KraftMetadataCache, channel: ControllerChannel, forwarding: ForwardingManager) -> None:
        self._cache = cache
        self._channel = channel  # the broker's own requests (topics created on first need)
        self._forwarding = forwarding  # the clients' requests, in Envelopes
        self._creating: set[str] = set()  # topics created on first need, their CreateTopics in flight

    async def forward(self, ctx: RequestContext, request: Message) -> Message:
        return await self._forwarding.forward(ctx, request)

    def controller_versions(self) -> Mapping[int, tuple[int, int] | None] | None:
        return self._forwarding.forwardable_versions()

    # --- topics ---------------------------------------------------------------------------------

    def assign_replicas(self, services: BrokerServices, partitions: int, replication_factor: int,
                        assignment: dict[int, list[int]] | None) -> dict[int, list[int]]:
        """As asked (the controller checks it), or placeholders the controller fills in."""
        if assignment:
            return assignment
        return {p: [PLACED_BY_CONTROLLER] * replication_factor for p in range(partitions)}

    async def create_topic(self, services: BrokerServices, name: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> uuid.UUID:
        result = await self._create(name, assignment, configs)
        if result.error_code != ErrorCode.NONE:
            raise AdminError(result.error_code, result.error_message or "")
        return result.topic_id

    async def _create(self, name: str, assignment: dict[int, list[int]], configs: Mapping[str, str]):
        """CreateTopics of one topic to the controller: its result."""
        Topic, Assignment = CreateTopicsRequest.CreatableTopic, CreateTopicsRequest.CreatableReplicaAssignment
        first = next(iter(assignment.values()), [])
        placed = PLACED_BY_CONTROLLER not in first
        topic = Topic(name=name, num_partitions=-1 if placed else len(assignment),
                      replication_factor=-1 if placed else len(first),
                      assignments=[Assignment(partition_index=p, broker_ids=replicas)
                                   for p, replicas in sorted(assignment.items())] if placed else [],
                      configs=[CreateTopicsRequest.CreatableTopicConfig(name=key, value=value)
                               for key, value in configs.items()])
        response = await self._channel.call(CreateTopicsRequest(topics=[topic], timeout_ms=CONTROLLER_TIMEOUT_MS),
                                            CREATE_TOPICS_VERSION)
        if response is None:
            raise AdminError(ErrorCode.REQUEST_TIMED_OUT, "The active controller did not answer")
        return response.topics[0]

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        return await self._cache.wait_for_leaders(topics, timeout_ms)

    async def delete_topic(self, services: BrokerServices, name: str) -> None:
        _forwarded()

    async def finish_deletions(self, services: BrokerServices, names: set[str], timeout_ms: int) -> set[str]:
        _forwarded()

    async def plan_new_partitions(self, services: BrokerServices, topic: str, count: int,
                                  assignments: list[list[int]] | None) -> NewPartitions:
        _forwarded()

    async def add_partitions(self, services: BrokerServices, topic: str, plan: NewPartitions) -> None:
        _forwarded()

    async def auto_create_topic(self, services: BrokerServices, name: str) -> tuple[int, TopicInfo | None]:
        """Created by the controller: LEADER_NOT_AVAILABLE until the metadata log has its leaders."""
        return await self._create_on_first_need(services, name), None

    async def _create_on_first_need(self, services: BrokerServices, name: str) -> int:
        """CreateTopics to the controller with the topic's defaults (Kafka's AutoTopicCreationManager):
        LEADER_NOT_AVAILABLE when created (or there already), UNKNOWN_TOPIC_OR_PARTITION while
        another request is creating it, else the controller's error."""
        if name in self._creating:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self._creating.add(name)
        try:
            partitions, replication, configs = creatable_topic(services, name)
            try:
                result = await self._create(name, self.assign_replicas(services, partitions, replication, None),
                                            configs)
            except AdminError as e:
                return e.code
            if result.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.info("Sent auto-creation request for %s to the active controller", name)
                return ErrorCode.LEADER_NOT_AVAILABLE
            log.info("Cannot create topic %s: %s", name, result.error_message or ErrorCode(result.error_code).name)
            return result.error_code
        finally:
            self._creating.discard(name)

    async def coordinator(self, services: BrokerServices, topic: str, partition: int,
                          listener: str) -> tuple[int, BrokerInfo | None]:
        """The partition's live leader, as the metadata log says; COORDINATOR_NOT_AVAILABLE while
        the topic does not exist (the controller is asked to create it) or has no live leader."""
        cache = self._cache
        if topic not in cache.topics:
            await self._create_on_first_need(services, topic)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return live_leader(cache, topic, partition, listener)

    # --- configs --------------------------------------------------------------------------------

    async def read_topic_configs(self, services: BrokerServices, name: str) -> None:
        return None  # the metadata cache holds them as the metadata log says

    async def alter_topic_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        _forwarded()

    async def alter_broker_configs(self, services: BrokerServices, resource_name: str, configs: Mapping[str, str],
                                   validate_only: bool) -> None:
        _forwarded()

    def client_metrics_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return self._cache.client_metrics.get(name, {})

    async def alter_client_metrics(self, services: BrokerServices, name: str, changes, incremental: bool,
                                   validate_only: bool) -> None:
        _forwarded()

    def group_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return self._cache.group_configs.get(name, {})

    async def alter_group_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        _forwarded()

    # --- quotas, credentials, ACLs --------------------------------------------------------------

    async def alter_client_quotas(self, services: BrokerServices,
                                  changes: dict[Entity, dict[str, float | None]]) -> None:
        _forwarded()

    async def alter_scram_credentials(self, services: BrokerServices, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None:
        _forwarded()

    async def change_acls(self, services: BrokerServices, acls: Sequence[AclBinding]) -> None:
        _forwarded()

    # --- delegation tokens ----------------------------------------------------------------------

    async def store_delegation_token(self, services: BrokerServices, token: TokenInformation) -> None:
        _forwarded()

    async def remove_delegation_token(self, services: BrokerServices, token_id: str) -> None:
        return None  # the controller expires tokens in a KRaft cluster
