"""The single broker's AdminManager: the broker is its own controller, so an admin change is made
at once in its image (server/metadata/image.py) and its logs, durably before the answer. One
broker: every replica is this broker's, a replication factor above 1 or an assignment naming
another broker is refused."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...coordinator.group_coordinator import OFFSETS_TOPIC
from ...coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC
from ...coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC
from ...storage.errors import KafkaStorageException
from ...wire.errors import ErrorCode
from ..config.client_metrics_configs import alter_client_metrics
from ..config.group_configs import new_configs as new_group_configs
from ..config.dynamic_broker_config import alter_broker_configs
from ..config.topic_configs import alter_topic_configs, incremental_topic_configs
from ..security.acl_admin import store_acls
from .admin_manager import AdminError, NewPartitions

if TYPE_CHECKING:
    from ...wire.codec import Message
    from ..context import RequestContext
    from ...coordinator.client_quotas import Entity
    from ..context import BrokerServices
    from ..security.authorizer import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from ..security.scram import ScramCredential, ScramMechanism
    from .cache import BrokerInfo, TopicInfo


class LocalAdminManager:
    forwards_to_controller = False  # this broker makes the metadata changes: its handlers answer

    async def forward(self, ctx: RequestContext, request: Message) -> None:
        return None

    def controller_versions(self) -> None:
        return None

    # --- topics ---------------------------------------------------------------------------------

    def assign_replicas(self, services: BrokerServices, partitions: int, replication_factor: int,
                        assignment: dict[int, list[int]] | None) -> dict[int, list[int]]:
        node = services.node_id
        for broker_ids in (assignment or {}).values():
            unknown = [b for b in broker_ids if b != node]
            if unknown:  # Kafka 4.4's ReplicationControlManager words it so
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                                       f"broker {unknown[0]}, but no such broker is registered.")
            if not broker_ids:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes a broker that is not registered: {broker_ids}")
        if replication_factor > 1:
            raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                             f"factor of {replication_factor} cannot be reached because only 1 broker(s) are registered "
                             f"or some brokers have all their log directories cordoned.")
        return {p: [node] for p in range(partitions)}

    async def create_topic(self, services: BrokerServices, name: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> uuid.UUID:
        replication_factor = len(next(iter(assignment.values()), [services.node_id]))
        try:
            return services.replica_manager.create_topic(name, len(assignment), configs, replication_factor).topic_id
        except KafkaStorageException as e:
            raise AdminError(e.error_code, str(e)) from None

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        return set()  # this broker leads every partition from the moment it is created

    async def delete_topic(self, services: BrokerServices, name: str) -> None:
        topic = services.replica_manager.delete_topic(name)
        services.fetch_sessions.remove_topic(name)
        await services.share_coordinator.topics_deleted({topic.topic_id})  # its share partitions' state goes too

    async def finish_deletions(self, services: BrokerServices, names: set[str], timeout_ms: int) -> set[str]:
        await services.groups.topics_deleted(names)  # their committed offsets go too
        return set()

    async def plan_new_partitions(self, services: BrokerServices, topic: str, count: int,
                                  assignments: list[list[int]] | None) -> NewPartitions:
        info = services.metadata.topics.get(topic)
        if info is None:
            # No message, as Kafka 4.4's ReplicationControlManager.createPartitions answers.
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
        old = info.num_partitions
        if count == old:
            raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partition(s).")
        if count < old:
            raise AdminError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {topic} currently has {old} partition(s); {count} would not be an increase.")
        if assignments is not None:
            if len(assignments) != count - old:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {count - old} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
            for broker_ids in assignments:
                if not broker_ids or any(b != services.node_id for b in broker_ids):
                    raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in assignment {broker_ids}.")
        return NewPartitions({p: [services.node_id] for p in range(old, count)})

    async def add_partitions(self, services: BrokerServices, topic: str, plan: NewPartitions) -> None:
        try:
            services.replica_manager.add_partitions(topic, max(plan.added) + 1)
        except KafkaStorageException as e:
            raise AdminError(e.error_code, str(e)) from None

    async def auto_create_topic(self, services: BrokerServices, name: str) -> tuple[int, TopicInfo | None]:
        """Created at once and answered with its partitions, where Kafka first answers
        LEADER_NOT_AVAILABLE while its controller creates it."""
        try:
            if not _ensure_coordinator_topic(services, name):
                config = services.config
                return ErrorCode.NONE, services.replica_manager.create_topic(
                    name, config.get_int("num.partitions"), {}, config.get_int("default.replication.factor"))
        except KafkaStorageException as e:
            return e.error_code, None
        return ErrorCode.NONE, services.metadata.topics[name]

    async def coordinator(self, services: BrokerServices, topic: str, partition: int,
                          listener: str) -> tuple[int, BrokerInfo | None]:
        """This broker, which leads every partition; the coordinator topic is created on first need."""
        _ensure_coordinator_topic(services, topic)
        return ErrorCode.NONE, services.broker_info(listener)

    # --- configs --------------------------------------------------------------------------------

    async def read_topic_configs(self, services: BrokerServices, name: str) -> None:
        pass  # the image holds them

    async def alter_topic_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        configs = (incremental_topic_configs(services, name, changes) if incremental
                   else {c.name: c.value for c in changes})
        alter_topic_configs(services, name, configs, validate_only)

    async def alter_broker_configs(self, services: BrokerServices, resource_name: str, configs: Mapping[str, str],
                                   validate_only: bool) -> None:
        alter_broker_configs(services, resource_name, configs, validate_only)

    def client_metrics_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return services.metadata.client_metrics.get(name, {})

    async def alter_client_metrics(self, services: BrokerServices, name: str, changes, incremental: bool,
                                   validate_only: bool) -> None:
        alter_client_metrics(services, name, changes, incremental, validate_only)

    # --- quotas, credentials, ACLs --------------------------------------------------------------

    def group_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return services.metadata.group_configs.get(name, {})

    async def alter_group_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        configs = new_group_configs(services, self.group_configs(services, name), name, changes, incremental)
        if validate_only:
            return
        services.metadata.set_group_configs(name, configs)
        services.group_configs.update_group_config(name, configs)

    async def alter_client_quotas(self, services: BrokerServices,
                                  changes: dict[Entity, dict[str, float | None]]) -> None:
        services.metadata.alter_client_quotas(changes)

    async def alter_scram_credentials(self, services: BrokerServices, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None:
        """Every alteration in one durable step of the image, or none."""
        # Copied two levels deep: a user's mechanisms change, their credentials are replaced whole.
        updated = {user: dict(by_mechanism) for user, by_mechanism in services.metadata.scram_credentials.items()}
        for name, mechanism in deletions.items():
            mechanisms = updated[name]
            del mechanisms[mechanism.mechanism_name]
            if not mechanisms:
                del updated[name]
        for name, (mechanism, credential) in upsertions.items():
            updated.setdefault(name, {})[mechanism.mechanism_name] = credential.to_json()
        services.metadata.set_scram_credentials(updated)

    async def change_acls(self, services: BrokerServices, acls: Sequence[AclBinding]) -> None:
        assert services.authorizer is not None  # the ACL APIs refuse without one (acl_admin.refusal)
        store_acls(services.metadata, services.authorizer, acls)

    async def store_delegation_token(self, services: BrokerServices, token: TokenInformation) -> None:
        """In the image (Kafka's DelegationTokenRecord), then the cache."""
        assert services.delegation_tokens is not None
        services.metadata.set_delegation_token(token.token_id, token.to_json())
        services.delegation_tokens.update(token)

    async def remove_delegation_token(self, services: BrokerServices, token_id: str) -> None:
        """From the image (Kafka's RemoveDelegationTokenRecord), then the cache."""
        assert services.delegation_tokens is not None
        services.metadata.set_delegation_token(token_id, None)
        services.delegation_tokens.remove(token_id)


def _ensure_coordinator_topic(services: BrokerServices, name: str) -> bool:
    """Create a coordinator's topic, if `name` is one and it is missing, as its coordinator asks for it
    (its partition count and configs); whether `name` is a coordinator's topic."""
    if name == OFFSETS_TOPIC:
        services.groups.ensure_offsets_topic()
    elif name == TRANSACTION_STATE_TOPIC:
        services.transactions.ensure_transaction_topic()
    elif name == SHARE_GROUP_STATE_TOPIC:
        services.share_coordinator.ensure_share_group_state_topic()
    else:
        return False
    return True
