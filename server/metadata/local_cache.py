"""The single broker's MetadataCache: its own image's records, and a cluster of one. The broker is
the only live broker, the controller, and every partition's leader, only replica and ISR."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from ...coordinator.client_quotas import Entity
from ...wire.errors import ErrorCode
from .cache import BrokerInfo, PartitionMetadata, TopicInfo, advertised_on
from .image import MetadataStore


class LocalMetadataCache:
    def __init__(self, image: MetadataStore, node_id: int, advertised: Mapping[str, BrokerInfo],
                 leader_epoch: Callable[[str, int], int]) -> None:
        self._image = image
        self._node_id = node_id
        # Filled in once the listeners are bound (the broker's own advertised endpoints, by listener).
        self._advertised = advertised
        self._leader_epoch = leader_epoch  # (topic, partition) -> this broker's leader epoch

    # --- the records: the image's ---------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._image.cluster_id

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._image.topics

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicInfo]:
        return self._image.topics_by_id

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._image.broker_configs

    @property
    def acls(self) -> list[dict[str, str]]:
        return self._image.acls

    @property
    def scram_credentials(self) -> Mapping[str, Mapping[str, dict]]:
        return self._image.scram_credentials

    @property
    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._image.client_quotas

    def collides(self, name: str) -> str | None:
        return self._image.collides(name)

    # --- the cluster: this broker alone ---------------------------------------------------------

    @property
    def controller_id(self) -> int | None:
        return self._node_id

    def alive_nodes(self, listener: str) -> list[BrokerInfo]:
        return [advertised_on(self._advertised, listener)]

    def alive_node(self, node_id: int, listener: str) -> BrokerInfo | None:
        return advertised_on(self._advertised, listener) if node_id == self._node_id else None

    def partition_metadata(self, topic: str, listener: str, *, error_unavailable_endpoints: bool = False,
                           error_unavailable_listeners: bool = False) -> list[PartitionMetadata] | None:
        info = self._image.topics.get(topic)
        if info is None:
            return None
        node = self._node_id
        return [PartitionMetadata(ErrorCode.NONE, i, node, self._leader_epoch(topic, i), [node], [node], [])
                for i in range(info.num_partitions)]
