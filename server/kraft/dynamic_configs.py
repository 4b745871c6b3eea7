"""The configs the metadata log holds, in force on a KRaft cluster's broker (Kafka's
DynamicConfigPublisher): after each publication, a change of the BROKER resource of this broker or
of the cluster default reloads the broker's dynamic configs and with them every hosted log's
defaults (as a ZooKeeper cluster's broker does on a change notification); a change of a topic's
configs gives that topic's hosted logs their new config. Compared with what was last applied, so a publication that changes no config costs a
comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.dynamic_broker_config import load_dynamic_broker_configs

if TYPE_CHECKING:
    from ..context import BrokerServices
    from .metadata_cache import KraftMetadataCache


class DynamicConfigPublisher:
    def __init__(self, node_id: int, cache: KraftMetadataCache) -> None:
        self._node_id = node_id
        self._cache = cache
        self._broker: dict[str, dict[str, str]] = {}  # as last applied: "" and this broker's id
        self._topics: dict[str, dict[str, str]] = {}

    def publish(self, services: BrokerServices) -> None:
        cache = self._cache
        broker = {name: dict(configs) for name, configs in cache.broker_configs.items()
                  if name in ("", str(self._node_id))}
        topics = {name: dict(topic.configs) for name, topic in cache.topics.items()}
        if broker != self._broker:
            self._broker = broker
            load_dynamic_broker_configs(services.config, cache, services.log_manager, self._node_id, clear=True)
            services.connection_quotas.reconfigure()
            changed = set(topics)  # every log's defaults moved
        else:
            changed = {name for name, configs in topics.items() if self._topics.get(name) != configs}
        self._topics = topics
        if changed:
            replicas = services.replica_manager
            for partition in list(replicas.partitions.values()):
                topic = cache.topics.get(partition.topic.name)
                if topic is not None and topic.name in changed:
                    partition.update_config(replicas.topic_log_config(topic))
