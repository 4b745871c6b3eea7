"""The AdminManager of a KRaft cluster's broker. In a KRaft cluster the controller makes every
metadata change; Kafka's brokers forward those requests to it (CreateTopics, IncrementalAlterConfigs,
CreateAcls, ...). Samsa's forwarding is not written yet (issue 30's next steps): each change is refused
with Kafka's error for a request the broker cannot serve, its message saying to send it to the
controller (`kafka-topics.sh --bootstrap-controller`, ...). What needs no change is answered: a
coordinator is its partition's live leader, and configs are read from the metadata log.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from ...wire.errors import ErrorCode
from ..metadata.admin_manager import AdminError, NewPartitions
from .metadata_cache import KraftMetadataCache

if TYPE_CHECKING:
    from ...coordinator.client_quotas import Entity
    from ..context import BrokerServices
    from ..metadata.cache import BrokerInfo, TopicInfo
    from ..security.authorizer import AclBinding
    from ..security.delegation_tokens import TokenInformation
    from ..security.scram import ScramCredential, ScramMechanism

NOT_FORWARDED = ("this Samsa broker of a KRaft cluster does not forward metadata changes to the controller yet: "
                 "send it to the controller (--bootstrap-controller)")


def _refuse() -> NoReturn:
    raise AdminError(ErrorCode.INVALID_REQUEST, NOT_FORWARDED)


class KraftAdminManager:
    def __init__(self, cache: KraftMetadataCache) -> None:
        self._cache = cache

    # --- topics ---------------------------------------------------------------------------------

    def assign_replicas(self, services: BrokerServices, partitions: int, replication_factor: int,
                        assignment: dict[int, list[int]] | None) -> dict[int, list[int]]:
        _refuse()

    async def create_topic(self, services: BrokerServices, name: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> uuid.UUID:
        _refuse()

    async def wait_for_leaders(self, topics: dict[str, int], timeout_ms: int) -> set[str]:
        return await self._cache.wait_for_leaders(topics, timeout_ms)

    async def delete_topic(self, services: BrokerServices, name: str) -> None:
        _refuse()

    async def finish_deletions(self, services: BrokerServices, names: set[str], timeout_ms: int) -> set[str]:
        return set()

    async def plan_new_partitions(self, services: BrokerServices, topic: str, count: int,
                                  assignments: list[list[int]] | None) -> NewPartitions:
        _refuse()

    async def add_partitions(self, services: BrokerServices, topic: str, plan: NewPartitions) -> None:
        _refuse()

    async def auto_create_topic(self, services: BrokerServices, name: str) -> tuple[int, TopicInfo | None]:
        """Kafka's broker would have the controller create it (CreateTopics, forwarded): not yet."""
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None

    async def coordinator(self, services: BrokerServices, topic: str, partition: int,
                          listener: str) -> tuple[int, BrokerInfo | None]:
        """The partition's live leader, as the metadata log says; COORDINATOR_NOT_AVAILABLE while
        the topic does not exist (it is not created here yet) or has no live leader."""
        cache = self._cache
        partitions = cache.partition_metadata(topic, listener) or []
        leader = next((p.leader_id for p in partitions if p.partition_index == partition), -1)
        node = cache.alive_node(leader, listener)
        return (ErrorCode.NONE, node) if node is not None else (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)

    # --- configs --------------------------------------------------------------------------------

    async def read_topic_configs(self, services: BrokerServices, name: str) -> None:
        return None  # the metadata cache holds them as the metadata log says

    async def alter_topic_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        _refuse()

    async def alter_broker_configs(self, services: BrokerServices, resource_name: str, configs: Mapping[str, str],
                                   validate_only: bool) -> None:
        _refuse()

    def client_metrics_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return self._cache.client_metrics.get(name, {})

    async def alter_client_metrics(self, services: BrokerServices, name: str, changes, incremental: bool,
                                   validate_only: bool) -> None:
        _refuse()

    def group_configs(self, services: BrokerServices, name: str) -> Mapping[str, str]:
        return self._cache.group_configs.get(name, {})

    async def alter_group_configs(self, services: BrokerServices, name: str, changes, incremental: bool,
                                  validate_only: bool) -> None:
        _refuse()

    # --- quotas, credentials, ACLs --------------------------------------------------------------

    async def alter_client_quotas(self, services: BrokerServices,
                                  changes: dict[Entity, dict[str, float | None]]) -> None:
        _refuse()

    async def alter_scram_credentials(self, services: BrokerServices, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None:
        _refuse()

    async def change_acls(self, services: BrokerServices, acls: Sequence[AclBinding]) -> None:
        _refuse()

    # --- delegation tokens ----------------------------------------------------------------------

    async def store_delegation_token(self, services: BrokerServices, token: TokenInformation) -> None:
        _refuse()

    async def remove_delegation_token(self, services: BrokerServices, token_id: str) -> None:
        return None  # the controller expires tokens in a KRaft cluster
