"""What the broker reads of the cluster's metadata (Kafka's MetadataCache): topics and their ids,
configs, ACLs, SCRAM credentials, client quotas, the live brokers, the controller and each
partition's leader, replicas and ISR. Handlers and services read it through `MetadataCache` and
never know where it comes from: the single broker's own image and replicas
(server/metadata/local_cache.py) or what a ZooKeeper cluster's controller said
(server/zookeeper/metadata_cache.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ...coordinator.client_quotas import Entity
from ...wire.errors import ErrorCode

# Kafka's Topic.validate: legal characters and length (249 leaves room for partition suffixes).
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class InvalidTopicError(ValueError):
    pass


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'")


def validate_topic_name_kraft(name: str) -> None:
    """validate_topic_name in Kafka 4's words (Topic.validate, as its KRaft controller answers
    CreateTopics); Kafka 3.9's ZooKeeper mode words them as above."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC.match(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise InvalidTopicError(f"Topic name is invalid: {reason}")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic whose name differs only by '.' versus '_' (they clash in metric names)."""
    key = name.replace(".", "_")
    return next((other for other in existing if other != name and other.replace(".", "_") == key), None)


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def advertised_on(advertised: Mapping[str, BrokerInfo], listener: str) -> BrokerInfo:
    """This broker as advertised on `listener` (the first advertised listener otherwise)."""
    info = advertised.get(listener)
    return info if info is not None else next(iter(advertised.values()))


@dataclass(frozen=True)
class AliveBroker:
    """A live broker as the cluster's metadata names it, with its endpoint on each listener."""
    node_id: int
    endpoints: Mapping[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None

    def node(self, listener: str) -> BrokerInfo | None:
        """The broker as reachable on `listener`, None if it has no such listener."""
        endpoint = self.endpoints.get(listener)
        return None if endpoint is None else BrokerInfo(self.node_id, endpoint[0], endpoint[1], self.rack)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True)
class PartitionMetadata:
    """A partition as Metadata and DescribeTopicPartitions answer for it on one listener (Kafka's
    MetadataCache.getPartitionMetadata). The eligible leader replicas (KIP-966) are a KRaft
    cluster's (DescribeTopicPartitions answers them); empty elsewhere."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]
    eligible_leader_replicas: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)


class MetadataView(Protocol):
    """The metadata's records as the broker reads them: topics, configs, ACLs, SCRAM credentials,
    client quotas. The mappings are views: callers do not change them (a MetadataStore's methods
    do)."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicInfo]: ...

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        """Dynamic broker configs by BROKER resource name ("" for the cluster-wide defaults)."""

    @property
    def acls(self) -> list[dict[str, str]]:
        """Every ACL, in creation order, as authorizer.AclBinding.to_json."""

    @property
    def scram_credentials(self) -> Mapping[str, Mapping[str, dict]]:
        """user -> SCRAM mechanism name -> server.security.scram.ScramCredential.to_json()."""

    @property
    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]: ...

    def collides(self, name: str) -> str | None:
        """An existing topic whose name differs only by '.' versus '_'."""

class MetadataCache(MetadataView, Protocol):
    """The records and the cluster: the live brokers, the controller, each partition's state."""

    @property
    def controller_id(self) -> int | None:
        """The controller's node id, None while none is known."""

    def alive_nodes(self, listener: str) -> list[BrokerInfo]:
        """The live brokers reachable on `listener` (Kafka's getAliveBrokerNodes)."""

    def alive_node(self, node_id: int, listener: str) -> BrokerInfo | None:
        """A live broker as reachable on `listener`, None if it is not alive or lacks the listener."""

    def partition_metadata(self, topic: str, listener: str, *, error_unavailable_endpoints: bool = False,
                           error_unavailable_listeners: bool = False) -> list[PartitionMetadata] | None:
        """Each partition of `topic` as a client on `listener` sees it, None for an unknown topic
        (Kafka's MetadataCache.getPartitionMetadata; the flags are Metadata v0's and v6's rules)."""


def live_leader(cache: MetadataCache, topic: str, partition: int, listener: str) -> tuple[int, BrokerInfo | None]:
    """A coordinator partition's live leader on `listener` as the cluster's metadata says (Kafka's
    getCoordinator), COORDINATOR_NOT_AVAILABLE while it has none."""
    partitions = cache.partition_metadata(topic, listener) or []
    leader = next((p.leader_id for p in partitions if p.partition_index == partition), -1)
    node = cache.alive_node(leader, listener)
    return (ErrorCode.NONE, node) if node is not None else (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
