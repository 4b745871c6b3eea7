"""A ZooKeeper-mode broker's AdminManager (Kafka 3.9's ZkAdminManager, AdminZkClient and, for
topics created on first need, AutoTopicCreationManager): admin changes are written to ZooKeeper in
Kafka 3.9's layout for the controller and every broker to carry out.

- A new topic: its replicas placed over the live brokers by AdminUtils' assignment
  (server/zookeeper/replica_assignment.py) or as asked, /config/topics/<t>, then /brokers/topics/<t>
  with a new topic id; CreateTopics waits up to timeout_ms for the controller's UpdateMetadata to
  give every partition a leader (Kafka's DelayedCreatePartitions).
- A deleted topic: marked in /admin/delete_topics/<t>; DeleteTopics waits up to timeout_ms for the
  controller's UpdateMetadata to drop it (Kafka's DelayedDeleteTopics).
- New partitions: AdminZkClient.createNewPartitionsAssignment, then createPartitionsWithAssignment.
- Topics created on first need (FindCoordinator's coordinator topics, Metadata's topics with
  auto.create.topics.enable): written at once, answered COORDINATOR_NOT_AVAILABLE or
  LEADER_NOT_AVAILABLE until they have leaders; not while fewer brokers live than the replication
  factor; a topic already being written is not written twice (Kafka's inflightTopics).
- Topic and broker configs, client quotas, SCRAM credentials: each entity's znode with a
  /config/changes notification; ACLs: each changed resource's znode as Kafka's AclAuthorizer
  writes it (server/zookeeper/shared_metadata.py). Client-metrics resources are KRaft's only.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import trio
from kazoo.exceptions import NodeExistsError

from ...wire import zk_data
from ...wire.errors import ErrorCode
from ..config.config_resources import invalid_request
from ..config.dynamic_broker_config import is_password, validated_broker_configs
from ..config.group_configs import new_configs as new_group_configs
from ..config.topic_configs import check_topic_configs, incremental_overrides
from ..metadata.admin_manager import AdminError, NewPartitions, creatable_topic
from ..metadata.cache import live_leader
from .replica_assignment import AdminOperationError, InvalidReplicationFactor, assign_replicas_to_brokers

if TYPE_CHECKING:
    from ...wire.codec import Message
    from ..context import RequestContext
    from ...coordinator.client_quotas import Entity
    from ..context import BrokerServices
    from ..metadata.cache import BrokerInfo, TopicInfo
    from ..security.authorizer import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from ..security.scram import ScramCredential, ScramMechanism
    from .metadata_cache import ZkMetadataCache
    from .shared_metadata import ZkSharedMetadata
    from .zk_client import KafkaZkClient

log = logging.getLogger("samsa.admin")


@dataclass(frozen=True)
class ZkNewPartitions(NewPartitions):
    existing: zk_data.TopicAssignment | None = None


class ZkAdminManager:
    forwards_to_controller = False  # this broker makes the metadata changes: its handlers answer

    def __init__(self, client: KafkaZkClient, cache: ZkMetadataCache, shared: ZkSharedMetadata) -> None:
        self._client = client
        self._cache = cache
        self._shared = shared
        self._inflight: set[str] = set()  # topics being created on first need

    async def forward(self, ctx: RequestContext, request: Message) -> None:
        return None

    def controller_versions(self) -> None:
        return None

    # --- topics ---------------------------------------------------------------------------------

    def assign_replicas(self, services: BrokerServices, partitions: int, replication_factor: int,
                        assignment: dict[int, list[int]] | None) -> dict[int, list[int]]:
        """As asked (AdminZkClient.validateTopicCreate: brokers not alive are allowed, as Kafka
        allows them), or by AdminUtils' assignment over the live brokers."""
        if assignment is not None:
            if len({len(replicas) for replicas in assignment.values()}) != 1:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "All partitions should have the same number of replicas")
            if any(len(set(replicas)) != len(replicas) for replicas in assignment.values()):
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Duplicate replica assignment found: {assignment}")
            if sorted(assignment) != list(range(len(assignment))):
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
            return assignment
        try:
            return assign_replicas_to_brokers([(b.node_id, b.rack) for b in self._cache.alive_brokers.values()],
                                              partitions, replication_factor)
        except InvalidReplicationFactor as e:
            raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        except AdminOperationError as e:
            raise AdminError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None

    async def create_topic(self, services: BrokerServices, name: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> uuid.UUID:
        """AdminZkClient.createTopicWithAssignment with a new topic id, for the controller to carry
        out; TOPIC_ALREADY_EXISTS when it exists."""
        topic_id = uuid.uuid4()
        try:
            await self._client.create_topic(
                name, base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("="), assignment, configs)
        except NodeExistsError:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        return topic_id

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        return await self._cache.wait_for_leaders(topics, timeout_ms)

    async def delete_topic(self, services: BrokerServices, name: str) -> None:
        await self._client.mark_topic_for_deletion(name)

    async def finish_deletions(self, services: BrokerServices, names: set[str], timeout_ms: int) -> set[str]:
        """Until the controller's UpdateMetadata drops them; none said to remain without a timeout."""
        cache = self._cache
        if timeout_ms <= 0:
            return set()
        with trio.move_on_after(timeout_ms / 1000):
            await cache.wait_until(lambda: not any(name in cache.topics for name in names))
        return {name for name in names if name in cache.topics}

    async def plan_new_partitions(self, services: BrokerServices, topic: str, count: int,
                                  assignments: list[list[int]] | None) -> NewPartitions:
        """The new partitions as asked or by AdminUtils' assignment (starting at the first replica of
        partition 0, as Kafka does)."""
        existing = await self._client.get_topic_assignment(topic)
        if existing is None or not existing.partitions:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        old = len(existing.partitions)
        if count < old:
            raise AdminError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {old} partitions, which is higher than the requested {count}.")
        if count == old:
            raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        brokers = sorted((b.node_id, b.rack) for b in self._cache.alive_brokers.values())
        broker_ids = [b for b, _ in brokers]
        partition0 = list(existing.partitions[0].replicas)
        if assignments is not None:
            unknown = sorted({b for replicas in assignments for b in replicas} - set(broker_ids))
            if unknown:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            if len(assignments) != count - old:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - old} but {len(assignments)} "
                                 f"assignments provided.")
            added = {old + i: list(replicas) for i, replicas in enumerate(assignments)}
            _validate_replica_assignment(added, len(partition0), broker_ids)
        else:
            start = next((i for i, b in enumerate(broker_ids) if b >= partition0[0]), 0)
            try:
                added = assign_replicas_to_brokers(brokers, count - old, len(partition0), start, old)
            except InvalidReplicationFactor as e:
                raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
            except AdminOperationError as e:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None
        return ZkNewPartitions(added, existing)

    async def add_partitions(self, services: BrokerServices, topic: str, plan: NewPartitions) -> None:
        """AdminZkClient.createPartitionsWithAssignment: the topic's znode with the new partitions."""
        assert isinstance(plan, ZkNewPartitions) and plan.existing is not None
        partitions = dict(plan.existing.partitions)
        partitions.update({p: zk_data.ReplicaAssignment(tuple(r)) for p, r in plan.added.items()})
        await self._client.set_topic_assignment(topic, replace(plan.existing, partitions=partitions))

    async def auto_create_topic(self, services: BrokerServices, name: str) -> tuple[int, TopicInfo | None]:
        """Written to ZooKeeper for the controller: LEADER_NOT_AVAILABLE until it has leaders."""
        return await self._create_on_first_need(services, name), None

    async def coordinator(self, services: BrokerServices, topic: str, partition: int,
                          listener: str) -> tuple[int, BrokerInfo | None]:
        """The live leader of the partition as the controller last told (Kafka 3.9's ZooKeeper-mode
        getCoordinator); a missing coordinator topic is written for the controller to create."""
        cache = self._cache
        if topic not in cache.topics:
            await self._create_on_first_need(services, topic)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return live_leader(cache, topic, partition, listener)

    async def _create_on_first_need(self, services: BrokerServices, name: str) -> int:
        """Write `name` to ZooKeeper for the controller. LEADER_NOT_AVAILABLE when written (or there
        already), UNKNOWN_TOPIC_OR_PARTITION while another request is writing it, else why not."""
        if name in self._inflight:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self._inflight.add(name)
        try:
            partitions, replication, configs = creatable_topic(services, name)
            brokers = [(b.node_id, b.rack) for b in self._cache.alive_brokers.values()]
            try:
                assignment = assign_replicas_to_brokers(brokers, partitions, replication)
            except (InvalidReplicationFactor, AdminOperationError) as e:
                log.info("Cannot create topic %s yet: %s", name, e)
                return (ErrorCode.INVALID_REPLICATION_FACTOR if isinstance(e, InvalidReplicationFactor)
                        else ErrorCode.UNKNOWN_SERVER_ERROR)
            try:
                await self.create_topic(services, name, assignment, configs)
            except AdminError as e:
                if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    return e.code
            return ErrorCode.LEADER_NOT_AVAILABLE
        finally:
            self._inflight.discard(name)

    # --- configs --------------------------------------------------------------------------------

    async def read_topic_configs(self, services: BrokerServices, name: str) -> None:
        """Kafka's ZkConfigRepository reads a topic's overrides from /config/topics/<t> on demand."""
        if name in self._cache.topics:
            self._cache.set_topic_configs(name, await self._client.get_entity_config("topics", name))

    async def alter_topic_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        """The overrides as /config/topics/<t> holds them now, changed, checked and (unless
        validate_only) written back with a /config/changes notification; every broker's logs take
        them from there."""
        check_topic_configs(services, self._cache, name, {})
        if incremental:
            overrides = await self._client.get_entity_config("topics", name)
            new_configs = incremental_overrides(services, overrides, changes)
        else:
            new_configs = {c.name: c.value for c in changes}
        check_topic_configs(services, self._cache, name, new_configs)
        if not validate_only:
            await self._shared.change_topic_config(name, new_configs)

    async def alter_broker_configs(self, services: BrokerServices, resource_name: str, configs: Mapping[str, str],
                                   validate_only: bool) -> None:
        """ZkAdminManager.alterBrokerConfigs: checked, then written to /config/brokers/<id> or
        /config/brokers/<default> with a /config/changes notification; every broker concerned
        applies it from there (apply_cluster_broker_configs). A password config is stored encrypted
        by Kafka (password.encoder.secret), which Samsa does not do yet: refused."""
        per_broker = resource_name != ""
        validated_broker_configs(services.config, configs, per_broker)
        passwords = sorted(name for name in configs if is_password(name))
        if passwords:
            if not per_broker:
                raise invalid_request("Password config can be defined only at broker level")
            raise invalid_request("Password encoder secret not configured" if not services.config.get(
                "password.encoder.secret") else f"Encoded password configs are not supported in a cluster yet: {passwords}")
        if validate_only:
            return
        log.info("Updating %s with new configuration : %s", f"broker {services.node_id}" if per_broker else "brokers",
                 ",".join(f"{k} -> {v}" for k, v in configs.items()))
        await self._shared.change_broker_config(str(services.node_id) if per_broker else "", dict(configs))

    def client_metrics_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        raise invalid_request("Config type client-metrics is only supported on KRaft clusters")

    async def alter_client_metrics(self, services: BrokerServices, name: str, changes, incremental: bool,
                                   validate_only: bool) -> None:
        raise invalid_request("AlterConfigs is only supported for topics and brokers, but resource type is CLIENT_METRICS")

    def group_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return services.group_configs.overrides(name)

    async def alter_group_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        """Kafka 3.9's ZooKeeper layout has no group configs (KRaft keeps them as GROUP ConfigRecords):
        they are kept as Kafka keeps a config entity, in /config/groups/<id>, with a change
        notification of Samsa's own that every Samsa broker applies (shared_metadata.py)."""
        current = await self._shared.group_configs(name) if name else {}
        configs = new_group_configs(services, current, name, changes, incremental)
        if validate_only:
            return
        await self._shared.change_group_config(name, configs)

    # --- quotas, credentials, ACLs --------------------------------------------------------------

    async def alter_client_quotas(self, services: BrokerServices,
                                  changes: dict[Entity, dict[str, float | None]]) -> None:
        await self._shared.alter_client_quotas(changes)  # each entity's znode, as ZkAdminManager writes it

    async def alter_scram_credentials(self, services: BrokerServices, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None:
        await self._shared.alter_scram_credentials(deletions, upsertions)  # each user's /config/users znode

    async def change_acls(self, services: BrokerServices, acls: Sequence[AclBinding]) -> None:
        # The authorizer takes what ZooKeeper has then (another broker's ACLs written meanwhile too).
        await self._shared.store_acls(acls)

    async def store_delegation_token(self, services: BrokerServices, token: TokenInformation) -> None:
        await self._shared.store_delegation_token(token)  # /delegation_token/tokens/<id>, then its notification

    async def remove_delegation_token(self, services: BrokerServices, token_id: str) -> None:
        await self._shared.remove_delegation_token(token_id)


def _validate_replica_assignment(assignment: dict[int, list[int]], replication_factor: int,
                                 available: list[int]) -> None:
    """AdminZkClient.validateReplicaAssignment."""
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                             f"for partition id {partition}.")
        if not set(replicas) <= set(available):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Some brokers specified for partition id {partition} are not available. Specified "
                             f"brokers: {', '.join(map(str, replicas))}, available brokers: "
                             f"{', '.join(map(str, available))}.")
    wrong = {p: len(r) for p, r in sorted(assignment.items()) if len(r) != replication_factor}
    if wrong:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
                         f"while partitions [{', '.join(map(str, wrong))}] have replication factors "
                         f"[{', '.join(map(str, wrong.values()))}], respectively.")
