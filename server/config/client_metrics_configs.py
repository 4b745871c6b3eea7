"""Client-metrics config resources (ConfigResource type 16, KIP-714): a named subscription with
`metrics` (metric name prefixes, `*` for all), `interval.ms` (the push interval) and `match`
(name=regex pairs on the client's attributes). Kafka's ClientMetricsConfigs validates them and its
controller (ConfigurationControlManager) stores them; this module does both for the config APIs:
DescribeConfigs lists each config (set or default, as Kafka 4.4), AlterConfigs replaces,
IncrementalAlterConfigs edits (APPEND and SUBTRACT on the two lists), deleting every config deletes
the subscription.

Kafka 3.9 in ZooKeeper mode does not have them: its ZkConfigRepository refuses to describe one and
ZkAdminManager to alter one, both with INVALID_REQUEST; a Samsa broker in a ZooKeeper cluster does
the same (and, like that broker, does not serve the telemetry APIs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...coordinator.client_metrics import DEFAULT_INTERVAL_MS, MATCH_ATTRIBUTES, Subscription
from ...wire.errors import ErrorCode
from .kafka_config import ConfigEntry, ConfigError, ConfigSource, ConfigSynonym, ConfigType, parse_value
from .config_resources import ConfigApiError, incremental_alter, invalid_request

if TYPE_CHECKING:
    from ..context import BrokerServices

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
CONFIG_TYPES = {METRICS: "list", INTERVAL_MS: "int", MATCH: "list"}
# ClientMetricsConfigs' definitions as Kafka 4.4 describes them: type, default, documentation.
CONFIGS = {
    METRICS: (ConfigType.LIST, "", "Telemetry metric name prefix list"),
    INTERVAL_MS: (ConfigType.INT, str(DEFAULT_INTERVAL_MS), "Metrics push interval in milliseconds"),
    MATCH: (ConfigType.LIST, "", "Client match criteria"),
}
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000


def _illegal_pattern(pattern: str) -> ConfigApiError:
    return ConfigApiError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")


def parse_match(patterns: tuple[str, ...]) -> dict[str, re.Pattern]:
    """ClientMetricsConfigs.parseMatchingPatterns: `name=regex`, name a client attribute."""
    result = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_ATTRIBUTES:
            raise _illegal_pattern(pattern)
        try:
            result[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise _illegal_pattern(pattern) from None
    return result


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """ClientMetricsConfigs.validate, then the subscription the configs describe; ConfigApiError
    with Kafka's code and message if they are invalid."""
    if not name:
        raise invalid_request("Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_TYPES:
            raise invalid_request(f"Unknown client metrics configuration: {key}")
    try:
        parsed = {key: parse_value(key, CONFIG_TYPES[key], raw) for key, raw in configs.items()}
    except ConfigError as error:  # the controller answers a ConfigException so
        raise ConfigApiError(ErrorCode.INVALID_CONFIG, error.message) from None
    interval_ms, metrics, match = (parsed.get(INTERVAL_MS, DEFAULT_INTERVAL_MS), parsed.get(METRICS, ()),
                                   parsed.get(MATCH, ()))
    # parse_value gave each the type CONFIG_TYPES names for it
    assert isinstance(interval_ms, int) and isinstance(metrics, tuple) and isinstance(match, tuple)
    if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
        raise invalid_request(f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be between "
                              f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    return Subscription(name, metrics, interval_ms, parse_match(match))


def _incremental(current: Mapping[str, str], changes) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource's operations: APPEND and SUBTRACT
    on the two lists, starting from the empty list."""
    return incremental_alter(
        current, changes, is_list=lambda name: CONFIG_TYPES.get(name) == "list",
        not_list_message=lambda operation, name: f"Can't {operation.name} to key {name} because its type is not LIST.",
        unset_value=lambda name: "")


def alter_client_metrics(services: BrokerServices, name: str, changes, incremental: bool, validate_only: bool) -> None:
    """AlterConfigs (replace) or IncrementalAlterConfigs (edit) on a client-metrics resource of the
    broker's own image."""
    current = services.metadata.client_metrics.get(name, {})
    configs = _incremental(current, changes) if incremental else {c.name: c.value for c in changes}
    subscription = parse_subscription(name, configs)
    if validate_only:
        return
    services.metadata.set_client_metrics_configs(name, configs)
    services.client_telemetry.update_subscription(name, subscription if configs else None)


def describe_client_metrics(services: BrokerServices, name: str, keys) -> list[ConfigEntry]:
    """ConfigHelper's CLIENT_METRICS case, as Kafka 4.4 answers it: each config (those asked for),
    set ones with source CLIENT_METRICS_CONFIG and themselves as their synonym, the others with
    their default (DEFAULT_CONFIG, no synonym); an unknown resource is all defaults. (Kafka 3.9
    listed only the configs set, with no synonyms, types or documentation.)"""
    if not name:
        raise invalid_request("Client metrics subscription name must not be empty")
    configs = services.admin.client_metrics_configs(services, name)
    entries = []
    for key, (config_type, default, documentation) in sorted(CONFIGS.items()):
        if keys and key not in keys:
            continue
        if key in configs:
            value, source = configs[key], ConfigSource.CLIENT_METRICS_CONFIG
            synonyms: tuple[ConfigSynonym, ...] = (ConfigSynonym(key, value, source),)
        else:
            value, source, synonyms = default, ConfigSource.DEFAULT_CONFIG, ()
        entries.append(ConfigEntry(key, value, source, read_only=False, is_sensitive=False, synonyms=synonyms,
                                   config_type=config_type, documentation=documentation))
    return entries


def stored_subscriptions(metadata) -> dict[str, Subscription]:
    """The stored subscriptions, as the broker loads them at start (the invalid ones skipped)."""
    result = {}
    for name, configs in metadata.client_metrics.items():
        try:
            result[name] = parse_subscription(name, configs)
        except ConfigApiError:
            continue
    return result
