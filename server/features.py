"""The broker's feature levels (KIP-584): which each feature supports and which is finalized.

ApiVersions v3+ lists both, with the epoch of the finalized ones. UpdateFeatures changes the
finalized levels (coordinator/feature_control.py decides, as Kafka 4.4's controller does); a single
broker keeps them in its metadata image (server/metadata/image.py), so they survive a restart.
An API that needs a feature (share groups need `share.version` 1, KIP-848 consumer groups
`group.version` 1) is advertised whatever its level, as Kafka 4.4 advertises it, and answered
UNSUPPORTED_VERSION while the level is below (KafkaApis.isShareGroupProtocolEnabled,
isConsumerGroupProtocolEnabled): `disabled_feature_response`. Share sessions end when share.version
drops to 0 (Kafka's onShareVersionToggle), and the share coordinator's periodic jobs (snapshots of
cold partitions, pruning) stop until it is back; its inter-broker state RPCs (and FindCoordinator
for share partitions) are answered at any level, as Kafka 4.4's broker answers them at
share.version 0.

A feature is finalized by default at the highest level Samsa implements where Kafka 4.4 finalizes
it by default (a level Kafka 4.4 also offers but Samsa does not implement is left out of "supported").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from ..wire.protocol import ApiKey, response_class
from .config.broker_config_defs import BrokerConfigDef

if TYPE_CHECKING:
    from ..wire.codec import Message


@dataclass(frozen=True)
class FeatureLevels:
    supported: tuple[int, int]  # (min, max) level this broker implements
    finalized: int  # 0: not finalized (ApiVersions leaves it out), as in Kafka


FEATURES: dict[str, FeatureLevels] = {
    "group.version": FeatureLevels((0, 1), 1),  # 1: KIP-848 consumer groups
    "kraft.version": FeatureLevels((0, 0), 0),
    # Kafka 4.4's range (3.3-IV3 to 4.4's level): the APIs are 4.4's; Samsa keeps no metadata log.
    "metadata.version": FeatureLevels((7, 33), 33),
    # 1: share groups (KIP-932); 2 (their dead-letter queues) is not implemented.
    "share.version": FeatureLevels((0, 1), 1),
    # 1: streams groups (KIP-1071).
    "streams.version": FeatureLevels((0, 1), 1),
    # 1: flexible transaction log records; 2: KIP-890 part 2 (an epoch bump per transaction, EndTxn v5,
    # Produce v12). A ZooKeeper cluster stays at 1, as Kafka 3.9 (BrokerFeatures.zookeeper_mode).
    "transaction.version": FeatureLevels((0, 2), 2),
    "eligible.leader.replicas.version": FeatureLevels((0, 0), 0),
}

# Kafka 4.4's internal config (ServerConfigs.UNSTABLE_FEATURE_VERSIONS_ENABLE_CONFIG).
FEATURE_CONFIGS = {
    "unstable.feature.versions.enable": BrokerConfigDef(
        name="unstable.feature.versions.enable", type="boolean", default=False, valid_values="",
        importance="high", update_mode="read-only", kafka_version="4.4.0",
        doc="Kafka's internal config: offer feature levels that are not production-ready. Accepted; "
            "Samsa offers only the levels it implements, so it changes nothing."),
}


class BrokerFeatures:
    """The levels this broker supports and has finalized. The finalized ones change with
    UpdateFeatures (`finalize`); `epoch` moves with each change (Kafka's is the metadata log's
    offset of the change). Hashed by identity: ApiVersions' listings are cached per broker and epoch."""

    def __init__(self, supported: dict[str, tuple[int, int]], finalized: dict[str, int], epoch: int = 0) -> None:
        self.supported = supported
        self.finalized = finalized
        self.epoch = epoch
        # Called with (feature, old level, new level) for each level a change moves.
        self.listeners: list[Callable[[str, int, int], None]] = []

    @classmethod
    def create(cls, finalized: Mapping[str, int] | None = None, epoch: int = 0) -> BrokerFeatures:
        """The default levels (FEATURES), each replaced by its level in `finalized` (levels kept in
        the metadata image) where that is one this broker supports."""
        supported = {name: levels.supported for name, levels in FEATURES.items()}
        levels = {name: levels.finalized for name, levels in FEATURES.items()}
        for name, level in (finalized or {}).items():
            if name in supported and supported[name][0] <= level <= supported[name][1]:
                levels[name] = level
        return cls(supported, levels, epoch)

    @classmethod
    def zookeeper_mode(cls) -> BrokerFeatures:
        """A ZooKeeper-mode broker's: the defaults but transaction.version 1, fixed. Kafka 3.9's
        ZooKeeper mode has no transaction version 2 (KIP-890 part 2 is Kafka 4's, KRaft-only): its
        clients end transactions with EndTxn v4 on a steady epoch."""
        features = cls.create()
        features.supported[TRANSACTION_VERSION] = (0, 1)
        features.finalized[TRANSACTION_VERSION] = 1
        return features

    @classmethod
    def kraft_mode(cls) -> BrokerFeatures:
        """A KRaft cluster's broker's: the defaults, kraft.version up to 1 (a quorum of dynamic
        voters, KIP-853: the observer reads its control records like the others, and skips them) and
        eligible.leader.replicas.version up to 1 (KIP-966: the controller keeps the ELR; a broker
        replays it into its image, answers it in DescribeTopicPartitions and advances no high
        watermark while the ISR is under min.insync.replicas, which Samsa's leaders do at every level,
        as Kafka 4.4's); the controller finalizes the levels (FeatureLevelRecords of the metadata log)."""
        features = cls.create()
        features.supported[KRAFT_VERSION] = (0, 1)
        features.supported[ELIGIBLE_LEADER_REPLICAS_VERSION] = (0, 1)
        return features

    def level(self, name: str) -> int:
        return self.finalized.get(name, 0)

    def enabled(self, requirement: tuple[str, int] | None) -> bool:
        """Whether a (feature, level) requirement is met; None requires nothing."""
        return requirement is None or self.level(requirement[0]) >= requirement[1]

    def finalize(self, levels: Mapping[str, int], epoch: int) -> None:
        """The finalized levels are now `levels` (a committed change, already durable)."""
        before = dict(self.finalized)
        self.finalized = {name: levels.get(name, 0) for name in self.supported}
        self.epoch = epoch
        for name, level in self.finalized.items():
            if level != before.get(name, 0):
                for listener in self.listeners:
                    listener(name, before.get(name, 0), level)


SHARE_GROUPS = ("share.version", 1)
TRANSACTION_VERSION = "transaction.version"
KRAFT_VERSION = "kraft.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
STREAMS_GROUPS = ("streams.version", 1)
CONSUMER_GROUPS = ("group.version", 1)  # KIP-848's consumer rebalance protocol (GroupVersion.GV_1)

# The message of Kafka's Errors.UNSUPPORTED_VERSION, where Kafka's getErrorResponse carries one.
_UNSUPPORTED_VERSION_MESSAGE = "The version of API is not supported."


def disabled_feature_response(api_key: int, request: Any) -> Message:
    """What Kafka 4.4 answers a request of an API whose feature level is below what it needs: the
    API's getErrorResponse(UNSUPPORTED_VERSION), before any authorization (checked with Kafka 4.4's
    broker at share.version and group.version 0)."""
    response = response_class(api_key)()
    code = ErrorCode.UNSUPPORTED_VERSION
    if api_key in (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.STREAMS_GROUP_DESCRIBE):
        group = type(response).DescribedGroup
        response.groups = [group(group_id=group_id, error_code=code, error_message=None)
                           for group_id in request.group_ids]
    elif api_key == ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        group = type(response).DescribeShareGroupOffsetsResponseGroup
        response.groups = [group(group_id=g.group_id, topics=[], error_code=code, error_message=None)
                           for g in request.groups]
    else:
        response.error_code = code
        if api_key in (ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS):
            response.error_message = _UNSUPPORTED_VERSION_MESSAGE
        elif "error_message" in response._fields:
            response.error_message = None
    return response
