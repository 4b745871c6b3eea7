"""The broker's feature levels (KIP-584): which each feature supports and which is finalized.

ApiVersions v3+ lists both; APIs that need a feature (share groups need `share.version` 1) are
served and advertised only while it is finalized at that level, as Kafka 4.4 hides the share APIs
unless `share.version` is finalized (ApiVersionManager, ShareCoordinatorService.isShareGroupsEnabled).

Samsa keeps no metadata log, so its levels are fixed at startup: each feature is finalized at the
highest level Samsa implements where Kafka 4.4 finalizes it by default (a level Kafka 4.4 also
offers but Samsa does not implement is left out of "supported").
"""

from __future__ import annotations

from dataclasses import dataclass

from .config.broker_config_defs import BrokerConfigDef


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
    # 1: flexible transaction log records; 2 (KIP-890 part 2) is not implemented.
    "transaction.version": FeatureLevels((0, 1), 1),
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


@dataclass(frozen=True, eq=False)  # hashed by identity: ApiVersions' listings are cached per broker
class BrokerFeatures:
    """The levels this broker supports and has finalized, fixed when it starts."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]

    @classmethod
    def create(cls) -> BrokerFeatures:
        return cls({name: levels.supported for name, levels in FEATURES.items()},
                   {name: levels.finalized for name, levels in FEATURES.items()})

    def level(self, name: str) -> int:
        return self.finalized.get(name, 0)

    def enabled(self, requirement: tuple[str, int] | None) -> bool:
        """Whether a (feature, level) requirement is met; None requires nothing."""
        return requirement is None or self.level(requirement[0]) >= requirement[1]


# Kafka's epoch is the metadata log offset of the last feature change; Samsa's never change.
FINALIZED_FEATURES_EPOCH = 0

SHARE_GROUPS = ("share.version", 1)
STREAMS_GROUPS = ("streams.version", 1)
