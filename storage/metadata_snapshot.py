"""A KRaft broker's snapshot of its metadata image, in the form Kafka's broker writes one
(SnapshotGenerator through RecordsSnapshotWriter): record batches of leader epoch the snapshot's
epoch, the first a control batch holding a SnapshotHeaderRecord, then the image's metadata records
in the order of Kafka's MetadataImage.write (features first, metadata.version before the rest;
brokers, topics with their partitions, configs, client quotas, producer ids, ACLs, SCRAM
credentials, delegation tokens), then a control batch holding a SnapshotFooterRecord.

The records are those Samsa's image keeps (storage/cluster_metadata.py): what it drops on replay
(controllers' registrations, a broker's supported features and log dirs, the quorum's voters
records) is not in its snapshots either, so a snapshot replays into the image it was taken of.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from ..wire.metadata_record import encode_metadata_record
from ..wire.metadata_records.access_control_entry_record import AccessControlEntryRecord
from ..wire.metadata_records.client_quota_record import ClientQuotaRecord, EntityData
from ..wire.metadata_records.config_record import ConfigRecord
from ..wire.metadata_records.delegation_token_record import DelegationTokenRecord
from ..wire.metadata_records.feature_level_record import FeatureLevelRecord
from ..wire.metadata_records.partition_record import PartitionRecord
from ..wire.metadata_records.producer_ids_record import ProducerIdsRecord
from ..wire.metadata_records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from ..wire.metadata_records.topic_record import TopicRecord
from ..wire.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from ..wire.records import Record, build_batch
from .cluster_metadata import (BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE,
                               MetadataReplay)
from .metadata_log import SNAPSHOT_HEADER

__all__ = ["SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "snapshot_records", "build_snapshot"]

SNAPSHOT_FOOTER = 4  # Kafka's ControlRecordType.SNAPSHOT_FOOTER (SNAPSHOT_HEADER: 3)
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_HEADER_VALUE = struct.Struct(">hqB")  # SnapshotHeaderRecord v0: version, last contained log timestamp, no tags
_FOOTER_VALUE = struct.Struct(">hB")  # SnapshotFooterRecord v0: version, no tags
_BATCH_BYTES = 1 << 20  # records per data batch, by size (Kafka's accumulator fills up to 8 MiB)
# The version each record is written at: the lowest that holds every field Samsa's image keeps.
_VERSIONS = {PartitionRecord: 2, RegisterBrokerRecord: 2}


def snapshot_records(replay: MetadataReplay) -> Iterator[Any]:
    """The records that rebuild `replay`'s image from nothing."""
    image = replay.image
    features = sorted(image.features.items(), key=lambda item: (item[0] != "metadata.version", item[0]))
    for name, level in features:
        yield FeatureLevelRecord(name=name, feature_level=level)
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        yield RegisterBrokerRecord(
            broker_id=broker.broker_id, incarnation_id=broker.incarnation_id, broker_epoch=broker.epoch,
            end_points=[BrokerEndpoint(name=name, host=host, port=port, security_protocol=protocol)
                        for name, (host, port, protocol) in broker.endpoints.items()],
            rack=broker.rack, fenced=broker.fenced, in_controlled_shutdown=broker.in_controlled_shutdown)
    for topic in image.topics.values():
        yield TopicRecord(name=topic.name, topic_id=topic.topic_id)
        for index, partition in sorted(topic.partitions.items()):
            yield PartitionRecord(
                partition_id=index, topic_id=topic.topic_id, replicas=list(partition.replicas), isr=list(partition.isr),
                leader=partition.leader, leader_recovery_state=partition.leader_recovery_state,
                leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch,
                directories=list(partition.directories),
                # KIP-966's, tagged: written only when there are some, as Kafka writes none before its MV.
                eligible_leader_replicas=list(partition.elr) if partition.elr else None,
                last_known_elr=list(partition.last_known_elr) if partition.last_known_elr else None)
    for resource_type, by_resource in ((TOPIC_RESOURCE, replay.topic_configs), (BROKER_RESOURCE, image.broker_configs),
                                       (CLIENT_METRICS_RESOURCE, image.client_metrics),
                                       (GROUP_RESOURCE, image.group_configs)):
        for resource_name, configs in by_resource.items():
            for name, value in configs.items():
                yield ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name, value=value)
    for entity, values in image.client_quotas.items():
        for key, quota in values.items():
            yield ClientQuotaRecord(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], key=key,
                                    value=quota, remove=False)
    if image.next_producer_id:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id)
    for acl_id, acl in image.acls.items():
        yield AccessControlEntryRecord(
            id=acl_id, resource_type=acl.resource_type, resource_name=acl.resource_name,
            pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host, operation=acl.operation,
            permission_type=acl.permission_type)
    for user, mechanisms in image.scram_credentials.items():
        for mechanism, (salt, stored_key, server_key, iterations) in mechanisms.items():
            yield UserScramCredentialRecord(name=user, mechanism=mechanism, salt=salt, stored_key=stored_key,
                                            server_key=server_key, iterations=iterations)
    for token in image.delegation_tokens.values():
        yield DelegationTokenRecord(
            owner=token["owner"], requester=token["requester"], renewers=list(token["renewers"]),
            issue_timestamp=token["issue_timestamp"], max_timestamp=token["max_timestamp"],
            expiration_timestamp=token["expiry_timestamp"], token_id=token["token_id"])


def build_snapshot(replay: MetadataReplay, epoch: int, last_contained_timestamp: int, now_ms: int) -> bytes:
    """The snapshot file's bytes: header, the image's records, footer, offsets from 0."""
    batches = [_control_batch(0, epoch, now_ms, SNAPSHOT_HEADER,
                              _HEADER_VALUE.pack(0, last_contained_timestamp, 0))]
    offset = 1
    pending: list[Record] = []
    size = 0

    def flush() -> None:
        nonlocal offset, pending, size
        if pending:
            batches.append(build_batch(pending, base_offset=offset, partition_leader_epoch=epoch,
                                       base_timestamp=now_ms))
            offset += len(pending)
            pending, size = [], 0

    for record in snapshot_records(replay):
        value = encode_metadata_record(record, _VERSIONS.get(type(record), 0))
        pending.append(Record(len(pending), 0, None, value, []))
        size += len(value)
        if size >= _BATCH_BYTES:
            flush()
    flush()
    batches.append(_control_batch(offset, epoch, now_ms, SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0, 0)))
    return b"".join(batches)


def _control_batch(offset: int, epoch: int, timestamp: int, kind: int, value: bytes) -> bytes:
    return build_batch([Record(0, 0, _CONTROL_KEY.pack(0, kind), value, [])], base_offset=offset, is_control=True,
                       partition_leader_epoch=epoch, base_timestamp=timestamp, max_timestamp=timestamp)
