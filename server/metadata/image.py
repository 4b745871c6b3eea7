"""The cluster's metadata as this broker knows it: brokers, topics, partitions, topic configs,
dynamic broker configs, ACLs, the producer ids handed out so far, the client quotas and the
finalized feature levels.

`MetadataStore` is what the broker reads of it (server/metadata/cache.py's `MetadataView`: topics,
configs, ACLs, SCRAM credentials and quotas) and the changes it makes; `MetadataImage` below keeps it.

In single-broker mode the broker is its own controller: the image is kept in one file in the first
log dir (`__samsa_metadata.json`), replaced atomically (write, fsync, rename, fsync the directory)
on every change, so a crash leaves either the old or the new image. Kafka keeps this in the
`__cluster_metadata` log; a JSON image is enough for one broker and readable by people. On a log dir
Kafka wrote (a `__cluster_metadata-0` and no image), the image is imported from Kafka's metadata log
at the first start (`load_or_import`); Kafka's files stay as they are.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from ...client.scram import ScramMechanism
from ...coordinator.client_quotas import Entity, apply_changes
from ...storage.cluster_metadata import ClusterMetadata, ClusterMetadataError, find_cluster_metadata, read_cluster_metadata
from ...storage.durability import write_atomically
from ...storage.log_manager import CLEAN_SHUTDOWN_FILE
from ..security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from ..security.scram import ScramCredential
from .cache import MetadataView, TopicInfo, colliding_topic

log = logging.getLogger("samsa.metadata")

METADATA_FILE = "__samsa_metadata.json"

class MetadataStore(MetadataView, Protocol):
    """The metadata cache and the changes the broker makes to the cluster's metadata. Each change
    is durable when the call returns, or raises (OSError) and changes nothing."""

    def add_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                  replication_factor: int = 1) -> TopicInfo: ...

    def remove_topic(self, name: str) -> TopicInfo: ...

    def set_partitions(self, name: str, count: int) -> None: ...

    def set_configs(self, name: str, configs: dict[str, str]) -> None: ...

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None: ...

    @property
    def client_metrics(self) -> Mapping[str, Mapping[str, str]]:
        """The configs of each client-metrics resource (KIP-714 subscription) by name."""

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None: ...

    @property
    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        """The configs of each GROUP resource (share.*, consumer.*, ...) by group id."""

    def set_group_configs(self, name: str, configs: dict[str, str]) -> None: ...

    def set_acls(self, acls: list[dict[str, str]]) -> None: ...

    def set_scram_credentials(self, credentials: dict[str, dict[str, dict]]) -> None: ...

    @property
    def delegation_tokens(self) -> Mapping[str, Mapping]:
        """Delegation tokens by id, as server.security.delegation_tokens.TokenInformation.to_json()."""

    def set_delegation_token(self, token_id: str, token: dict | None) -> None:
        """A token stored (None: removed)."""

    def alter_client_quotas(self, changes: dict[Entity, dict[str, float | None]]) -> None: ...

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve the next `size` producer ids; returns the first."""

    @property
    def features(self) -> Mapping[str, int] | None:
        """The finalized feature levels UpdateFeatures last set (Kafka's FeatureLevelRecords), or
        None: the defaults (server/features.py)."""

    @property
    def features_epoch(self) -> int:
        """How many times UpdateFeatures changed them (ApiVersions' FinalizedFeaturesEpoch)."""

    def set_features(self, levels: dict[str, int], epoch: int) -> None: ...


class MetadataImage:
    """The MetadataStore of a single broker: topics by name and by id, dynamic broker configs,
    ACLs, SCRAM credentials, the next free producer id and client quotas, persisted in one JSON
    file."""

    def __init__(self, path: Path, cluster_id: str) -> None:
        self.path = path
        self.cluster_id = cluster_id
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        # The first id of the next block of producer ids (Kafka's ProducerIdsRecord.nextProducerId).
        self.next_producer_id = 0
        # Dynamic broker configs by BROKER resource name: "" for the cluster-wide defaults, a node
        # id for one broker's own (Kafka's ConfigRecords of resource type BROKER).
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Client-metrics resources (KIP-714 subscriptions; ConfigRecords of type CLIENT_METRICS).
        self.client_metrics: dict[str, dict[str, str]] = {}
        # Group configs by group id (ConfigRecords of type GROUP).
        self.group_configs: dict[str, dict[str, str]] = {}
        # ACLs in creation order (Kafka's AccessControlEntryRecords), as authorizer.AclBinding.to_json.
        self.acls: list[dict[str, str]] = []
        # SCRAM credentials (Kafka's UserScramCredentialRecords): user -> mechanism name ->
        # server.security.scram.ScramCredential.to_json().
        self.scram_credentials: dict[str, dict[str, dict]] = {}
        # Client quotas by entity (Kafka's ClientQuotaRecords): {quota key: value}.
        self.client_quotas: dict[Entity, dict[str, float]] = {}
        # Delegation tokens by id (Kafka's DelegationTokenRecords), as
        # server.security.delegation_tokens.TokenInformation.to_json(); never their HMACs.
        self.delegation_tokens: dict[str, dict] = {}
        # Finalized feature levels (Kafka's FeatureLevelRecords), metadata.version included; None
        # until UpdateFeatures changes one (or one imported from Kafka): the defaults.
        self.features: dict[str, int] | None = None
        self.features_epoch = 0

    @classmethod
    def load(cls, log_dir: Path, cluster_id: str) -> "MetadataImage":
        image = cls(log_dir / METADATA_FILE, cluster_id)
        if image.path.exists():
            data = json.loads(image.path.read_text())
            for t in data.get("topics", []):
                image._index(TopicInfo(t["name"], uuid.UUID(t["topic_id"]), t["num_partitions"],
                                       dict(t.get("configs", {})), t.get("replication_factor", 1)))
            image.next_producer_id = data.get("next_producer_id", 0)
            image.broker_configs = {name: dict(configs) for name, configs in data.get("broker_configs", {}).items()}
            image.client_metrics = {name: dict(configs) for name, configs in data.get("client_metrics", {}).items()}
            image.group_configs = {name: dict(configs) for name, configs in data.get("group_configs", {}).items()}
            image.acls = [dict(acl) for acl in data.get("acls", [])]
            image.scram_credentials = data.get("scram_credentials", {})
            for q in data.get("client_quotas", []):
                image.client_quotas[tuple((kind, name) for kind, name in q["entity"])] = dict(q["values"])
            image.delegation_tokens = {token["token_id"]: dict(token) for token in data.get("delegation_tokens", [])}
            if "features" in data:
                image.features = {name: int(level) for name, level in data["features"].items()}
            image.features_epoch = data.get("features_epoch", 0)
        return image

    @classmethod
    def from_cluster_metadata(cls, path: Path, cluster_id: str, kraft: ClusterMetadata) -> "MetadataImage":
        """The image of what Kafka's metadata log holds (unsaved)."""
        image = cls(path, cluster_id)
        for t in kraft.topics.values():
            replication_factor = len(t.replicas.get(0, ())) or 1
            image._index(TopicInfo(t.name, t.topic_id, len(t.replicas), dict(t.configs), replication_factor))
        image.next_producer_id = kraft.next_producer_id
        image.broker_configs = {name: dict(configs) for name, configs in kraft.broker_configs.items()}
        image.client_metrics = {name: dict(configs) for name, configs in kraft.client_metrics.items()}
        image.group_configs = {name: dict(configs) for name, configs in kraft.group_configs.items()}
        image.acls = [AclBinding(ResourceType(a.resource_type), a.resource_name, PatternType(a.pattern_type),
                                 a.principal, a.host, AclOperation(a.operation),
                                 AclPermissionType(a.permission_type)).to_json()
                      for a in kraft.acls.values()]
        for user, by_type in kraft.scram_credentials.items():
            for type_id, (salt, stored_key, server_key, iterations) in by_type.items():
                mechanism = ScramMechanism.from_type(type_id)
                if mechanism is not None:
                    image.scram_credentials.setdefault(user, {})[mechanism.mechanism_name] = ScramCredential(
                        salt, stored_key, server_key, iterations).to_json()
        image.client_quotas = {entity: dict(values) for entity, values in kraft.client_quotas.items()}
        image.delegation_tokens = {token_id: dict(token) for token_id, token in kraft.delegation_tokens.items()}
        # Kafka's levels; one this Samsa does not support falls back to its default (server/features.py).
        image.features = dict(kraft.features) or None
        return image

    def _index(self, topic: TopicInfo) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def save(self) -> None:
        data = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "num_partitions": t.num_partitions,
                 "replication_factor": t.replication_factor, "configs": t.configs}
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
            "next_producer_id": self.next_producer_id,
            "broker_configs": self.broker_configs,
            "client_metrics": self.client_metrics,
            "group_configs": self.group_configs,
            "acls": self.acls,
            "scram_credentials": self.scram_credentials,
            "client_quotas": [{"entity": [list(part) for part in entity], "values": values}
                              for entity, values in self.client_quotas.items()],
            "delegation_tokens": list(self.delegation_tokens.values()),
        }
        if self.features is not None:
            data["features"] = self.features
            data["features_epoch"] = self.features_epoch
        write_atomically(self.path, json.dumps(data, indent=1))

    def add_topic(self, name: str, num_partitions: int, configs: dict[str, str], replication_factor: int = 1) -> TopicInfo:
        topic = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs), replication_factor)
        self._index(topic)
        self.save()
        return topic

    def remove_topic(self, name: str) -> TopicInfo:
        topic = self.topics.pop(name)
        del self.topics_by_id[topic.topic_id]
        self.save()
        return topic

    def set_partitions(self, name: str, count: int) -> None:
        self.topics[name].num_partitions = count
        self.save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self.save()

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of a BROKER resource, durably (none left: the entry goes)."""
        self._replace_configs(self.broker_configs, resource_name, configs)

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the configs of a client-metrics resource, durably (none left: the resource goes)."""
        self._replace_configs(self.client_metrics, name, configs)

    def set_group_configs(self, name: str, configs: dict[str, str]) -> None:
        """A group's configs are now `configs` (none: the resource is gone)."""
        self._replace_configs(self.group_configs, name, configs)

    def _replace_configs(self, by_resource: dict[str, dict[str, str]], name: str, configs: dict[str, str]) -> None:
        previous = by_resource.get(name)
        if configs:
            by_resource[name] = dict(configs)
        else:
            by_resource.pop(name, None)
        try:
            self.save()
        except OSError:
            if previous is None:
                by_resource.pop(name, None)
            else:
                by_resource[name] = previous
            raise

    def set_acls(self, acls: list[dict[str, str]]) -> None:
        """Replace every ACL at once, durably (all of a CreateAcls or DeleteAcls, or none)."""
        previous, self.acls = self.acls, list(acls)
        try:
            self.save()
        except OSError:
            self.acls = previous
            raise

    def alter_client_quotas(self, changes: dict[Entity, dict[str, float | None]]) -> None:
        """Apply every entity's changes (None removes a key) in one durable step, or none."""
        before = {entity: dict(values) for entity, values in self.client_quotas.items()}
        for entity, entity_changes in changes.items():
            apply_changes(self.client_quotas, entity, entity_changes)
        try:
            self.save()
        except OSError:
            self.client_quotas.clear()
            self.client_quotas.update(before)
            raise

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve the next `size` producer ids, durably; returns the first."""
        first = self.next_producer_id
        self.next_producer_id = first + size
        try:
            self.save()
        except OSError:
            self.next_producer_id = first
            raise
        return first

    def set_scram_credentials(self, credentials: dict[str, dict[str, dict]]) -> None:
        """Replace every SCRAM credential at once, durably (all of an AlterUserScramCredentials or none)."""
        previous, self.scram_credentials = self.scram_credentials, credentials
        try:
            self.save()
        except OSError:
            self.scram_credentials = previous
            raise

    def set_delegation_token(self, token_id: str, token: dict | None) -> None:
        """A delegation token created or changed (None: removed), durably."""
        previous = self.delegation_tokens.get(token_id)
        if token is None:
            self.delegation_tokens.pop(token_id, None)
        else:
            self.delegation_tokens[token_id] = dict(token)
        try:
            self.save()
        except OSError:
            if previous is None:
                self.delegation_tokens.pop(token_id, None)
            else:
                self.delegation_tokens[token_id] = previous
            raise

    def set_features(self, levels: dict[str, int], epoch: int) -> None:
        """The finalized feature levels are now `levels`, changed for the `epoch`th time, durably."""
        previous = self.features, self.features_epoch
        self.features, self.features_epoch = dict(levels), epoch
        try:
            self.save()
        except OSError:
            self.features, self.features_epoch = previous
            raise

    def collides(self, name: str) -> str | None:
        return colliding_topic(name, self.topics)


def load_or_import(log_dirs: list[Path], cluster_id: str) -> MetadataImage:
    """Samsa's image from the first log dir; on a log dir Kafka wrote (a KRaft metadata log and no
    image of Samsa's), the image of Kafka's metadata, saved as Samsa's from now on.
    ClusterMetadataError when Kafka's metadata cannot be read: the message says what to run."""
    path = log_dirs[0] / METADATA_FILE
    kraft_dir = None if path.exists() else find_cluster_metadata(log_dirs)
    if kraft_dir is None:
        return MetadataImage.load(log_dirs[0], cluster_id)
    unclean = [d for d in log_dirs if not (d / CLEAN_SHUTDOWN_FILE).exists()]
    if unclean:
        raise ClusterMetadataError(
            f"{kraft_dir} is the metadata log of a Kafka that did not shut down cleanly (no {CLEAN_SHUTDOWN_FILE} "
            f"in {', '.join(map(str, unclean))}): its last records may not be committed. Start Kafka on these "
            f"log dirs, stop it cleanly (bin/kafka-server-stop.sh), then start Samsa.")
    kraft = read_cluster_metadata(kraft_dir)
    image = MetadataImage.from_cluster_metadata(path, cluster_id, kraft)
    image.save()
    log.info("Imported Kafka's metadata from %s (%s, up to offset %d): %d topics (%s), %d broker config "
             "resources, %d ACLs, SCRAM credentials of %d users, %d client quota entities, next producer id %d, "
             "features %s; saved as %s", kraft_dir, kraft.snapshot or "no snapshot", kraft.end_offset,
             len(image.topics), ", ".join(sorted(image.topics)), len(image.broker_configs), len(image.acls),
             len(image.scram_credentials), len(image.client_quotas), image.next_producer_id,
             kraft.features, path)
    return image
