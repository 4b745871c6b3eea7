"""Kafka's data in ZooKeeper: the znode paths and their JSON, as Kafka 3.9 (ZooKeeper mode) writes them.

The layout of Kafka's core/src/main/scala/kafka/zk/ZkData.scala, byte for byte. Kafka encodes with
Jackson, which writes a map's entries in the map's own iteration order: Scala's immutable maps keep
insertion order up to four entries and hash above that, Scala's mutable.HashMap and Java's HashMap
and Properties (a ConcurrentHashMap) iterate by hash bucket. The `_order_*` helpers reproduce each
so that a znode Samsa writes is the znode Kafka would have written, and a Kafka broker reading it
(or a person diffing two brokers' registrations) sees no difference.

Pure: no I/O. The ZooKeeper client is server/zookeeper/zk_client.py.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# -- paths -----------------------------------------------------------------------------------------

BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CLUSTER_ID = "/cluster/id"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONSUMERS = "/consumers"  # the old consumer's offsets: created at startup, nothing more
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
# Samsa's own (Kafka 3.9's ZooKeeper layout has no group configs): the change notifications of
# /config/groups/<id>, config_change_<seq> as in /config/changes. Not in /config/changes because a
# Kafka 3.9 broker of a mixed cluster fails every notification of an entity type it has no handler
# for (ZkConfigManager's IllegalArgumentException, logged as an ERROR with its stack trace by
# ZkNodeChangeNotificationListener, then skipped); nothing of Kafka's reads this path.
GROUP_CONFIG_CHANGES = "/samsa/group_config_changes"
GROUP_CONFIGS = "groups"

# Delegation tokens (ZkData's DelegationTokenAuthZNode and its children): a token's znode by id, and
# the token_change_<seq> notifications (the token id) every broker's token manager watches.
DELEGATION_TOKENS = "/delegation_token/tokens"
DELEGATION_TOKEN_CHANGES = "/delegation_token/token_changes"
DELEGATION_TOKEN_CHANGE_PREFIX = "token_change_"

# Kafka 3.9's ConfigType.ALL, the entity types under /config (client-metrics and groups are KRaft's only).
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")

# ZkData.PersistentZkPaths: what every broker makes sure exists at startup (createTopLevelPaths).
PERSISTENT_ZK_PATHS = (
    CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """entity_name as stored: Kafka sanitizes user and client ids (Sanitizer: URL-encoding) first."""
    return f"{CONFIG}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def acl_store_path(pattern_type: str) -> str:
    """LITERAL under /kafka-acl; PREFIXED (any other specific pattern) under /kafka-acl-extended/prefixed."""
    if pattern_type.upper() == "LITERAL":
        return LITERAL_ACLS
    return f"{EXTENDED_ACLS}/{pattern_type.lower()}"


def acl_resource_path(pattern_type: str, resource_type: str, resource_name: str) -> str:
    """resource_type as Kafka names it in the path (SecurityUtils.resourceTypeName): Topic, Group,
    Cluster, TransactionalId, DelegationToken, User."""
    return f"{acl_store_path(pattern_type)}/{resource_type}/{resource_name}"


def acl_change_store_path(pattern_type: str) -> str:
    return LITERAL_ACL_CHANGES if pattern_type.upper() == "LITERAL" else EXTENDED_ACL_CHANGES


def sequence_number(path: str, prefix: str) -> str:
    """The sequence of a sequential znode's name: 'isr_change_0000000003' -> '0000000003'."""
    return path[path.rfind(prefix) + len(prefix):]


# -- Kafka's map orders ----------------------------------------------------------------------------

def _java_hash(s: str) -> int:
    """String.hashCode over UTF-16 code units, as an unsigned 32-bit value."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    """Java's HashMap.hash and Scala 2.13 mutable.HashMap's improveHash: h ^ (h >>> 16)."""
    return h ^ (h >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _table_size(capacity: int) -> int:
    """Scala 2.13 mutable.HashMap.tableSizeFor."""
    return min(1 << ((max(capacity - 1, 4)).bit_length()), 1 << 30)


def _order_scala_mutable(items: Iterable[tuple[str, object]], known_size: int = 0) -> dict[str, object]:
    """scala.collection.mutable.HashMap: buckets by (hash & (size - 1)), within a bucket by signed
    hash. `mutable.Map(a, b, ...)` starts from the number of its arguments (known_size), an empty
    one from 16; the table doubles when an insertion reaches three quarters of it."""
    pairs = list(items)
    size = _table_size(int((known_size + 1) / 0.75)) if known_size > 0 else 16
    for count in range(len(pairs)):
        if count + 1 >= int(size * 0.75):
            size *= 2
    return dict(sorted(pairs, key=lambda kv: (_spread(_java_hash(kv[0])) & (size - 1),
                                              _signed(_spread(_java_hash(kv[0]))))))


def _order_java_hash(items: Iterable[tuple[str, object]], concurrent: bool = False) -> dict[str, object]:
    """java.util.HashMap, or with `concurrent` the ConcurrentHashMap inside Properties: by
    (spread hash & (size - 1)), insertion order within a bucket; 16 buckets, doubling past three
    quarters (a ConcurrentHashMap already at three quarters)."""
    pairs = list(items)
    size = 16
    while len(pairs) > size * 3 // 4 - (1 if concurrent else 0):
        size *= 2
    return dict(sorted(pairs, key=lambda kv: _spread(_java_hash(kv[0])) & (size - 1)))  # sorted is stable


def _scala_improve(h: int) -> int:
    """scala.collection.Hashing.improve, the hash of Scala 2.13's immutable.HashMap (CHAMP)."""
    m = 0xFFFFFFFF
    h = (h + (~(h << 9) & m)) & m
    h ^= h >> 14
    h = (h + (h << 4)) & m
    return h ^ (h >> 10)


def _champ(keys: list[str], hashes: dict[str, int], shift: int) -> list[str]:
    groups: dict[int, list[str]] = {}
    for k in keys:
        groups.setdefault((hashes[k] >> shift) & 31, []).append(k)
    payload = [g[0] for _, g in sorted(groups.items()) if len(g) == 1]
    nodes = [k for _, g in sorted(groups.items()) if len(g) > 1 for k in _champ(g, hashes, shift + 5)]
    return payload + nodes


def _order_scala_immutable(items: Iterable[tuple[str, object]]) -> dict[str, object]:
    """scala.collection.immutable.Map: Map1..Map4 keep insertion order; from five entries a CHAMP
    trie, iterated by 5-bit slices of the improved hash (a node's own entries before its children)."""
    pairs = dict(items)
    if len(pairs) <= 4:
        return pairs
    hashes = {k: _scala_improve(_java_hash(k)) for k in pairs}
    return {k: pairs[k] for k in _champ(list(pairs), hashes, 0)}


def _write_string(s: str) -> str:
    # Jackson: UTF-8 as is, the two JSON specials and control characters escaped, the latter in
    # upper-case hex unless they have a short form.
    out = ['"']
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(_SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _write(value: object) -> str:
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_write_string(k)}:{_write(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_write(v) for v in value) + "]"
    if isinstance(value, str):
        return _write_string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"not a JSON value Kafka writes: {value!r}")


def encode_json(value: object) -> bytes:
    """Jackson's compact form (Kafka's Json.encodeAsBytes) of maps already in Kafka's order."""
    return _write(value).encode()


def decode_json(data: bytes | None) -> object:
    """Kafka's Json.parseBytes; a null or empty znode is None."""
    if not data:
        return None
    return json.loads(data)


class ZkDataError(ValueError):
    """A znode whose data is not what Kafka writes there."""


def _object(data: bytes | None, what: str) -> dict:
    try:
        js = decode_json(data)
    except ValueError as e:
        raise ZkDataError(f"failed to parse {what}: {data!r}") from e
    if not isinstance(js, dict):
        raise ZkDataError(f"failed to parse {what}: {data!r}")
    return js


# -- /cluster/id -----------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return encode_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return str(_object(data, "the cluster id")["id"])


# -- /controller, /controller_epoch ----------------------------------------------------------------

@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp: int = 0
    kraft_controller_epoch: int = -1  # a KRaft controller's epoch during migration; -1 in ZooKeeper mode


def encode_controller(c: ControllerRegistration) -> bytes:
    return encode_json({"version": 2, "brokerid": c.broker_id, "timestamp": str(c.timestamp),
                        "kraftControllerEpoch": c.kraft_controller_epoch})


def decode_controller(data: bytes | None) -> ControllerRegistration:
    js = _object(data, "the controller registration")
    return ControllerRegistration(int(js["brokerid"]), int(js.get("timestamp", 0)),
                                  int(js.get("kraftControllerEpoch", -1)))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- /brokers/ids/<id> -----------------------------------------------------------------------------

@dataclass(frozen=True)
class EndPoint:
    listener_name: str
    host: str | None
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """EndPoint.connectionString: LISTENER://host:port, an IPv6 host in brackets."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A broker's ephemeral znode (BrokerInfo): version 5 from inter.broker.protocol.version 2.7."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    # supported features: name -> (min_version, max_version); empty for a ZooKeeper-mode broker
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    jmx_port: int = -1
    timestamp: int = 0
    version: int = 5

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker(b: BrokerRegistration) -> bytes:
    # BrokerIdZNode.encode: host and port of the first PLAINTEXT endpoint for old clients (null and -1
    # without one), the rest keyed into a mutable.Map of six entries to start with.
    plaintext = next((e for e in b.endpoints if e.security_protocol == "PLAINTEXT"), None)
    entries: list[tuple[str, object]] = [
        ("version", b.version),
        ("host", plaintext.host if plaintext else None),
        ("port", plaintext.port if plaintext else -1),
        ("endpoints", [e.connection_string for e in b.endpoints]),
        ("jmx_port", b.jmx_port),
        ("timestamp", str(b.timestamp)),
    ]
    if b.rack is not None and b.version >= 3:
        entries.append(("rack", b.rack))
    if b.version >= 4:
        entries.append(("listener_security_protocol_map", _order_scala_immutable(
            (e.listener_name, e.security_protocol) for e in b.endpoints)))
    if b.version >= 5:
        entries.append(("features", _order_java_hash(
            (name, {"min_version": lo, "max_version": hi}) for name, (lo, hi) in b.features.items())))
    return encode_json(_order_scala_mutable(entries, known_size=6))


def _parse_endpoint(s: str, protocols: Mapping[str, str]) -> EndPoint:
    listener, _, hostport = s.partition("://")
    host, _, port = hostport.rpartition(":")
    if host.startswith("["):
        host = host[1:-1]
    return EndPoint(listener, host or None, int(port), protocols.get(listener, listener))


def decode_broker(broker_id: int, data: bytes | None) -> BrokerRegistration:
    js = _object(data, f"the registration of broker {broker_id}")
    version = int(js["version"])
    if version < 1:
        raise ZkDataError(f"unsupported version of broker registration: {data!r}")
    if version == 1:
        endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", js["host"], int(js["port"]), "PLAINTEXT"),)
    else:
        protocols = js.get("listener_security_protocol_map") or {
            p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        endpoints = tuple(_parse_endpoint(s, protocols) for s in js["endpoints"])
    features = {name: (int(r["min_version"]), int(r["max_version"]))
                for name, r in (js.get("features") or {}).items()}
    return BrokerRegistration(broker_id, endpoints, js.get("rack"), features, int(js["jmx_port"]),
                              int(js.get("timestamp", 0)), version)


# -- /brokers/topics/<topic> -----------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's znode: its id and each partition's replicas (with a reassignment's adding and removing)."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None  # Kafka's Uuid.toString(): url-safe base64, no padding


def encode_topic(t: TopicAssignment) -> bytes:
    def replicas(select) -> dict[str, object]:
        return _order_scala_mutable((str(p), list(select(a))) for p, a in t.partitions.items() if select(a))
    entries: list[tuple[str, object]] = [
        ("version", 3),
        ("partitions", _order_scala_mutable((str(p), list(a.replicas)) for p, a in t.partitions.items())),
        ("adding_replicas", replicas(lambda a: a.adding_replicas)),
        ("removing_replicas", replicas(lambda a: a.removing_replicas)),
    ]
    if t.topic_id is not None:
        entries.append(("topic_id", t.topic_id))
    return encode_json(_order_scala_mutable(entries, known_size=4))


def decode_topic(data: bytes | None) -> TopicAssignment:
    js = decode_json(data)
    if not isinstance(js, dict):
        return TopicAssignment({})
    adding = js.get("adding_replicas") or {}
    removing = js.get("removing_replicas") or {}
    partitions = {
        int(p): ReplicaAssignment(tuple(r), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
        for p, r in (js.get("partitions") or {}).items()
    }
    return TopicAssignment(dict(sorted(partitions.items())), js.get("topic_id"))


# -- /brokers/topics/<topic>/partitions/<p>/state --------------------------------------------------

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """LeaderIsrAndControllerEpoch; zk_version (the znode's version, Kafka's partitionEpoch) is read
    from the znode's stat, never written into it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    zk_version: int = -1


def encode_partition_state(s: PartitionState) -> bytes:
    entries: list[tuple[str, object]] = [
        ("version", 1), ("leader", s.leader), ("leader_epoch", s.leader_epoch),
        ("controller_epoch", s.controller_epoch), ("isr", list(s.isr)),
    ]
    if s.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        entries.append(("leader_recovery_state", s.leader_recovery_state))
    return encode_json(_order_scala_immutable(entries))


def decode_partition_state(data: bytes | None, zk_version: int = -1) -> PartitionState:
    js = _object(data, "a partition state")
    return PartitionState(int(js["leader"]), int(js["leader_epoch"]), tuple(js["isr"]), int(js["controller_epoch"]),
                          int(js.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)), zk_version)


# -- /config/<type>/<name>, /config/changes --------------------------------------------------------

def encode_config_entity(config: Mapping[str, str]) -> bytes:
    """The entity's overrides, in the order of Kafka's Properties (insertion order counts within a bucket)."""
    return encode_json({"version": 1, "config": _order_java_hash(((k, str(v)) for k, v in config.items()), concurrent=True)})


def decode_config_entity(data: bytes | None) -> dict[str, str]:
    js = decode_json(data)
    if not isinstance(js, dict) or not isinstance(js.get("config"), dict):
        return {}
    return {k: str(v) for k, v in js["config"].items()}


def encode_config_change(entity_path: str) -> bytes:
    """A /config/changes/config_change_<seq> notification; entity_path like 'topics/t' or
    'users/alice/clients/c' (sanitized names)."""
    return encode_json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> str:
    js = _object(data, "a config change notification")
    if js.get("version") == 1:  # entity_type and entity_name, from before 0.10.1
        return f"{js['entity_type']}/{js['entity_name']}"
    return str(js["entity_path"])


# -- /admin -----------------------------------------------------------------------------------------

def _partition_list(partitions: Iterable[tuple[str, int]]) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p} for t, p in partitions]


def _decode_partition_list(js: dict) -> list[tuple[str, int]]:
    return [(str(e["topic"]), int(e["partition"])) for e in js.get("partitions", ())]


def encode_reassign_partitions(reassignment: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    """/admin/reassign_partitions (the pre-2.4 way, still watched by the controller)."""
    return encode_json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})


def decode_reassign_partitions(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
    js = _object(data, "a partition reassignment")
    return {(str(e["topic"]), int(e["partition"])): tuple(e["replicas"]) for e in js.get("partitions", ())}


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return encode_json({"version": 1, "partitions": _partition_list(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> list[tuple[str, int]]:
    return _decode_partition_list(_object(data, "a preferred replica election"))


# -- /isr_change_notification, /log_dir_event_notification -----------------------------------------

def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """An isr_change_<seq> notification. Kafka iterates a Set here, so the partitions' order in
    its own notifications is a hash order; the controller reads them as a set."""
    return encode_json({"version": 1, "partitions": _partition_list(partitions)})


def decode_isr_change(data: bytes | None) -> list[tuple[str, int]]:
    return _decode_partition_list(_object(data, "an ISR change notification"))


LOG_DIR_FAILURE_EVENT = 1


def log_dir_event_path(sequence_number: str) -> str:
    """LogDirEventNotificationSequenceZNode.path: '' makes the prefix a sequential create takes."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence_number}"


def encode_log_dir_event(broker_id: int) -> bytes:
    return encode_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    return int(_object(data, "a log dir event")["broker"])


# -- /latest_producer_id_block ---------------------------------------------------------------------

@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


def encode_producer_id_block(b: ProducerIdBlock) -> bytes:
    return encode_json({"version": 1, "broker": b.broker_id, "block_start": str(b.first_producer_id),
                        "block_end": str(b.last_producer_id)})


def next_producer_id_block(latest: ProducerIdBlock | None, broker_id: int, size: int = 1000) -> ProducerIdBlock:
    """The block after `latest` (None: the znode is empty, the first block starts at 0), as Kafka's
    ZkProducerIdManager.getNewProducerIdBlock; ValueError once the ids are exhausted."""
    if latest is None:
        return ProducerIdBlock(broker_id, 0, size)
    if latest.last_producer_id > 2**63 - 1 - size:
        raise ValueError("Have exhausted all producerIds.")
    return ProducerIdBlock(broker_id, latest.last_producer_id + 1, size)


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock:
    js = _object(data, "the producer id block")
    start, end = int(js["block_start"]), int(js["block_end"])
    return ProducerIdBlock(int(js["broker"]), start, end - start + 1)


# -- /feature --------------------------------------------------------------------------------------

FEATURE_STATUS_DISABLED = 0
FEATURE_STATUS_ENABLED = 1


@dataclass(frozen=True)
class FeatureZNode:
    """The cluster's finalized features: name -> max version level (version 2 drops the minimum)."""

    features: Mapping[str, int] = field(default_factory=dict)
    status: int = FEATURE_STATUS_ENABLED
    version: int = 2


def encode_feature(f: FeatureZNode) -> bytes:
    def levels(v: int) -> dict[str, object]:
        if f.version == 1:
            return {"max_version_level": v, "min_version_level": v}
        return {"max_version_level": v}
    features = _order_scala_immutable((name, levels(v)) for name, v in f.features.items())
    return encode_json(_order_scala_mutable(
        [("version", f.version), ("status", f.status), ("features", features)], known_size=3))


def decode_feature(data: bytes | None) -> FeatureZNode:
    js = _object(data, "the feature znode")
    version = int(js["version"])
    if version not in (1, 2) or js.get("status") not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise ZkDataError(f"unsupported feature information: {data!r}")
    features = {name: int(r["max_version_level"]) for name, r in (js.get("features") or {}).items()}
    return FeatureZNode(features, int(js["status"]), version)


# -- ACLs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AclEntry:
    """One ACL of a resource znode, in Kafka's spelling: principal 'User:alice', permission_type
    'Allow'/'Deny', operation 'Read', 'DescribeConfigs', ...; host '*' for any."""

    principal: str
    permission_type: str
    operation: str
    host: str = "*"


def encode_acls(acls: Iterable[AclEntry]) -> bytes:
    """A resource znode (AclEntry.toJsonCompatibleMap: Java HashMaps)."""
    entries = [_order_java_hash([("principal", a.principal), ("permissionType", a.permission_type),
                                 ("operation", a.operation), ("host", a.host)]) for a in acls]
    return encode_json(_order_java_hash([("version", 1), ("acls", entries)]))


def decode_acls(data: bytes | None) -> list[AclEntry]:
    js = decode_json(data)
    if not isinstance(js, dict):
        return []
    if js.get("version") != 1:
        raise ZkDataError(f"unsupported ACL znode: {data!r}")
    return [AclEntry(a["principal"], a["permissionType"], a["operation"], a["host"]) for a in js["acls"]]


def encode_literal_acl_change(resource_type: str, resource_name: str) -> bytes:
    """/kafka-acl-changes/acl_changes_<seq>: 'TOPIC:name' (the ResourceType enum's name) as UTF-8, no JSON."""
    return f"{resource_type}:{resource_name}".encode()


def decode_literal_acl_change(data: bytes) -> tuple[str, str]:
    resource_type, sep, name = data.decode().partition(":")
    if not sep:
        raise ZkDataError(f"expected ResourceType:ResourceName, got {data!r}")
    return resource_type, name


def encode_extended_acl_change(resource_type: str, resource_name: str, pattern_type: str) -> bytes:
    """/kafka-acl-extended-changes/acl_changes_<seq> (ExtendedAclChangeEvent): resource_type and
    pattern_type by their enum names, 'TOPIC', 'PREFIXED'."""
    return encode_json({"version": 1, "resourceType": resource_type, "name": resource_name,
                        "patternType": pattern_type})


def decode_extended_acl_change(data: bytes | None) -> tuple[str, str, str]:
    js = _object(data, "an ACL change event")
    if int(js.get("version", 0)) > 1:
        raise ZkDataError(f"unsupported ACL change event: {data!r}")
    return str(js["resourceType"]), str(js["name"]), str(js["patternType"])


# -- /delegation_token ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DelegationTokenInfo:
    """A token's znode (DelegationTokenInfoZNode, version 3): principals as 'User:alice', the
    caller sanitizing them (Kafka's Sanitizer) before encoding and after decoding."""

    token_id: str
    owner: str
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int


def delegation_token_path(token_id: str) -> str:
    return f"{DELEGATION_TOKENS}/{token_id}"


def encode_delegation_token(t: DelegationTokenInfo) -> bytes:
    """DelegationTokenManagerZk.toJsonCompatibleMap: an immutable Scala map of eight entries."""
    return encode_json(_order_scala_immutable([
        ("version", 3), ("owner", t.owner), ("tokenRequester", t.token_requester), ("renewers", list(t.renewers)),
        ("issueTimestamp", t.issue_timestamp), ("maxTimestamp", t.max_timestamp),
        ("expiryTimestamp", t.expiry_timestamp), ("tokenId", t.token_id)]))


def decode_delegation_token(data: bytes | None) -> DelegationTokenInfo | None:
    """DelegationTokenManagerZk.fromBytes: None for an empty znode; before version 3 the requester is the owner."""
    if not data:
        return None
    js = _object(data, "a delegation token")
    version = int(js["version"])
    if not 0 < version <= 3:
        raise ZkDataError(f"unsupported delegation token version {version}")
    owner = str(js["owner"])
    return DelegationTokenInfo(str(js["tokenId"]), owner, str(js["tokenRequester"]) if version >= 3 else owner,
                               tuple(str(r) for r in js["renewers"]), int(js["issueTimestamp"]),
                               int(js["maxTimestamp"]), int(js["expiryTimestamp"]))


# A topic id as ZooKeeper's znodes and Kafka's Uuid.toString write it: URL-safe base64, unpadded.
def topic_uuid(topic_id: str | None) -> uuid.UUID:
    if not topic_id:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def topic_id_string(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
