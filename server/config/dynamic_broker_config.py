"""Dynamic broker configs (KIP-226) as a KRaft-mode Kafka 3.x broker serves them.

Two BROKER resources hold them: this broker's id (its own configs, DYNAMIC_BROKER_CONFIG) and the
empty name (cluster-wide defaults, DYNAMIC_DEFAULT_BROKER_CONFIG). Only configs whose update mode
allows it may be set there (Kafka's DynamicBrokerConfig); a change is checked, stored in the
metadata image and applied at once: the broker's KafkaConfig takes the new values in place (which
the connection quotas read, their waiting acceptors woken), and every log whose topic does not
override a changed default gets its new LogConfig.

Kafka answers a value that fails these checks with INVALID_REQUEST, not INVALID_CONFIG: its
ConfigAdminManager wraps the ConfigException (KAFKA-13609 kept it so), and clients see that code.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ...coordinator.client_metrics import java_hash_order, java_set_string
from .broker_config_defs import BROKER_CONFIGS
from .kafka_config import ConfigError, KafkaConfig, listener_config_base, parse_config, value_to_string
from .config_resources import OpType, incremental_alter, invalid_request, parse_node_id
from ..network.connection_quotas import check_connection_limits
from ..network.listener_config import ListenerConfig

if TYPE_CHECKING:
    from ...storage.log_manager import LogManager
    from ..context import BrokerServices
    from ..metadata.cache import MetadataView
    from ..metadata.image import MetadataStore
    from ..replication.replica_manager import ReplicaManager

log = logging.getLogger("samsa.dynamic_config")

# SslConfigs.RECONFIGURABLE_CONFIGS: a keystore or truststore is changed per listener only.
DYNAMIC_SECURITY_CONFIGS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
)
# Listener configs that a listener prefix does not make per-broker.
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# What KIP-612's ListenerConnectionQuota takes per listener (the broker-wide value unless the
# listener overrides it), dynamically too.
LISTENER_CONNECTION_LIMITS = ("max.connections", "max.connection.creation.rate")
PER_ADDRESS_LIMITS = ("max.connections.per.ip", "max.connections.per.ip.overrides")
# Thread pools Kafka resizes only within half to double their size per change.
THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                       "background.threads", "num.network.threads")


def _scala_set(names: Iterable[str]) -> str:
    # How Kafka's messages print a Scala Set: up to four elements keep their order in a Set(...).
    items = list(names)
    return f"{'Set' if len(items) <= 4 else 'HashSet'}({', '.join(items)})"


def _per_broker_only(name: str) -> bool:
    base = listener_config_base(name)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    return name in BROKER_CONFIGS and BROKER_CONFIGS[name].update_mode == "per-broker"


def is_password(name: str) -> bool:
    definition = BROKER_CONFIGS.get(listener_config_base(name) or name)
    return definition is not None and definition.type == "password"


def _read_only(name: str) -> bool:
    return name in BROKER_CONFIGS and BROKER_CONFIGS[name].update_mode == "read-only"


def _check_value(name: str, raw: str) -> None:
    # DynamicConfig.Broker.validate: a listener override is parsed as its base config; names
    # Kafka does not define are custom configs and pass.
    base = listener_config_base(name) or name
    if base in BROKER_CONFIGS:
        parse_config(base, BROKER_CONFIGS[base], raw)


def validate_dynamic_configs(props: Mapping[str, str], per_broker: bool, kraft: bool = False) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: ConfigError with Kafka's message. Kafka 4.4's
    (`kraft`) prints the names as a java.util.HashSet, Kafka 3.9's as a Scala Set."""
    def names(items: list[str]) -> str:
        return java_set_string(java_hash_order(items)) if kraft else _scala_set(items)

    read_only = [name for name in props if _read_only(name)]
    if read_only:
        raise ConfigError(read_only[0], f"Cannot update these configs dynamically: {names(read_only)}")
    unprefixed = [name for name in DYNAMIC_SECURITY_CONFIGS if name in props]
    if unprefixed:
        raise ConfigError(unprefixed[0], "These security configs can be dynamically updated only per-listener "
                                         f"using the listener prefix: {names(unprefixed)}")
    for name, raw in props.items():
        _check_value(name, raw)
    if not per_broker:
        per_broker_only = [name for name in props if _per_broker_only(name)]
        if per_broker_only:
            raise ConfigError(per_broker_only[0], "Cannot update these configs at default cluster level, broker id "
                                                  f"must be specified: {names(per_broker_only)}")


def usable_dynamic_configs(props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    """Stored dynamic configs without what cannot apply (DynamicBrokerConfig.fromPersistentProps):
    invalid values, read-only configs, unprefixed keystores, per-broker configs set cluster-wide.
    What is dropped is logged, not fatal."""
    usable = {}
    for name, raw in props.items():
        try:
            validate_dynamic_configs({name: raw}, per_broker)
        except ConfigError as error:
            log.error("Dynamic %s config %s will be ignored: %s",
                      "broker" if per_broker else "default cluster", name, error.message)
            continue
        usable[name] = raw
    return usable


# --- checks a new configuration must pass before it replaces the current one --------------------


def _invalid_dynamic(reason: str) -> ConfigError:
    # processReconfiguration wraps a reconfigurable's ConfigException as
    # new ConfigException("Invalid dynamic configuration", e), whose message reads so.
    return ConfigError(None, f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} "
                             "for configuration Invalid dynamic configuration")


def _validate_reconfiguration(current: KafkaConfig, new: KafkaConfig) -> None:
    """What Kafka's BrokerReconfigurables check before a change (listeners, thread pools)."""
    old_listeners = {endpoint.name: endpoint for endpoint in current.listeners}
    new_listeners = {endpoint.name: endpoint for endpoint in new.listeners}
    for name in old_listeners.keys() & new_listeners.keys():
        if old_listeners[name].security_protocol != new_listeners[name].security_protocol:
            raise _invalid_dynamic(f"Security protocol cannot be updated for existing listener ListenerName({name})")
    if set(current.advertised_listeners) != set(new.advertised_listeners):
        raise _invalid_dynamic("Advertised listeners cannot be altered when using a Raft-based metadata quorum.")
    if old_listeners != new_listeners:
        # Kafka would open or close the listeners; Samsa binds its listeners at startup only.
        raise _invalid_dynamic("Listeners cannot be added or removed while Samsa runs: restart the broker "
                               "with the new listeners")
    if any(new.get(name) != current.get(name) for name in PER_ADDRESS_LIMITS):
        check_connection_limits(new)  # which resolves the host names of the overrides: only when changed
    for listener in new_listeners:
        old_limits, new_limits = ListenerConfig(current, listener), ListenerConfig(new, listener)
        for name in LISTENER_CONNECTION_LIMITS:
            # ListenerConnectionQuota.validateReconfiguration, for a listener whose value changes.
            value = new_limits.get(name)
            if value != old_limits.get(name) and value <= 0:
                raise _invalid_dynamic(f"Invalid {name} {value}")
    for name in THREAD_POOL_CONFIGS:
        old, value = current.get(name), new.get(name)
        assert isinstance(old, int) and isinstance(value, int)
        if value == old:
            continue
        failed = f"Dynamic thread count update validation failed for {name}={value}"
        if value <= 0:
            raise _invalid_dynamic(f"{failed}, value should be at least 1")
        if value < old // 2:
            raise _invalid_dynamic(f"{failed}, value should be at least half the current value {old}")
        if value > old * 2:
            raise _invalid_dynamic(f"{failed}, value should not be greater than double the current value {old}")


# --- the BROKER resource ------------------------------------------------------------------------


def check_broker_resource(name: str, node_id: int) -> None:
    """A BROKER resource to alter is the empty name or this broker's id (ConfigAdminManager)."""
    if name and parse_node_id(name) != node_id:
        raise invalid_request(f"Unexpected broker id, expected {node_id}, but received {name}")


def incremental_broker_configs(current: Mapping[str, str], changes) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on a BROKER resource's dynamic configs. The new values
    are computed as for every resource type (config_resources.incremental_alter: Kafka's
    controller computes them with one function, ConfigurationControlManager's). What differs for
    brokers are the checks a Kafka broker makes before it forwards the request
    (ConfigAdminManager.validateBrokerConfigChange and prepareIncrementalConfigs): every operation
    type is checked before any is applied; APPEND and SUBTRACT take configs Kafka defines as lists
    only, refused in the broker's words; and they start from the dynamic value, else Kafka's
    default (Kafka's configKeys), not the effective value as a topic's do."""
    for change in changes:
        if change.config_operation not in set(OpType):
            raise invalid_request(f"Unknown operations type {change.config_operation}")
    return incremental_alter(current, changes, is_list=_is_list, not_list_message=_not_list_message,
                             unset_value=lambda name: value_to_string(BROKER_CONFIGS[name].default) or "")


def _is_list(name: str) -> bool:
    return name in BROKER_CONFIGS and BROKER_CONFIGS[name].type == "list"


def _not_list_message(operation: OpType, name: str) -> str:
    if name not in BROKER_CONFIGS:
        return f"Unknown config name: {name}"
    return f"Config value {operation.name.lower()} is not allowed for config key: {name}"


def alter_broker_configs(services: BrokerServices, resource_name: str, props: Mapping[str, str],
                         validate_only: bool) -> None:
    """Make `props` the whole dynamic config set of a BROKER resource (checked by
    check_broker_resource): validate, then unless validate_only store and apply it."""
    per_broker = resource_name != ""
    new = validated_broker_configs(services.config, props, per_broker)
    if validate_only:
        return
    # Kept under the id as this broker prints it, so "00" and "0" name the same resource.
    services.metadata.set_broker_configs(str(services.node_id) if per_broker else "", dict(props))
    log.info("Updated %s dynamic configs: %s", f"broker {resource_name}" if per_broker else "cluster default",
             sorted(props))
    _apply(services.config, services.log_manager, services.metadata, services.replica_manager,
           new.dynamic_configs(per_broker=True), new.dynamic_configs(per_broker=False))
    services.connection_quotas.reconfigure()


def validated_broker_configs(current: KafkaConfig, props: Mapping[str, str], per_broker: bool) -> KafkaConfig:
    """The broker's config with `props` as a BROKER resource's dynamic configs, or INVALID_REQUEST."""
    try:
        validate_dynamic_configs(props, per_broker, kraft=not current.is_set("zookeeper.connect"))
        new = current.with_dynamic(props if per_broker else current.dynamic_configs(per_broker=True),
                                   current.dynamic_configs(per_broker=False) if per_broker else props)
        _validate_reconfiguration(current, new)
    except ConfigError as error:
        raise invalid_request(error.message) from None
    return new


def apply_cluster_broker_configs(services: BrokerServices) -> None:
    """The dynamic configs of this broker and the cluster default, as ZooKeeper holds them, take
    effect (BrokerConfigHandler): the broker's config, then each hosted log's defaults."""
    load_dynamic_broker_configs(services.config, services.metadata_cache, services.log_manager, services.node_id,
                                clear=True)
    services.connection_quotas.reconfigure()
    replicas = services.replica_manager
    for partition in list(replicas.partitions.values()):
        partition.update_config(replicas.topic_log_config(partition.topic))


# What Kafka 4's `kafka-storage format` writes as cluster-wide dynamic defaults: the broker's
# min.insync.replicas (KIP-966 wants it set at the cluster level). A new cluster's topics show it as
# DYNAMIC_DEFAULT_BROKER_CONFIG; Samsa writes the same when it starts on fresh log directories.
FORMATTED_DYNAMIC_DEFAULTS = ("min.insync.replicas",)


def write_formatted_dynamic_defaults(config: KafkaConfig, metadata: MetadataStore) -> None:
    """On freshly formatted log directories, before load_dynamic_broker_configs."""
    defaults = {name: value_to_string(config.get(name)) for name in FORMATTED_DYNAMIC_DEFAULTS}
    metadata.set_broker_configs("", {name: value for name, value in defaults.items() if value is not None})


def load_dynamic_broker_configs(config: KafkaConfig, metadata: MetadataView, logs: LogManager, node_id: int,
                                clear: bool = False) -> None:
    """At startup, before any log opens: the dynamic configs the metadata holds take effect (also
    when none is left, with `clear`)."""
    stored = metadata.broker_configs
    per_broker = usable_dynamic_configs(stored.get(str(node_id), {}), per_broker=True)
    defaults = usable_dynamic_configs(stored.get("", {}), per_broker=False)
    if per_broker or defaults or clear:
        _apply(config, logs, metadata, None, per_broker, defaults)


def _apply(config: KafkaConfig, logs: LogManager, metadata: MetadataView, replicas: ReplicaManager | None,
           per_broker: Mapping[str, str], defaults: Mapping[str, str]) -> None:
    """`replicas`: None before the partitions are loaded."""
    try:
        config.update_dynamic(per_broker, defaults)
    except ConfigError as error:
        # As Kafka's updateBrokerConfig: an image that no longer fits the static configs is
        # reported and the broker keeps what it has.
        log.error("Dynamic broker configs could not be applied: %s", error.message)
        return
    # DynamicLogConfig.reconfigure: new topic defaults for every log, under its topic's overrides.
    logs.default_config = config.log_config()
    if replicas is None:
        return
    for topic in metadata.topics.values():
        log_config = replicas.topic_log_config(topic)
        for index in range(topic.num_partitions):
            partition = replicas.get(topic.name, index)
            if partition is not None:
                partition.update_config(log_config)
