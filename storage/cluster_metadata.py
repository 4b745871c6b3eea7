"""What Samsa needs of a log dir's KRaft metadata log, `__cluster_metadata-0`, which Kafka (3.x in
KRaft mode, 4.x) keeps instead of ZooKeeper: topics with their ids and partitions, topic and broker
configs, client quotas, SCRAM credentials, ACLs, the producer ids handed out and the feature levels.

The log is replayed as Kafka's MetadataLoader does: the newest snapshot
(`<20-digit end offset>-<10-digit epoch>.checkpoint`, record batches, a control batch for its header
and footer), then the log's records from the snapshot's end offset on. Each data record's value is a
metadata record (wire/metadata_record.py). Records of a metadata transaction (Begin/End/Abort
TransactionRecord, KIP-868) apply at its end, and not at all if it is aborted.

Only reading: the files are left as Kafka wrote them (a KRaft broker's own copy of the log is
written by storage/metadata_log.py, its snapshots by storage/metadata_snapshot.py). Replay is of a
log Kafka shut down cleanly: records past the last committed offset would only be in a log whose
broker crashed.

The same replay (`MetadataReplay`) serves the broker of a KRaft cluster (server/kraft/): the
committed batches it fetches from the controller quorum, and a snapshot it fetched, go through
`MetadataReplay.batches` as a log file's do. For that broker it also keeps what a single broker
does not need: each partition's leader, ISR and epochs, and the registered brokers.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..wire.exceptions import CodecError
from ..wire.metadata_record import MetadataRecordError, decode_metadata_record
from ..wire.metadata_records.abort_transaction_record import AbortTransactionRecord
from ..wire.metadata_records.access_control_entry_record import AccessControlEntryRecord
from ..wire.metadata_records.begin_transaction_record import BeginTransactionRecord
from ..wire.metadata_records.broker_registration_change_record import BrokerRegistrationChangeRecord
from ..wire.metadata_records.clear_elr_record import ClearElrRecord
from ..wire.metadata_records.client_quota_record import ClientQuotaRecord
from ..wire.metadata_records.config_record import ConfigRecord
from ..wire.metadata_records.delegation_token_record import DelegationTokenRecord
from ..wire.metadata_records.end_transaction_record import EndTransactionRecord
from ..wire.metadata_records.feature_level_record import FeatureLevelRecord
from ..wire.metadata_records.fence_broker_record import FenceBrokerRecord
from ..wire.metadata_records.partition_change_record import PartitionChangeRecord
from ..wire.metadata_records.partition_record import PartitionRecord
from ..wire.metadata_records.producer_ids_record import ProducerIdsRecord
from ..wire.metadata_records.register_broker_record import RegisterBrokerRecord
from ..wire.metadata_records.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from ..wire.metadata_records.remove_delegation_token_record import RemoveDelegationTokenRecord
from ..wire.metadata_records.remove_topic_record import RemoveTopicRecord
from ..wire.metadata_records.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from ..wire.metadata_records.topic_record import TopicRecord
from ..wire.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from ..wire.metadata_records.unregister_broker_record import UnregisterBrokerRecord
from ..wire.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from ..wire.records import decode_batch, iter_batch_headers

__all__ = ["CLUSTER_METADATA_DIR", "ClusterMetadataError", "KraftTopic", "KraftPartition", "KraftBroker", "KraftAcl",
           "ClusterMetadata", "MetadataReplay", "find_cluster_metadata", "read_cluster_metadata"]

# Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME, partition 0: a directory of the metadata log dir.
CLUSTER_METADATA_DIR = "__cluster_metadata-0"
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_SEGMENT = re.compile(r"^(\d{20})\.log$")
# ConfigResource.Type's ids in ConfigRecord.resourceType.
TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 16, 32
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: unchanged
# BrokerRegistrationChangeRecord's BrokerRegistrationFencingChange and InControlledShutdownChange.
FENCE, UNFENCE, IN_CONTROLLED_SHUTDOWN = 1, -1, 1


class ClusterMetadataError(Exception):
    """A metadata log this Samsa cannot read; the message says why and what to run."""


@dataclass(frozen=True)
class KraftPartition:
    """A partition's registration (Kafka's PartitionRegistration): PartitionRecord, then each
    PartitionChangeRecord merged in (a new leader bumps the leader epoch, every change the
    partition epoch). `elr` and `last_known_elr`: KIP-966's eligible leader replicas (replicas out
    of an ISR under min.insync.replicas that the controller may still elect) and the last ones known
    when the ELR emptied; empty unless eligible.leader.replicas.version is 1."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def merge(self, change: PartitionChangeRecord) -> KraftPartition:
        """Kafka's PartitionRegistration.merge: null fields (and leader -2, recovery state -1) are unchanged."""
        new_leader = self.leader if change.leader == NO_LEADER_CHANGE else change.leader
        return KraftPartition(
            self.replicas if change.replicas is None else tuple(change.replicas),
            self.isr if change.isr is None else tuple(change.isr),
            new_leader, self.leader_epoch if change.leader == NO_LEADER_CHANGE else self.leader_epoch + 1,
            self.partition_epoch + 1,
            self.leader_recovery_state if change.leader_recovery_state == -1 else change.leader_recovery_state,
            self.directories if change.directories is None else tuple(change.directories),
            self.elr if change.eligible_leader_replicas is None else tuple(change.eligible_leader_replicas),
            self.last_known_elr if change.last_known_elr is None else tuple(change.last_known_elr))

    def without_elr(self) -> KraftPartition:
        """A ClearElrRecord's effect (Kafka's TopicDelta.maybeClearElr): a partition with an ELR or a
        last known ELR merges a change emptying both, which moves its partition epoch as any merge
        does (so the leader's next AlterPartition names the controller's epoch); others are unchanged."""
        if not self.elr and not self.last_known_elr:
            return self
        return self.merge(PartitionChangeRecord(eligible_leader_replicas=[], last_known_elr=[]))


@dataclass
class KraftTopic:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, list[int]] = field(default_factory=dict)  # partition -> replica node ids
    configs: dict[str, str] = field(default_factory=dict)  # the topic's own (ConfigRecords)
    partitions: dict[int, KraftPartition] = field(default_factory=dict)  # partition -> its registration


@dataclass
class KraftBroker:
    """A broker's registration (RegisterBrokerRecord and the records that change it)."""
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: dict[str, tuple[str, int, int]]  # listener -> (host, port, security protocol id)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False


@dataclass(frozen=True)
class KraftAcl:
    """An AccessControlEntryRecord, its enums as the ids Kafka's admin protocol uses."""
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass
class ClusterMetadata:
    topics: dict[str, KraftTopic] = field(default_factory=dict)
    # BROKER ConfigRecords by resource name: "" for the cluster-wide defaults, a node id for one broker.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # CLIENT_METRICS ConfigRecords (KIP-714 subscriptions) by resource name.
    client_metrics: dict[str, dict[str, str]] = field(default_factory=dict)
    # GROUP ConfigRecords (group configs: share.*, consumer.*, ...) by group id.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # entity (its (type, name) parts sorted by type; name None for <default>) -> {quota key: value}
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    # user -> ScramMechanism type id (1 SHA-256, 2 SHA-512) -> (salt, stored key, server key, iterations)
    scram_credentials: dict[str, dict[int, tuple[bytes, bytes, bytes, int]]] = field(default_factory=dict)
    acls: dict[uuid.UUID, KraftAcl] = field(default_factory=dict)  # by id, in creation order
    # DelegationTokenRecords by token id, in server.security.delegation_tokens.TokenInformation's
    # JSON form (principals as 'User:alice'); never their HMACs, which the secret key gives.
    delegation_tokens: dict[str, dict] = field(default_factory=dict)
    # The first producer id of the next block the controller would hand out: none below it is free.
    next_producer_id: int = 0
    features: dict[str, int] = field(default_factory=dict)  # feature name -> finalized level
    snapshot: str | None = None  # the snapshot replay started from
    end_offset: int = 0  # the offset after the last record replayed
    brokers: dict[int, KraftBroker] = field(default_factory=dict)  # registered brokers by id


def find_cluster_metadata(log_dirs: list[Path]) -> Path | None:
    """The `__cluster_metadata-0` directory of one of the log dirs (Kafka's metadata.log.dir is
    the first log dir unless set), or None."""
    return next((d / CLUSTER_METADATA_DIR for d in log_dirs if (d / CLUSTER_METADATA_DIR).is_dir()), None)


def read_cluster_metadata(directory: Path) -> ClusterMetadata:
    """Replay the metadata log in `directory`; ClusterMetadataError when a record cannot be read."""
    snapshots = sorted((int(m[1]), p) for p in directory.iterdir() if (m := _SNAPSHOT.match(p.name)))
    segments = sorted((int(m[1]), p) for p in directory.iterdir() if (m := _SEGMENT.match(p.name)))
    replay = MetadataReplay()
    start = 0
    if snapshots:
        start, newest = snapshots[-1]
        replay.image.snapshot = newest.name
        replay.file(newest, 0)
    for _, segment in segments:
        replay.file(segment, start)
    if replay.pending is not None:
        raise ClusterMetadataError(
            f"{directory} ends inside a metadata transaction: Kafka did not shut down cleanly. Start Kafka on "
            f"this log dir and stop it cleanly (bin/kafka-server-stop.sh), then start Samsa.")
    return replay.finish(start)


class MetadataReplay:
    """Kafka's metadata records applied in order to a ClusterMetadata (`image`)."""

    def __init__(self) -> None:
        self.image = ClusterMetadata()
        self._topic_names: dict[uuid.UUID, str] = {}
        # TOPIC ConfigRecords by resource name: Kafka keeps them apart from the topics (the configs
        # of a topic being created may come before its TopicRecord), RemoveTopicRecord drops them.
        self._topic_configs: dict[str, dict[str, str]] = {}
        self.pending: list[Any] | None = None  # the records of an open metadata transaction

    @property
    def topic_configs(self) -> dict[str, dict[str, str]]:
        """TOPIC ConfigRecords by topic name (a snapshot writes them back: storage/metadata_snapshot.py)."""
        return self._topic_configs

    def batches(self, data: bytes | memoryview, start_offset: int = 0) -> None:
        """Apply the data records at or past `start_offset` of these record batches (a segment's, a
        snapshot's, a Fetch's). MetadataRecordError or CodecError for what cannot be read."""
        for pos, header in iter_batch_headers(data):
            if header.next_offset <= start_offset or header.is_control:
                continue  # control batches: leader changes, snapshot headers, voters
            _, records = decode_batch(data, pos)
            for record in records:
                offset = header.record_offset(record)
                if offset < start_offset:
                    continue
                if record.value is None:
                    raise MetadataRecordError("a metadata record without a value")
                self.record(decode_metadata_record(record.value)[0])
                self.image.end_offset = offset + 1

    def file(self, path: Path, start_offset: int) -> None:
        """Apply the data records at or past `start_offset` of a segment or snapshot."""
        data = path.read_bytes()
        try:
            self.batches(data, start_offset)
        except MetadataRecordError as e:
            raise ClusterMetadataError(
                f"{path}: {e}. This Samsa reads the metadata records of Kafka's kafka-metadata jar it was "
                f"generated from; to read a newer Kafka's, regenerate them: python tools/gen_messages.py "
                f"--metadata-records <that Kafka's libs/kafka-metadata-*.jar>") from None
        except CodecError as e:
            raise ClusterMetadataError(
                f"{path} is damaged ({e}): start Kafka on this log dir so that it recovers the metadata log, "
                f"stop it cleanly (bin/kafka-server-stop.sh), then start Samsa") from None

    def finish(self, snapshot_end: int) -> ClusterMetadata:
        for name, topic in self.image.topics.items():
            topic.configs = self._topic_configs.get(name, {})
        self.image.end_offset = max(self.image.end_offset, snapshot_end)
        return self.image

    def record(self, record: Any) -> None:
        if isinstance(record, BeginTransactionRecord):
            self.pending = []
        elif isinstance(record, EndTransactionRecord):
            pending, self.pending = self.pending or [], None
            for each in pending:
                self.apply(each)
        elif isinstance(record, AbortTransactionRecord):
            self.pending = None
        elif self.pending is not None:
            self.pending.append(record)
        else:
            self.apply(record)

    def apply(self, record: Any) -> None:
        image = self.image
        if isinstance(record, TopicRecord):
            image.topics[record.name] = KraftTopic(record.name, record.topic_id,
                                                   configs=dict(self._topic_configs.get(record.name, {})))
            self._topic_names[record.topic_id] = record.name
        elif isinstance(record, PartitionRecord):
            topic = self._topic(record.topic_id)
            topic.replicas[record.partition_id] = list(record.replicas)
            topic.partitions[record.partition_id] = KraftPartition(
                tuple(record.replicas), tuple(record.isr), record.leader, record.leader_epoch, record.partition_epoch,
                record.leader_recovery_state, tuple(record.directories), tuple(record.eligible_leader_replicas or ()),
                tuple(record.last_known_elr or ()))
        elif isinstance(record, PartitionChangeRecord):
            topic = self._topic(record.topic_id)
            if record.replicas is not None:  # null: unchanged
                topic.replicas[record.partition_id] = list(record.replicas)
            registration = topic.partitions.get(record.partition_id)
            if registration is not None:
                topic.partitions[record.partition_id] = registration.merge(record)
        elif isinstance(record, ClearElrRecord):
            # Kafka's TopicsDelta.replay(ClearElrRecord): one topic by name, or every topic when the
            # name is empty (eligible.leader.replicas.version turned off, a min.insync.replicas change).
            if record.topic_name:
                cleared = image.topics.get(record.topic_name)
                if cleared is None:
                    raise MetadataRecordError(f"Unable to clear elr for topic with name {record.topic_name}: "
                                              "no such topic found.")
                topics = [cleared]
            else:
                topics = list(image.topics.values())
            for each in topics:
                each.partitions = {index: p.without_elr() for index, p in each.partitions.items()}
        elif isinstance(record, RemoveTopicRecord):
            name = self._topic_names.pop(record.topic_id)
            del image.topics[name]
            self._topic_configs.pop(name, None)
        elif isinstance(record, ConfigRecord):
            self._config(record)
        elif isinstance(record, ClientQuotaRecord):
            entity = tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))
            values = image.client_quotas.setdefault(entity, {})
            if record.remove:
                values.pop(record.key, None)
                if not values:
                    del image.client_quotas[entity]
            else:
                values[record.key] = record.value
        elif isinstance(record, UserScramCredentialRecord):
            image.scram_credentials.setdefault(record.name, {})[record.mechanism] = (
                bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations)
        elif isinstance(record, RemoveUserScramCredentialRecord):
            mechanisms = image.scram_credentials.get(record.name, {})
            mechanisms.pop(record.mechanism, None)
            if not mechanisms:
                image.scram_credentials.pop(record.name, None)
        elif isinstance(record, AccessControlEntryRecord):
            image.acls[record.id] = KraftAcl(record.resource_type, record.resource_name, record.pattern_type,
                                             record.principal, record.host, record.operation, record.permission_type)
        elif isinstance(record, RemoveAccessControlEntryRecord):
            image.acls.pop(record.id, None)
        elif isinstance(record, DelegationTokenRecord):
            image.delegation_tokens[record.token_id] = {
                "token_id": record.token_id, "owner": record.owner, "requester": record.requester,
                "renewers": list(record.renewers), "issue_timestamp": record.issue_timestamp,
                "max_timestamp": record.max_timestamp, "expiry_timestamp": record.expiration_timestamp}
        elif isinstance(record, RemoveDelegationTokenRecord):
            image.delegation_tokens.pop(record.token_id, None)
        elif isinstance(record, ProducerIdsRecord):
            image.next_producer_id = max(image.next_producer_id, record.next_producer_id)
        elif isinstance(record, FeatureLevelRecord):
            if record.feature_level == 0:
                image.features.pop(record.name, None)
            else:
                image.features[record.name] = record.feature_level
        elif isinstance(record, RegisterBrokerRecord):
            image.brokers[record.broker_id] = KraftBroker(
                record.broker_id, record.broker_epoch, record.incarnation_id,
                {e.name: (e.host, e.port, e.security_protocol) for e in record.end_points}, record.rack,
                record.fenced, record.in_controlled_shutdown)
        elif isinstance(record, UnregisterBrokerRecord):
            image.brokers.pop(record.broker_id, None)
        elif isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):
            broker = image.brokers.get(record.id)
            if broker is not None:
                broker.fenced = isinstance(record, FenceBrokerRecord)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            broker = image.brokers.get(record.broker_id)
            if broker is not None:
                if record.fenced in (FENCE, UNFENCE):
                    broker.fenced = record.fenced == FENCE
                if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                    broker.in_controlled_shutdown = True
        # Controllers' registrations: Samsa keeps none of them.

    def _topic(self, topic_id: uuid.UUID) -> KraftTopic:
        name = self._topic_names.get(topic_id)
        if name is None:
            raise MetadataRecordError(f"a partition of topic id {topic_id}, which no TopicRecord created")
        return self.image.topics[name]

    def _config(self, record: ConfigRecord) -> None:
        if record.resource_type == TOPIC_RESOURCE:
            by_resource = self._topic_configs
        elif record.resource_type == BROKER_RESOURCE:
            by_resource = self.image.broker_configs
        elif record.resource_type == CLIENT_METRICS_RESOURCE:
            by_resource = self.image.client_metrics
        elif record.resource_type == GROUP_RESOURCE:
            by_resource = self.image.group_configs
        else:
            return  # BROKER_LOGGER: not kept by Samsa
        configs = by_resource.setdefault(record.resource_name, {})
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if not configs:
            del by_resource[record.resource_name]
        if record.resource_type == TOPIC_RESOURCE and record.resource_name in self.image.topics:
            # A KRaft broker's image is read as replayed, without finish(): the topic's configs follow.
            self.image.topics[record.resource_name].configs = dict(configs)
