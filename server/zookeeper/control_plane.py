"""The ControlPlane of a ZooKeeper-mode broker (Kafka 3.9's ZkSupport): its registration's epoch,
the metadata cache the controller's UpdateMetadata fills, topic overrides in /config/topics/<t>."""

from __future__ import annotations

import uuid

from ...wire.errors import ErrorCode
from ..metadata.cache import TopicInfo
from .membership import ZkMembership
from .metadata_cache import StaleControllerEpoch, ZkMetadataCache


class ZkControlPlane:
    def __init__(self, membership: ZkMembership, cache: ZkMetadataCache) -> None:
        self._membership = membership
        self._cache = cache

    def is_broker_epoch_stale(self, in_request: int, request_name: str, request) -> bool:
        return self._membership.is_broker_epoch_stale(in_request, request_name, request)

    def take_controller_epoch(self, request, request_name: str, correlation_id: int) -> bool:
        return self._cache.take_controller_epoch(request, request_name, correlation_id)

    def update_metadata(self, request, version: int, correlation_id: int) -> tuple[int, dict[str, uuid.UUID]]:
        ids = dict(self._cache.topic_ids)
        try:
            deleted = self._cache.update_metadata(request, version, correlation_id)
        except StaleControllerEpoch as e:
            return e.error_code, {}
        gone = {topic for topic, _ in deleted} - set(self._cache.topic_ids)
        return ErrorCode.NONE, {topic: ids[topic] for topic in gone if topic in ids}

    def replica_endpoints(self, listener: str) -> dict[int, tuple[str, int]]:
        return {broker_id: endpoint for broker_id, broker in self._cache.alive_brokers.items()
                if (endpoint := broker.endpoints.get(listener)) is not None}

    def known_topic(self, name: str) -> TopicInfo | None:
        return self._cache.topics.get(name)

    async def topic_configs(self, name: str) -> dict[str, str]:
        return await self._membership.client.get_entity_config("topics", name)
