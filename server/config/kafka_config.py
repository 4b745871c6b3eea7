"""The broker's configuration, read and checked the way Kafka's KafkaConfig does it.

server.properties is read with java.util.Properties' syntax, `--override key=value` goes on top,
dynamic broker configs (KIP-226, see dynamic_broker_config.py) on top of those, every value is
parsed and validated against Kafka's config definitions (generated from Kafka's docs), and the
result answers DescribeConfigs for the broker and for topics.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import math
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import TypeAlias

from samsa.server.security.authorizer import AUTHORIZER_CLASS_NAMES, AUTHORIZER_CONFIGS
from samsa.server.replication.replica_selector import replica_selector
from samsa.server.config.broker_config_defs import BROKER_CONFIGS, BrokerConfigDef
from samsa.server.coordinators.consumer_groups import ConsumerGroupConfigError, consumer_group_config
from samsa.server.metrics.configs import METRICS_CONFIGS
from samsa.server.coordinators.share_configs import SHARE_COORDINATOR_INTERNAL_CONFIGS
from samsa.server.features import FEATURE_CONFIGS
from samsa.storage.errors import InvalidConfigurationException
from samsa.storage.log_config import LogConfig
from samsa.storage.topic_config_defs import TOPIC_CONFIGS, TopicConfigDef
from samsa.wire.config_resources import ConfigSource

ConfigValue: TypeAlias = bool | int | float | str | tuple[str, ...] | None
ConfigDef: TypeAlias = BrokerConfigDef | TopicConfigDef


class ConfigError(Exception):
    """An unknown or invalid config; `name` is the key at fault, None when no single key is."""

    def __init__(self, name: str | None, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class ConfigType(IntEnum):
    """DescribeConfigs' ConfigType."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a DescribeConfigs result; `value` is None for passwords and unset configs."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: ConfigType
    documentation: str | None


@dataclass(frozen=True)
class Endpoint:
    """A listener: `host` None means every interface."""

    name: str
    host: str | None
    port: int
    security_protocol: str


# Where Kafka has no usable default for a single local broker.
SAMSA_DEFAULTS: dict[str, str] = {
    # Kafka binds every interface with PLAINTEXT://:9092; a local broker stays on loopback.
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    # Kafka's is /tmp/kafka-logs. log.dirs stays unset and falls back to log.dir, as in Kafka.
    "log.dir": "./data",
    # Kafka has no id by default and refuses to start without one.
    "node.id": "0",
    "broker.id": "0",
    # Kafka 4.4's default less streams groups (KIP-1071), which Samsa does not serve.
    "group.coordinator.rebalance.protocols": "classic,consumer",
}

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_CONFIG_TYPES = {
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "short": ConfigType.SHORT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
    "class": ConfigType.CLASS,
    "password": ConfigType.PASSWORD,
}

_MILLIS_PER_MINUTE = 60_000
_MILLIS_PER_HOUR = 3_600_000


# --- java.util.Properties syntax ---------------------------------------------------------------

_PROPERTIES_WHITESPACE = " \t\f"
_NATURAL_LINE_END = re.compile(r"\r\n|\r|\n")
_CHARACTER_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse .properties text as java.util.Properties.load does; a repeated key keeps its last value."""
    props = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, line)] = _unescape(value, line)
    return props


def _logical_lines(text: str) -> Iterable[str]:
    natural = _NATURAL_LINE_END.split(text)
    index = 0
    while index < len(natural):
        line = natural[index].lstrip(_PROPERTIES_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        # An odd run of trailing backslashes continues the line; the next line's indent is dropped.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if index == len(natural):
                break
            line += natural[index].lstrip(_PROPERTIES_WHITESPACE)
            index += 1
        yield line


def _split_key_value(line: str) -> tuple[str, str]:
    end = 0
    while end < len(line):
        char = line[end]
        if char == "\\":
            end += 2
            continue
        if char in "=:" or char in _PROPERTIES_WHITESPACE:
            break
        end += 1
    key, rest = line[:end], line[end:].lstrip(_PROPERTIES_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_PROPERTIES_WHITESPACE)
    return key, rest


def _unescape(text: str, line: str) -> str:
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            out.append(char)
            continue
        char = text[index]
        index += 1
        if char == "u":
            digits = text[index : index + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError(None, f"Malformed \\uxxxx encoding in line: {line}")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_CHARACTER_ESCAPES.get(char, char))
    # Java strings are UTF-16: \uD83D\uDE00 is one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _parse_override(argument: str) -> tuple[str, str]:
    # Kafka's CommandLineUtils.parseKeyValueArgs: split at the first '=', a missing value is "".
    key, _, value = argument.partition("=")
    return key, value


# --- typed values, as Kafka's ConfigDef parses and prints them ----------------------------------

# Java's String.trim strips every character up to and including the space.
_JAVA_TRIM = "".join(map(chr, range(0x21)))
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_INTEGER_BOUNDS = {"short": 15, "int": 31, "long": 63}
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def _invalid(name: str, value: object, reason: str) -> ConfigError:
    return ConfigError(name, f"Invalid value {value} for configuration {name}: {reason}")


def parse_value(name: str, config_type: str, raw: str) -> ConfigValue:
    """Parse a config's string form as ConfigDef.parseType does."""
    trimmed = raw.strip(_JAVA_TRIM)
    if config_type == "boolean":
        if trimmed.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return trimmed.lower() == "true"
    if config_type in _INTEGER_BOUNDS:
        bits = _INTEGER_BOUNDS[config_type]
        if not _JAVA_INTEGER.fullmatch(trimmed) or not -(2**bits) <= int(trimmed) < 2**bits:
            raise _invalid(name, raw, f"Not a number of type {config_type.upper()}")
        return int(trimmed)
    if config_type == "double":
        if not _JAVA_DOUBLE.fullmatch(trimmed):
            raise _invalid(name, raw, "Not a number of type DOUBLE")
        return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
    if config_type == "list":
        return tuple(_LIST_SEPARATOR.split(trimmed)) if trimmed else ()
    return trimmed


def value_to_string(value: ConfigValue) -> str | None:
    """A parsed value as Kafka's ConfigDef.convertToString prints it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def java_double(value: float) -> str:
    """Java's Double.toString, as Kafka prints a DOUBLE anywhere (configs, quotas in ZooKeeper, the
    tools' JSON): the shortest digits that read back (as Python's repr), plain with at least one
    fractional digit between 10^-3 and 10^7 ('100.0', '0.001'), else 'd.dddE<exponent>' ('1.0E7',
    '1.0E-4'); NaN, Infinity, -Infinity and -0.0 by name. An int is printed as its double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    shortest = repr(float(value))
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return shortest  # Python writes this range without an exponent, as Java does
    sign, digits, exponent = Decimal(shortest).as_tuple()
    significant = "".join(map(str, digits)).rstrip("0")
    power = int(exponent) + len(digits) - 1
    if len(significant) == 1:
        # Where one digit reads back, Java takes the closest two-digit decimal that does: the same
        # digit but for the least precise subnormals (Double.MIN_VALUE is 4.9E-324, not 5.0E-324).
        mantissa, _, power_text = f"{abs(value):.1e}".partition("e")
        if float(f"{mantissa}e{power_text}") == abs(value):
            significant, power = mantissa.replace(".", "").rstrip("0"), int(power_text)
    return f"{'-' if sign else ''}{significant[0]}.{significant[1:] or '0'}E{power}"


# --- validators, built from the "Valid Values" column of Kafka's docs ---------------------------

Validator = Callable[[str, ConfigValue], None]

_AT_LEAST = re.compile(r"\[(-?[0-9.]+),\.\.\.\]")
_BETWEEN = re.compile(r"\[(-?[0-9.]+),\.\.\.,(-?[0-9.]+)\]")
_BETWEEN_OR = re.compile(r"\[(-?[0-9]+),\.\.\.,(-?[0-9]+)\] or (-?[0-9]+)")
_ONE_OF = re.compile(r"\[([^\]]*)\]")
_THROTTLED_REPLICAS = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
# Their valid values list MetadataVersions, which Kafka also accepts in short forms such as "3.9".
_METADATA_VERSION_CONFIGS = frozenset(
    {"inter.broker.protocol.version", "log.message.format.version", "message.format.version"}
)


def _range(low: str | None, high: str | None) -> Validator:
    def check(name: str, value: ConfigValue) -> None:
        assert isinstance(value, (int, float))
        if low is not None and value < float(low):
            raise _invalid(name, value_to_string(value), f"Value must be at least {low}")
        if high is not None and value > float(high):
            raise _invalid(name, value_to_string(value), f"Value must be no more than {high}")

    return check


def _range_or(low: str, high: str, other: str) -> Validator:
    def check(name: str, value: ConfigValue) -> None:
        assert isinstance(value, int)
        if value != int(other) and not int(low) <= value <= int(high):
            raise _invalid(name, value, f"Value must be between {low} and {high} or {other}")

    return check


def _one_of(options: tuple[str, ...]) -> Validator:
    def check(name: str, value: ConfigValue) -> None:
        for item in value if isinstance(value, tuple) else (value,):
            if item not in options:
                raise _invalid(name, item, "String must be one of: " + ", ".join(options))

    return check


def _metadata_version(versions: tuple[str, ...]) -> Validator:
    releases = {version.split("-IV")[0] for version in versions}

    def check(name: str, value: ConfigValue) -> None:
        assert isinstance(value, str)
        # MetadataVersion.fromVersionString keeps three segments of 0.x versions and two of others.
        segments = value.split(".")
        key = ".".join(segments[: 3 if value.startswith("0.") else 2])
        if key not in versions and key not in releases:
            raise _invalid(name, value, f"Version {value} is not a valid version")

    return check


def _non_empty_string(name: str, value: ConfigValue) -> None:
    if value == "":
        raise _invalid(name, value, "String must be non-empty")


def _throttled_replicas(name: str, value: ConfigValue) -> None:
    assert isinstance(value, tuple)
    if "".join(value) != "*" and not all(_THROTTLED_REPLICA.fullmatch(item.strip()) for item in value):
        raise _invalid(
            name,
            "[" + ", ".join(value) + "]",
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            + _THROTTLED_REPLICAS,
        )


# Where Samsa checks less than Kafka 4: segments smaller than Kafka 4.0's 1 MiB minimum (Kafka's own
# tests get those through internal.segment.bytes), as Kafka 3.x took, so tests can roll small segments.
_SAMSA_VALID_VALUES = {"segment.bytes": "[14,...]", "log.segment.bytes": "[14,...]"}


def valid_values(definition: ConfigDef) -> str:
    """The valid values Samsa checks a config against: Kafka's, except where Samsa takes more."""
    return _SAMSA_VALID_VALUES.get(definition.name, definition.valid_values)


@functools.cache
def _validator(definition: ConfigDef) -> Validator | None:
    text = valid_values(definition)
    if definition.name in _METADATA_VERSION_CONFIGS:
        return _metadata_version(tuple(_LIST_SEPARATOR.split(text.strip("[]"))))
    if text == "non-empty string":
        return _non_empty_string
    if text == _THROTTLED_REPLICAS:
        return _throttled_replicas
    if match := _BETWEEN_OR.fullmatch(text):
        return _range_or(*match.groups())
    if match := _AT_LEAST.fullmatch(text):
        return _range(match[1], None)
    if match := _BETWEEN.fullmatch(text):
        return _range(match[1], match[2])
    if match := _ONE_OF.fullmatch(text):
        return _one_of(tuple(_LIST_SEPARATOR.split(match[1])))
    # Anything else ("non-empty list", "non-null string", prose) states no check a properties
    # file can fail that Kafka enforces at parse time.
    return None


def parse_config(name: str, definition: ConfigDef, raw: str) -> ConfigValue:
    """Parse a config's string form and check it against its definition (ConfigDef.parse)."""
    value = parse_value(name, definition.type, raw)
    validator = _validator(definition)
    if validator is not None:
        validator(name, value)
    return value


# --- broker config names and their synonyms -----------------------------------------------------

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")


def broker_synonyms(name: str) -> list[str]:
    """The names whose values stand in for `name`, in Kafka's order of precedence
    (DynamicBrokerConfig.brokerConfigSynonyms)."""
    if name in ("log.roll.ms", "log.roll.hours"):
        return ["log.roll.ms", "log.roll.hours"]
    if name in ("log.roll.jitter.ms", "log.roll.jitter.hours"):
        return ["log.roll.jitter.ms", "log.roll.jitter.hours"]
    if name == "log.flush.interval.ms":
        return [name, "log.flush.scheduler.interval.ms"]
    if name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        return ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    if match := _LISTENER_CONFIG.fullmatch(name):
        # listener.name.<listener>.<config>, or .<mechanism>.<config> for SASL configs.
        base = match[1]
        return [name, base, base[base.find(".") + 1 :]]
    return [name]


def listener_config_base(name: str) -> str | None:
    """The config a `listener.name.<listener>.<config>` override stands for; None for other names."""
    match = _LISTENER_CONFIG.fullmatch(name)
    return match[1] if match else None


# Broker configs KafkaConfig does not list: the authorizer's own, Samsa's, and Kafka's internal ones.
_SAMSA_CONFIGS = AUTHORIZER_CONFIGS | METRICS_CONFIGS | FEATURE_CONFIGS | SHARE_COORDINATOR_INTERNAL_CONFIGS


def broker_definition(name: str) -> BrokerConfigDef | None:
    """A broker config's definition; None for names Kafka does not define."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name]
    if name in _SAMSA_CONFIGS:
        return _SAMSA_CONFIGS[name]
    # A listener override takes the type and checks of the config it overrides.
    for synonym in broker_synonyms(name):
        if synonym in BROKER_CONFIGS:
            return BROKER_CONFIGS[synonym]
    return None


# --- listeners ----------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def _csv(text: str) -> list[str]:
    return [item for item in _LIST_SEPARATOR.split(text.strip()) if item]


def _security_protocol(name: str, config: str) -> str:
    if name.upper() not in SECURITY_PROTOCOLS:
        raise ConfigError(config, f"Invalid security protocol `{name}` defined in {config}")
    return name.upper()


def _parse_protocol_map(text: str) -> dict[str, str]:
    protocols = {}
    for entry in _csv(text):
        listener, separator, protocol = entry.rpartition(":")
        if not separator or not listener.strip():
            raise ConfigError(
                "listener.security.protocol.map",
                f"Error parsing configuration property 'listener.security.protocol.map': "
                f"Map entry should be of form <key>:<value>, found '{entry}'",
            )
        protocols[listener.strip().upper()] = _security_protocol(
            protocol.strip(), "listener.security.protocol.map"
        )
    return protocols


_HOST_PORT = re.compile(r"\[?([0-9a-zA-Z\-%._:]*?)\]?:([0-9]+)")


def _parse_host_port(config: str, item: str) -> tuple[str, int]:
    """host:port (an IPv6 host in brackets), as Kafka's Utils.getHost and getPort read it."""
    match = _HOST_PORT.fullmatch(item.strip())
    if match is None or not match[1]:
        raise ConfigError(config, f"Invalid value {item} for configuration {config}: expected host:port")
    return match[1], int(match[2])


def _parse_quorum_voters(text: str) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters: `id@host:port,...` (Kafka's QuorumConfig.parseVoterConnections)."""
    voters = {}
    for item in _csv(text):
        node, separator, address = item.partition("@")
        if not separator or not node.strip().lstrip("-").isdigit():
            raise ConfigError("controller.quorum.voters", f"Invalid value {text} for configuration "
                                                          f"controller.quorum.voters: Unable to parse {item}")
        voters[int(node)] = _parse_host_port("controller.quorum.voters", address)
    return voters


def _ip_version(host: str | None) -> int | None:
    try:
        return ipaddress.ip_address(host or "").version
    except ValueError:
        return None


def _parse_endpoints(
    config: str, text: str, protocols: Mapping[str, str], distinct_ports: bool
) -> tuple[Endpoint, ...]:
    def fail(reason: str) -> ConfigError:
        return ConfigError(config, f"Error creating broker listeners from '{text}': {reason}")

    endpoints = []
    for item in _csv(text):
        match = _ENDPOINT.fullmatch(item)
        if not match:
            raise fail(f"Unable to parse {item} to a broker endpoint")
        listener, host, port = match[1].upper(), match[2] or None, int(match[3])
        if listener not in protocols:
            raise fail(f"No security protocol defined for listener {listener}")
        if not 0 <= port <= 65535:
            raise fail(f"Port {port} of {item} is out of range")
        endpoints.append(Endpoint(listener, host, port, protocols[listener]))
    if len({endpoint.name for endpoint in endpoints}) != len(endpoints):
        raise ConfigError(config, f"Each listener must have a different name, {config}: {text}")
    if distinct_ports:
        for port in {endpoint.port for endpoint in endpoints if endpoint.port != 0}:
            sharing = [endpoint.host for endpoint in endpoints if endpoint.port == port]
            # Kafka lets one IPv4 and one IPv6 listener share a port.
            if len(sharing) > 1 and sorted(map(_ip_version, sharing), key=str) != [4, 6]:
                raise ConfigError(
                    config,
                    "Each listener must have a different port unless exactly one listener has an IPv4 "
                    f"address and the other IPv6 address, {config}: {text}, port: {port}",
                )
    return tuple(endpoints)


# --- the broker's configuration -----------------------------------------------------------------


def _broker_defaults() -> dict[str, ConfigValue]:
    defaults = {name: definition.default for name, definition in (BROKER_CONFIGS | _SAMSA_CONFIGS).items()}
    for name, raw in SAMSA_DEFAULTS.items():
        defaults[name] = parse_value(name, BROKER_CONFIGS[name].type, raw)
    return defaults


_BROKER_DEFAULTS = _broker_defaults()
# The broker configs Kafka 4 dropped (ZooKeeper mode's and others), kept from Kafka 3.9's table.
_ZOOKEEPER_ERA_CONFIGS = frozenset(
    name for name, definition in BROKER_CONFIGS.items() if (definition.kafka_version or "").startswith("3.")
)
# Kafka's broker quota configs (QuotaConfig.brokerQuotaConfigs, DynamicConfig.Broker): set like any
# dynamic broker config, but not defined by Kafka's KafkaConfig, so DescribeConfigs lists one only
# where it is set (among the config's originals), and without a DEFAULT_CONFIG synonym.
_BROKER_QUOTA_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                   "replica.alter.log.dirs.io.max.bytes.per.second"})
# Kafka's staticDefaultConfigs: defaults as strings, null defaults left out.
_DEFAULT_STRINGS = {
    name: text for name, value in _BROKER_DEFAULTS.items()
    if (text := value_to_string(value)) is not None and name not in _BROKER_QUOTA_CONFIGS
}


class KafkaConfig:
    """A broker's configuration: server.properties and overrides on Kafka's defaults, with the
    dynamic broker configs of KIP-226 (cluster-wide defaults, then this broker's own) on top."""

    def __init__(self, props: Mapping[str, str]) -> None:
        static = dict(props)
        # KafkaConfig.populateSynonyms: either id alone stands for both.
        if "broker.id" in static and "node.id" not in static:
            static["node.id"] = static["broker.id"]
        elif "node.id" in static and "broker.id" not in static:
            static["broker.id"] = static["node.id"]
        self._static = static
        self._dynamic_broker: dict[str, str] = {}
        self._dynamic_default: dict[str, str] = {}
        self._configure(static)

    def with_dynamic(self, per_broker: Mapping[str, str], defaults: Mapping[str, str]) -> KafkaConfig:
        """This configuration with `per_broker` and `defaults` as its dynamic configs (replacing
        the ones it had); ConfigError when the combination is invalid."""
        updated = copy.copy(self)
        updated._dynamic_broker, updated._dynamic_default = dict(per_broker), dict(defaults)
        # Kafka's overrideProps also drops the static synonyms of each dynamic config. Only the
        # first of a synonym group can be set dynamically, so that never changes which value wins,
        # but it would lose a static log.flush.scheduler.interval.ms to a dynamic
        # log.flush.interval.ms, and the flush scheduler would stop: Samsa keeps them.
        updated._configure({**self._static, **defaults, **per_broker})
        return updated

    def update_dynamic(self, per_broker: Mapping[str, str], defaults: Mapping[str, str]) -> None:
        """Take new dynamic configs in place, as Kafka's KafkaConfig.updateCurrentConfig: whoever
        holds this object reads the new values from now on. Nothing changes on ConfigError."""
        self.__dict__.update(self.with_dynamic(per_broker, defaults).__dict__)

    def dynamic_configs(self, per_broker: bool) -> dict[str, str]:
        """The dynamic configs in force: this broker's own, or the cluster-wide defaults."""
        return dict(self._dynamic_broker if per_broker else self._dynamic_default)

    def _configure(self, props: Mapping[str, str]) -> None:
        self._props = props
        self._values = dict(_BROKER_DEFAULTS)
        for name, raw in props.items():
            definition = broker_definition(name)
            if definition is None:
                if name in self._static:
                    raise ConfigError(name, f"Unknown broker config name: {name}")
                # A custom config set dynamically: Kafka keeps those among the originals.
                continue
            self._values[name] = parse_config(name, definition, raw)

        self.broker_id: int = self.get_int("broker.id")
        self.node_id: int = self.get_int("node.id")
        if self.node_id != self.broker_id:
            raise ConfigError("node.id", "You must set `node.id` to the same value as `broker.id`.")

        log_dirs = self._list_text("log.dirs")
        self.log_dirs: tuple[str, ...] = tuple(_csv((self._list_text("log.dir") if log_dirs is None else log_dirs) or ""))
        if not self.log_dirs:
            raise ConfigError("log.dirs", "At least one log directory must be defined via log.dirs or log.dir.")

        self.log_retention_ms: int = self._retention_ms()
        self.log_roll_ms: int = self._millis("log.roll.ms", "log.roll.hours")
        self.log_roll_jitter_ms: int = self._millis("log.roll.jitter.ms", "log.roll.jitter.hours")
        flush_ms = self.get("log.flush.interval.ms")
        self.log_flush_interval_ms: int = self.get_int(
            "log.flush.interval.ms" if flush_ms is not None else "log.flush.scheduler.interval.ms"
        )

        self.controller_listener_names: tuple[str, ...] = tuple(_csv(self._list_text("controller.listener.names") or ""))
        self.listener_security_protocol_map: dict[str, str] = self._protocol_map()
        self.listeners: tuple[Endpoint, ...] = _parse_endpoints(
            "listeners", self._list_text("listeners") or "", self.listener_security_protocol_map, distinct_ports=True
        )
        self.advertised_listeners: tuple[Endpoint, ...] = self._advertised_listeners()
        self.inter_broker_listener_name: str = self._inter_broker_listener_name()
        # KRaft: process.roles=broker alone makes this broker a member of a KRaft cluster under
        # Kafka's controllers (server/kraft/); broker,controller keeps Samsa a single broker that is
        # its own controller, as a combined Kafka node is; Samsa runs no controller role alone.
        self.process_roles: tuple[str, ...] = tuple(_csv(self._list_text("process.roles") or ""))
        self.quorum_voters: dict[int, tuple[str, int]] = _parse_quorum_voters(self._list_text("controller.quorum.voters") or "")
        self.quorum_bootstrap_servers: tuple[tuple[str, int], ...] = tuple(
            _parse_host_port("controller.quorum.bootstrap.servers", item)
            for item in _csv(self._list_text("controller.quorum.bootstrap.servers") or ""))
        self._validate_process_roles()
        self.authorizer_enabled: bool = self._authorizer_enabled()
        self.super_users: frozenset[str] = self._super_users()
        try:  # Kafka's ReplicaManager loads the class at startup
            self.replica_selector = replica_selector(self.get_string("replica.selector.class"))
        except ValueError as e:
            raise ConfigError("replica.selector.class", str(e)) from None
        self._log_config = self._topic_defaults()
        try:
            consumer_group_config(self.get)
        except ConsumerGroupConfigError as e:
            raise ConfigError(e.name, str(e)) from None

    @classmethod
    def load(cls, path: str | None, overrides: list[str]) -> KafkaConfig:
        """Read server.properties at `path` (none: Kafka's and Samsa's defaults) and apply
        `--override key=value` arguments on top."""
        props: dict[str, str] = {}
        if path is not None:
            try:
                # Kafka loads server.properties from a byte stream, which Properties reads as ISO-8859-1.
                with open(path, encoding="latin-1") as file:
                    text = file.read()
            except OSError as error:
                raise ConfigError(None, f"Cannot read {path}: {error.strerror}") from error
            props.update(parse_properties(text))
        props.update(_parse_override(argument) for argument in overrides)
        return cls(props)

    def get(self, name: str) -> ConfigValue:
        """The typed value of a broker config (its default when unset); KeyError for unknown names."""
        return self._values[name]

    def is_set(self, name: str) -> bool:
        """Whether server.properties or an override sets `name` (broker.id and node.id stand for
        each other); False where the value is a default, Kafka's or Samsa's."""
        return name in self._static

    # Typed reads, as Kafka's AbstractConfig.getInt/getLong, getBoolean and getString: a
    # config's definition fixes its type, which a type checker cannot see through `get`. Asking for
    # another type than the definition's (or for an int a config leaves null) is a TypeError.
    def get_int(self, name: str) -> int:
        """An int, short or long config's value."""
        value = self._values[name]
        if type(value) is not int:
            raise TypeError(f"{name} is {value!r}, not an integer")
        return value

    def get_boolean(self, name: str) -> bool:
        value = self._values[name]
        if type(value) is not bool:
            raise TypeError(f"{name} is {value!r}, not a boolean")
        return value

    def get_string(self, name: str) -> str | None:
        """A string, class or password config's value (None where it is null)."""
        value = self._values[name]
        if value is not None and type(value) is not str:
            raise TypeError(f"{name} is {value!r}, not a string")
        return value

    def _list_text(self, name: str) -> str | None:
        """A list config as its comma-separated text (Kafka 4 made listeners and log.dirs lists;
        Samsa parses their items itself)."""
        value = self._values[name]
        assert value is None or isinstance(value, tuple)
        return None if value is None else ",".join(value)

    def _millis(self, millis_name: str, hours_name: str) -> int:
        millis = self._values[millis_name]
        return self.get_int(millis_name) if millis is not None else self.get_int(hours_name) * _MILLIS_PER_HOUR

    def _retention_ms(self) -> int:
        # log.retention.ms wins over .minutes over .hours; any negative value means unlimited.
        if self._values["log.retention.ms"] is not None:
            millis = self.get_int("log.retention.ms")
        elif self._values["log.retention.minutes"] is not None:
            millis = self.get_int("log.retention.minutes") * _MILLIS_PER_MINUTE
        else:
            millis = self.get_int("log.retention.hours") * _MILLIS_PER_HOUR
        return -1 if millis < 0 else millis

    def _protocol_map(self) -> dict[str, str]:
        protocols = _parse_protocol_map(self.get_string("listener.security.protocol.map") or "")
        # KafkaConfig.effectiveListenerSecurityProtocolMap: under KRaft with the default map,
        # controller listeners are PLAINTEXT unless some listener uses SSL or SASL.
        if self.get("process.roles") and "listener.security.protocol.map" not in self._props:
            listener_names = [item.split("://")[0].upper() for item in _csv(self._list_text("listeners") or "")]
            secure = {"SSL", "SASL_PLAINTEXT", "SASL_SSL"}
            if not secure.intersection(self.controller_listener_names) and not secure.intersection(listener_names):
                protocols |= {name: "PLAINTEXT" for name in self.controller_listener_names}
        return protocols

    def _advertised_listeners(self) -> tuple[Endpoint, ...]:
        advertised = self._list_text("advertised.listeners")
        if advertised is not None:
            endpoints = _parse_endpoints(
                "advertised.listeners", advertised, self.listener_security_protocol_map, distinct_ports=False
            )
        else:
            endpoints = tuple(
                endpoint for endpoint in self.listeners if endpoint.name not in self.controller_listener_names
            )
        if any(endpoint.host == "0.0.0.0" for endpoint in endpoints):
            raise ConfigError(
                "advertised.listeners",
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
            )
        # As Kafka registers a listener without a host: under the machine's canonical name.
        return tuple(
            Endpoint(endpoint.name, socket.getfqdn(), endpoint.port, endpoint.security_protocol)
            if endpoint.host is None
            else endpoint
            for endpoint in endpoints
        )

    def _inter_broker_listener_name(self) -> str:
        configured = self.get_string("inter.broker.listener.name")
        if configured is not None:
            if "security.inter.broker.protocol" in self._props:
                raise ConfigError(
                    "inter.broker.listener.name",
                    "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
                )
            name = configured.upper()
            if name not in self.listener_security_protocol_map:
                raise ConfigError(
                    "inter.broker.listener.name",
                    f"Listener with name {name} defined in inter.broker.listener.name not found in "
                    "listener.security.protocol.map.",
                )
        else:
            name = _security_protocol(self.get_string("security.inter.broker.protocol") or "",
                                      "security.inter.broker.protocol")
        advertised = [endpoint.name for endpoint in self.advertised_listeners]
        if name not in advertised:
            raise ConfigError(
                "inter.broker.listener.name",
                "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid "
                f"options based on currently configured listeners are {','.join(advertised)}",
            )
        return name

    @property
    def kraft_broker(self) -> bool:
        """A broker of a KRaft cluster (process.roles=broker): registered with, and fed the metadata
        log by, Apache Kafka's controller quorum."""
        return self.process_roles == ("broker",)

    def _validate_process_roles(self) -> None:
        """Kafka's KafkaConfig.validateValues for the roles Samsa takes, in Kafka's words."""
        roles = self.process_roles
        for role in roles:
            if role not in ("broker", "controller"):
                raise ConfigError("process.roles", f"Unknown process role '{role}' (only 'broker' and 'controller' "
                                                   "are allowed roles)")
        if roles == ("controller",):
            raise ConfigError("process.roles", "process.roles=controller: Samsa runs no KRaft controller; run "
                                               "Apache Kafka's controllers and Samsa with process.roles=broker")
        if not self.kraft_broker:
            return
        if self.is_set("zookeeper.connect"):
            raise ConfigError("zookeeper.connect", "zookeeper.connect is not supported with process.roles: a broker "
                                                   "is either in a ZooKeeper cluster or in a KRaft cluster")
        if not self.quorum_voters and not self.quorum_bootstrap_servers:
            raise ConfigError("controller.quorum.bootstrap.servers",
                              "If using process.roles, either controller.quorum.bootstrap.servers must contain the set "
                              "of bootstrap controllers or controller.quorum.voters must contain a parseable set of "
                              "controllers.")
        if self.node_id in self.quorum_voters:
            raise ConfigError("controller.quorum.voters",
                              f"If process.roles contains just the 'broker' role, the node id {self.node_id} must not "
                              f"be included in the set of voters controller.quorum.voters="
                              f"{{{', '.join(map(str, self.quorum_voters))}}}")
        if not self.controller_listener_names:
            raise ConfigError("controller.listener.names", "controller.listener.names must contain at least one value "
                                                           "when running KRaft with just the broker role")
        if any(endpoint.name in self.controller_listener_names for endpoint in self.listeners):
            raise ConfigError("controller.listener.names",
                              "controller.listener.names must not contain a value appearing in the 'listeners' "
                              "configuration when running KRaft with just the broker role")
        for name in self.controller_listener_names:
            if name not in self.listener_security_protocol_map:
                raise ConfigError("listener.security.protocol.map",
                                  f"Controller listener with name {name} defined in controller.listener.names not "
                                  "found in listener.security.protocol.map  (an explicit security mapping for each "
                                  "controller listener is required if listener.security.protocol.map is non-empty, "
                                  "or if there are security protocols other than PLAINTEXT in use)")

    @property
    def controller_security_protocol(self) -> str:
        """The security protocol of the first controller listener, the one a KRaft broker reaches
        the controllers on (Kafka uses only the first)."""
        return self.listener_security_protocol_map[self.controller_listener_names[0]]

    def _authorizer_enabled(self) -> bool:
        name = self.get_string("authorizer.class.name")
        if name and name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError("authorizer.class.name",
                              f"Invalid value {name} for configuration authorizer.class.name: Samsa's authorizer is "
                              f"Kafka's StandardAuthorizer; set {' or '.join(AUTHORIZER_CLASS_NAMES)}, or nothing")
        return bool(name)

    def _super_users(self) -> frozenset[str]:
        # StandardAuthorizer.getConfiguredSuperUsers: principals separated by ';', each Type:name.
        items = (item.strip() for item in (self.get_string("super.users") or "").split(";"))
        users = frozenset(user for user in items if user)
        for user in users:
            if ":" not in user:
                raise ConfigError("super.users", "Invalid value for configuration super.users: expected a string in "
                                                 f"format principalType:principalName but got {user}")
        return users

    # --- topic-level defaults and validation ---

    def _effective(self, broker_name: str) -> ConfigValue:
        derived: dict[str, ConfigValue] = {
            "log.retention.ms": self.log_retention_ms,
            "log.roll.ms": self.log_roll_ms,
            "log.roll.jitter.ms": self.log_roll_jitter_ms,
            "log.flush.interval.ms": self.log_flush_interval_ms,
        }
        return derived[broker_name] if broker_name in derived else self._values[broker_name]

    def log_config_props(self) -> dict[str, str]:
        """Topic-level defaults from the broker's configs (KafkaConfig.extractLogConfigMap), as the
        strings a topic override would hold; topic configs without a broker default are left out."""
        props = {}
        for definition in TOPIC_CONFIGS.values():
            broker_name = definition.server_default_property
            if broker_name is not None:
                text = value_to_string(self._effective(broker_name))
                assert text is not None
                props[definition.name] = text
        return props

    def log_config(self) -> LogConfig:
        """The topic-level defaults this broker gives topics without overrides."""
        return self._log_config

    def _topic_defaults(self) -> LogConfig:
        try:
            return LogConfig.from_props(self.log_config_props())
        except InvalidConfigurationException as error:
            # Name the broker config that supplied the bad default.
            raise ConfigError(TOPIC_CONFIGS[error.key].server_default_property, str(error)) from None

    def _topic_values(self, overrides: Mapping[str, str]) -> dict[str, ConfigValue]:
        raw = self.log_config_props() | dict(overrides)
        return {
            name: parse_config(name, definition, raw[name]) if name in raw else definition.default
            for name, definition in TOPIC_CONFIGS.items()
        }

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> None:
        """Check topic config overrides as Kafka does for CreateTopics and AlterConfigs."""
        missing = [name for name, value in configs.items() if value is None]
        if missing:
            raise ConfigError(missing[0], "Null value not supported for topic configs: " + ",".join(missing))
        for name in configs:
            if name not in TOPIC_CONFIGS:
                raise ConfigError(name, f"Unknown topic config name: {name}")
        values = self._topic_values({name: value for name, value in configs.items() if value is not None})
        min_lag, max_lag = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
        assert isinstance(min_lag, int) and isinstance(max_lag, int)
        if min_lag > max_lag:
            raise ConfigError(
                "min.compaction.lag.ms",
                f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})",
            )
        if values["remote.storage.enable"] and not self.get("remote.log.storage.system.enable"):
            raise ConfigError(
                "remote.storage.enable",
                "Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage.",
            )

    # --- DescribeConfigs ---

    def _synonyms(self, name: str, sensitive: bool) -> list[ConfigSynonym]:
        # ConfigHelper.configSynonyms: every layer in order of precedence, each in synonym order.
        found = [
            ConfigSynonym(synonym, None if sensitive else values[synonym], source)
            for source, values in (
                (ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default),
                (ConfigSource.STATIC_BROKER_CONFIG, self._static),
                (ConfigSource.DEFAULT_CONFIG, _DEFAULT_STRINGS),
            )
            for synonym in broker_synonyms(name)
            if synonym in values
        ]
        # Kafka drops what precedes the config itself, e.g. log.retention.ms when describing
        # log.retention.hours, or listener overrides when describing the base config.
        while found and found[0].name != name:
            found.pop(0)
        return found

    def describe(self, names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """This broker's BROKER resource (named by its id): every config, or those of `names` that
        exist, sorted by name."""
        # Kafka 4 no longer has the ZooKeeper-era configs: listed only when set, as custom configs are.
        known = (BROKER_CONFIGS.keys() - _ZOOKEEPER_ERA_CONFIGS - _BROKER_QUOTA_CONFIGS) | self._props.keys()
        wanted = known if names is None else known & set(names)
        # Listener overrides and custom configs are reported as written, defined configs as parsed.
        return [
            self._describe_broker_config(
                name, self._props[name] if name not in BROKER_CONFIGS else value_to_string(self._values[name]), True)
            for name in sorted(wanted)
        ]

    def describe_dynamic_defaults(self, names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """The cluster-wide BROKER resource (the empty name): only the dynamic defaults set."""
        wanted = self._dynamic_default.keys() if names is None else self._dynamic_default.keys() & set(names)
        return [self._describe_broker_config(name, self._dynamic_default[name], False) for name in sorted(wanted)]

    def _describe_broker_config(self, name: str, value: str | None, per_broker: bool) -> ConfigEntry:
        definition = broker_definition(name)
        # Kafka cannot tell a custom config's type, so it treats it as sensitive to be safe.
        sensitive = definition is None or definition.type == "password"
        synonyms = self._synonyms(name, sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        return ConfigEntry(
            name=name,
            value=None if sensitive else value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=definition is None or name not in BROKER_CONFIGS or definition.update_mode == "read-only",
            is_sensitive=sensitive,
            synonyms=tuple(synonyms),
            config_type=ConfigType.UNKNOWN if definition is None else _CONFIG_TYPES[definition.type],
            documentation=None if definition is None else definition.doc,
        )

    def describe_topic_configs(self, overrides: Mapping[str, str], names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """A TOPIC resource's configs given its overrides, sorted by name."""
        self.validate_topic_configs(overrides)
        values = self._topic_values(overrides)
        wanted = TOPIC_CONFIGS.keys() if names is None else TOPIC_CONFIGS.keys() & set(names)
        entries = []
        for name in sorted(wanted):
            definition = TOPIC_CONFIGS[name]
            value = value_to_string(values[name])
            synonyms = [ConfigSynonym(name, value, ConfigSource.TOPIC_CONFIG)] if name in overrides else []
            if definition.server_default_property is not None:
                synonyms += self._synonyms(definition.server_default_property, sensitive=False)
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                    read_only=False,
                    is_sensitive=False,
                    synonyms=tuple(synonyms),
                    config_type=_CONFIG_TYPES[definition.type],
                    documentation=definition.doc,
                )
            )
        return entries
