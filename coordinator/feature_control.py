"""Changes to the finalized feature levels (KIP-584, KIP-1022), as Kafka decides them: UpdateFeatures'
upgrades, safe and unsafe downgrades, each checked as Kafka 4.4's FeatureControlManager and
QuorumFeatures check it (KRaft), or as Kafka 3.9's KafkaController checks it in ZooKeeper mode.

Pure: the caller passes the levels finalized now and the ranges this broker supports, and keeps the
levels that come back. Kafka's catalogue of levels (its Feature, FeatureVersion and MetadataVersion
enums) is here too, for the dependencies between features and the metadata.version downgrade check.

Kafka processes a request's updates in the iteration order of a java.util.HashMap keyed by feature
name (the first failing one is the error reported): `java_hash_order` gives that order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..wire.errors import ErrorCode
from .client_metrics import java_hash_order

# FeatureUpdate.UpgradeType's codes (UpdateFeaturesRequest v1+); any other is UNKNOWN.
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"


@dataclass(frozen=True)
class MetadataVersion:
    """One of Kafka's MetadataVersion values: its level, release and whether the metadata records
    changed with it (a downgrade across such a version could lose metadata)."""

    level: int
    release: str
    sub_version: str
    did_metadata_change: bool

    @property
    def version(self) -> str:
        """Kafka's MetadataVersion.version(): "4.4-IV2"."""
        return f"{self.release}-{self.sub_version}"


METADATA_VERSIONS: dict[int, MetadataVersion] = {mv.level: mv for mv in (
    MetadataVersion(level, release, sub, changed) for level, release, sub, changed in (
        (7, "3.3", "IV3", True), (8, "3.4", "IV0", True), (9, "3.5", "IV0", False), (10, "3.5", "IV1", False),
        (11, "3.5", "IV2", True), (12, "3.6", "IV0", False), (13, "3.6", "IV1", True), (14, "3.6", "IV2", True),
        (15, "3.7", "IV0", True), (16, "3.7", "IV1", False), (17, "3.7", "IV2", True), (18, "3.7", "IV3", False),
        (19, "3.7", "IV4", False), (20, "3.8", "IV0", False), (21, "3.9", "IV0", False), (22, "4.0", "IV0", False),
        (23, "4.0", "IV1", True), (24, "4.0", "IV2", False), (25, "4.0", "IV3", False), (26, "4.1", "IV0", False),
        (27, "4.1", "IV1", False), (28, "4.2", "IV0", False), (29, "4.2", "IV1", False), (30, "4.3", "IV0", True),
        (31, "4.4", "IV0", False), (32, "4.4", "IV1", True), (33, "4.4", "IV2", True), (34, "4.5", "IV0", False)))}
MINIMUM_METADATA_VERSION = METADATA_VERSIONS[7]  # MetadataVersion.MINIMUM_VERSION
LATEST_TESTING_METADATA_VERSION = METADATA_VERSIONS[34]


@dataclass(frozen=True)
class FeatureVersion:
    """A level of a feature (Kafka's FeatureVersion): the metadata.version that bootstraps it by
    default, and the levels of other features it needs."""

    level: int
    bootstrap_metadata_version: int
    dependencies: Mapping[str, int] = field(default_factory=dict)


# Kafka 4.4's Feature.PRODUCTION_FEATURES, in its order, with every level each defines.
FEATURE_VERSIONS: dict[str, tuple[FeatureVersion, ...]] = {
    KRAFT_VERSION: (FeatureVersion(0, 7), FeatureVersion(1, 21)),
    "transaction.version": (FeatureVersion(0, 7), FeatureVersion(1, 24), FeatureVersion(2, 24)),
    "group.version": (FeatureVersion(0, 7), FeatureVersion(1, 22)),
    "eligible.leader.replicas.version": (FeatureVersion(0, 7), FeatureVersion(1, 26, {METADATA_VERSION: 23})),
    "share.version": (FeatureVersion(0, 7), FeatureVersion(1, 28), FeatureVersion(2, 31)),
    "streams.version": (FeatureVersion(0, 7), FeatureVersion(1, 29)),
}


def metadata_changed(source: int, target: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged: whether a version between the two (the lower
    one excluded) changed the metadata records."""
    low, high = sorted((source, target))
    return any(METADATA_VERSIONS[level].did_metadata_change for level in range(low + 1, high + 1))


def version_range(low: int, high: int) -> str:
    """Kafka's VersionRange.toString."""
    return str(low) if low == high else f"{low}+" if high == 32767 else f"{low}-{high}"


@dataclass(frozen=True)
class FeatureUpdateResult:
    error_code: int
    error_message: str | None  # Kafka's ApiError message: None when there is no error
    levels: dict[str, int]  # the finalized levels after the update (unchanged on error)


class _Invalid(Exception):
    pass


def update_features(finalized: Mapping[str, int], supported: Mapping[str, tuple[int, int]], node_id: int,
                    updates: Mapping[str, tuple[int, int]]) -> FeatureUpdateResult:
    """Kafka 4.4's FeatureControlManager.updateFeatures on a single node that is both the
    controller (`node_id`) and the only broker: `updates` maps a feature to (level, upgrade type);
    `finalized` holds every finalized level (metadata.version and kraft.version included; a level
    of 0 or none: not finalized); `supported` is this node's range of each feature. Every update
    is applied, or none: the first invalid one (in HashMap order) is the answer's error."""
    proposed = {name: level for name, level in finalized.items()}
    proposed.update({name: level for name, (level, _) in updates.items()})
    levels = dict(finalized)
    for name in java_hash_order(updates):
        level, upgrade_type = updates[name]
        try:
            _update_feature(name, level, upgrade_type, finalized, supported, node_id, proposed)
        except _Invalid as e:
            return FeatureUpdateResult(ErrorCode.INVALID_UPDATE_VERSION, str(e), dict(finalized))
        if name != KRAFT_VERSION:  # kraft.version is the KRaft quorum's: no FeatureLevelRecord
            levels[name] = level
    return FeatureUpdateResult(ErrorCode.NONE, None, levels)


def _update_feature(name: str, level: int, upgrade_type: int, finalized: Mapping[str, int],
                    supported: Mapping[str, tuple[int, int]], node_id: int, proposed: Mapping[str, int]) -> None:
    def invalid(message: str) -> _Invalid:
        return _Invalid(f"Invalid update version {level} for feature {name}. {message}")

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise invalid("The controller does not support the given upgrade type.")
    current = finalized.get(name, 0)
    if level < 0:
        raise invalid("A feature version cannot be less than 0.")
    low, high = supported.get(name, (0, 0))  # QuorumFeatures.DISABLED when not supported
    if not low <= level <= high:
        raise invalid(f"Local controller {node_id} does not support this feature." if high == 0 else
                      f"Local controller {node_id} only supports versions {version_range(low, high)}")
    if level < current:
        if upgrade_type == UPGRADE:
            raise invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
    elif level > current and upgrade_type != UPGRADE:
        raise invalid("Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        _check_metadata_version(current, level, upgrade_type == UNSAFE_DOWNGRADE)
    elif name == KRAFT_VERSION:
        if upgrade_type != UPGRADE and level != current:
            raise invalid("Can't downgrade the version of this feature.")
    else:
        versions = FEATURE_VERSIONS.get(name)
        if versions is None:
            raise invalid(f"Feature {name} not found.")
        version = next((v for v in versions if v.level == level), None)
        if version is None:
            raise invalid(f"No feature:{name} with feature level {level}")
        problem = dependency_problem(name, version, proposed)
        if problem is not None:
            raise invalid(problem)


def dependency_problem(name: str, version: FeatureVersion, levels: Mapping[str, int]) -> str | None:
    """Kafka's Feature.validateVersion: why `name` cannot be at this level beside `levels`, or None."""
    metadata_version = levels.get(METADATA_VERSION)
    if version.level >= 1 and (metadata_version is None or metadata_version < MINIMUM_METADATA_VERSION.level):
        return (f"{name} could not be set to {version.level} because it depends on metadata.version="
                f"{MINIMUM_METADATA_VERSION.level} ({MINIMUM_METADATA_VERSION.version})")
    for dependency, needed in version.dependencies.items():
        if levels.get(dependency, 0) < needed:
            return f"{name} could not be set to {version.level} because it depends on {dependency} level {needed}"
    return None


def _check_metadata_version(current: int, level: int, unsafe: bool) -> None:
    """FeatureControlManager.updateMetadataVersion: a downgrade across a version that changed the
    metadata records is refused, unsafe or not."""
    if level not in METADATA_VERSIONS:
        raise _Invalid(f"Invalid metadata.version {level}. Valid versions are from "
                       f"{MINIMUM_METADATA_VERSION.level} to {LATEST_TESTING_METADATA_VERSION.level}.")
    if level < current and metadata_changed(current, level):
        reason = ("Unsafe metadata downgrade is not supported in this version." if unsafe else
                  "Refusing to perform the requested downgrade because it might delete metadata information.")
        raise _Invalid(f"Unsupported metadata.version downgrade from {current} to {level}. {reason}")


# -- ZooKeeper mode -------------------------------------------------------------------------------

def zk_update_features(existing: Mapping[str, int], supported: Mapping[str, tuple[int, int]],
                       updates: Iterable[tuple[str, int, int]]) -> tuple[dict[str, tuple[int, str | None]],
                                                                         dict[str, int]]:
    """Kafka 3.9's KafkaController.processFeatureUpdatesWithActiveController (ZooKeeper mode):
    each update (feature, level, upgrade type: v0's AllowDowngrade as SAFE_DOWNGRADE) succeeds or
    fails alone. (each feature's (error code, message), in the order Kafka answers them; the
    finalized levels to write to /feature). `existing`: the /feature znode's levels; `supported`:
    the brokers' ranges (a ZooKeeper-mode Kafka 3.9 broker supports none)."""
    target = dict(existing)
    errors: dict[str, tuple[int, str | None]] = {}
    for name, level, upgrade_type in updates:
        try:
            new = _zk_validate(name, level, upgrade_type, existing.get(name), supported)
        except _Invalid as e:
            errors[name] = (ErrorCode.INVALID_REQUEST, str(e))
            continue
        if new is None:
            target.pop(name, None)
        else:
            target[name] = new
        errors[name] = (ErrorCode.NONE, None)
    return {name: errors[name] for name in java_hash_order(errors)}, target


def _zk_validate(name: str, level: int, upgrade_type: int, existing: int | None,
                 supported: Mapping[str, tuple[int, int]]) -> int | None:
    """KafkaController.validateFeatureUpdate: the feature's new level, None to delete it."""
    if not name:
        raise _Invalid("Feature name can not be empty.")
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _Invalid("Received unknown upgrade type.")
    if level < 1 and upgrade_type != UPGRADE:  # FeatureUpdateItem.isDeleteRequest
        if existing is None:
            raise _Invalid("Can not delete non-existing finalized feature.")
        return None
    if level < 1:
        raise _Invalid(f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType "
                       f"in the request.")
    if existing is not None:
        if level == existing:
            verb = "downgrade" if upgrade_type == SAFE_DOWNGRADE else "upgrade"
            raise _Invalid(f"Can not {verb} a finalized feature from existing versionLevel:{existing} to the same value.")
        if level < existing and upgrade_type != SAFE_DOWNGRADE:
            raise _Invalid(f"Can not downgrade finalized feature from existing versionLevel:{existing} to provided "
                           f"versionLevel:{level} without setting the downgradeType to SAFE in the request.")
        if upgrade_type != UPGRADE and level > existing:
            raise _Invalid(f"When the downgradeType is set to SAFE in the request, the provided versionLevel:{level} "
                           f"can not be greater than existing versionLevel:{existing}.")
    supported_range = supported.get(name)
    if supported_range is None:
        raise _Invalid("Could not apply finalized feature update because the provided feature is not supported.")
    if not supported_range[0] <= level <= supported_range[1]:  # SupportedVersionRange.isIncompatibleWith
        raise _Invalid(f"Could not apply finalized feature update because the provided versionLevel:{level} is "
                       f"lower than the supported minVersion:{supported_range[0]}.")
    return level
