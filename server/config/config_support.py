"""What Samsa does with each config Kafka defines: honoured, accepted and ignored, or refused.

Every broker, topic and group config of Kafka's tables (broker_config_defs.py,
storage/topic_config_defs.py, coordinator/group_config.py) is accepted, parsed and validated as Kafka does it; this says which of them the broker then acts on.
The classification was made config by config from where the code reads each name, and
tests/server/test_config_support.py keeps it that way: a config called honoured must be read
somewhere outside the definitions, and a config name the code reads must be classified here.
tools/gen_config_doc.py prints it in docs/configuration.md.
"""

from __future__ import annotations

from typing import NamedTuple

from samsa.storage.topic_config_defs import TOPIC_CONFIGS

HONOURED = "honoured"
IGNORED = "accepted and ignored"
REFUSED = "refused"


class Support(NamedTuple):
    status: str  # HONOURED, IGNORED or REFUSED
    note: str = ""  # what the status leaves out: values refused, where Samsa differs


# Topic configs the broker acts on; every other topic config is accepted and ignored.
HONOURED_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "",
    "compression.type": "recompresses with the codec's default level",
    "delete.retention.ms": "",
    "file.delete.delay.ms": "",
    "flush.messages": "",
    "flush.ms": "",
    "index.interval.bytes": "",
    "max.compaction.lag.ms": "",
    "max.message.bytes": "",
    "message.timestamp.after.max.ms": "",
    "message.timestamp.before.max.ms": "",
    "message.timestamp.type": "",
    "min.cleanable.dirty.ratio": "",
    "min.compaction.lag.ms": "",
    "min.insync.replicas": "",
    "preallocate": "",
    "retention.bytes": "",
    "retention.ms": "",
    "segment.bytes": "Samsa's minimum is 14 bytes (Kafka 3.x's), not Kafka 4's 1 MiB",
    "segment.index.bytes": "",
    "segment.jitter.ms": "",
    "segment.ms": "",
    "unclean.leader.election.enable": "in a ZooKeeper cluster (the controller reads it)",
}

# Why a topic config is ignored, where a reader would expect otherwise.
IGNORED_TOPIC_CONFIGS: dict[str, str] = {
    "compression.gzip.level": "recompression uses the codec's default level",
    "compression.lz4.level": "recompression uses the codec's default level",
    "compression.zstd.level": "recompression uses the codec's default level",
    "errors.deadletterqueue.group.enable": "share groups' dead-letter queues (share.version 2) are not implemented",
    "follower.replication.throttled.replicas": "replication quotas are not implemented",
    "leader.replication.throttled.replicas": "replication quotas are not implemented",
    "local.retention.bytes": "no tiered storage",
    "local.retention.ms": "no tiered storage",
    "max.decompressed.message.bytes": "the codec's own limit applies",
    "remote.copy.lag.bytes": "no tiered storage",
    "remote.copy.lag.ms": "no tiered storage",
    "remote.log.copy.disable": "no tiered storage",
    "remote.log.delete.on.disable": "no tiered storage",
    "remote.storage.enable": "no tiered storage; refused, as by Kafka, unless remote.log.storage.system.enable",
}

# Streams groups' rack.aware.assignment.tags, broker default and group config alike.
_STREAMS_TAGS_NOTE = ("a change is a new group epoch and members without these client tags get "
                      "MISSING_CLIENT_TAGS; Kafka 4.4's sticky assignor places no task by them, nor does Samsa's")

# Broker configs the broker reads itself (topic-level defaults, log.* and the rest that a topic
# config names as its server_default_property, follow their topic config and are not listed).
HONOURED_BROKER_CONFIGS: dict[str, str] = {
    "group.streams.rack.aware.assignment.tags": _STREAMS_TAGS_NOTE,
    "group.streams.assignment.interval.ms": "",
    "group.streams.heartbeat.interval.ms": "",
    "group.streams.initial.rebalance.delay.ms": "",
    "group.streams.max.assignment.interval.ms": "",
    "group.streams.max.heartbeat.interval.ms": "",
    "group.streams.max.session.timeout.ms": "",
    "group.streams.max.size": "",
    "group.streams.max.standby.replicas": "",
    "group.streams.min.assignment.interval.ms": "",
    "group.streams.min.heartbeat.interval.ms": "",
    "group.streams.min.session.timeout.ms": "",
    "group.streams.num.standby.replicas": "",
    "group.streams.session.timeout.ms": "",
    "telemetry.max.bytes": "the largest PushTelemetry payload (KIP-714), TELEMETRY_TOO_LARGE above it",
    "metrics.port": "Samsa's own: the Prometheus endpoint",
    "metrics.host": "Samsa's own: the Prometheus endpoint's address",
    "advertised.listeners": "",
    "allow.everyone.if.no.acl.found": "",
    "alter.log.dirs.replication.quota.window.num": "",
    "alter.log.dirs.replication.quota.window.size.seconds": "",
    "auto.create.topics.enable": "",
    "auto.leader.rebalance.enable": "in a ZooKeeper cluster",
    "broker.heartbeat.interval.ms": "with process.roles=broker",
    "broker.id": "",
    "broker.id.generation.enable": "in a ZooKeeper cluster",
    "broker.rack": "",
    "connection.failed.authentication.delay.ms": "",
    "connections.max.idle.ms": "",
    "connections.max.reauth.ms": "",
    "delegation.token.expiry.check.interval.ms": "",
    "delegation.token.expiry.time.ms": "",
    "delegation.token.master.key": "Kafka 3.9's alias, read when delegation.token.secret.key is unset",
    "delegation.token.max.lifetime.ms": "",
    "delegation.token.secret.key": "",
    "controlled.shutdown.enable": "in a ZooKeeper or KRaft cluster",
    "controlled.shutdown.max.retries": "in a ZooKeeper cluster",
    "controlled.shutdown.retry.backoff.ms": "in a ZooKeeper cluster",
    "controller.listener.names": "with process.roles=broker: the first is the controllers' listener; otherwise only to "
                                 "leave those listeners out of the advertised ones",
    "controller.quorum.bootstrap.servers": "with process.roles=broker",
    "controller.quorum.fetch.max.bytes": "with process.roles=broker: the metadata log's fetches",
    "controller.quorum.fetch.snapshot.max.bytes": "with process.roles=broker",
    "controller.quorum.request.timeout.ms": "with process.roles=broker",
    "controller.quorum.retry.backoff.ms": "with process.roles=broker",
    "controller.quorum.voters": "with process.roles=broker",
    "controller.quota.window.num": "",
    "controller.quota.window.size.seconds": "",
    "controller.socket.timeout.ms": "in a ZooKeeper cluster",
    "default.replication.factor": "",
    "delete.topic.enable": "",
    "initial.broker.registration.timeout.ms": "with process.roles=broker",
    "fetch.max.bytes": "bounds ShareFetch's max_bytes only (Samsa's Fetch does not apply it)",
    "group.consumer.assignment.interval.ms": "",
    "group.consumer.heartbeat.interval.ms": "",
    "group.consumer.max.assignment.interval.ms": "bounds group.consumer.assignment.interval.ms and the consumer.assignment.interval.ms group config",
    "group.consumer.max.heartbeat.interval.ms": "bounds group.consumer.heartbeat.interval.ms and the consumer.heartbeat.interval.ms group config",
    "group.consumer.max.session.timeout.ms": "bounds group.consumer.session.timeout.ms and the consumer.session.timeout.ms group config",
    "group.consumer.max.size": "",
    "group.consumer.min.assignment.interval.ms": "bounds group.consumer.assignment.interval.ms and the consumer.assignment.interval.ms group config",
    "group.consumer.min.heartbeat.interval.ms": "bounds group.consumer.heartbeat.interval.ms and the consumer.heartbeat.interval.ms group config",
    "group.consumer.min.session.timeout.ms": "bounds group.consumer.session.timeout.ms and the consumer.session.timeout.ms group config",
    "group.consumer.session.timeout.ms": "",
    "group.initial.rebalance.delay.ms": "",
    "group.share.assignment.interval.ms": "",
    "group.share.delivery.count.limit": "the default of share groups' share.delivery.count.limit",
    "group.share.heartbeat.interval.ms": "",
    "group.share.max.assignment.interval.ms": "bounds the share.assignment.interval.ms group config",
    "group.share.max.delivery.count.limit": "bounds the share.delivery.count.limit group config",
    "group.share.max.heartbeat.interval.ms": "bounds the share.heartbeat.interval.ms group config",
    "group.share.max.partition.max.record.locks": "bounds the share.partition.max.record.locks group config",
    "group.share.max.record.lock.duration.ms": "bounds the share.record.lock.duration.ms group config",
    "group.share.max.session.timeout.ms": "bounds the share.session.timeout.ms group config",
    "group.share.max.share.sessions": "",
    "group.share.max.size": "",
    "group.share.min.assignment.interval.ms": "bounds the share.assignment.interval.ms group config",
    "group.share.min.delivery.count.limit": "bounds the share.delivery.count.limit group config",
    "group.share.min.heartbeat.interval.ms": "bounds the share.heartbeat.interval.ms group config",
    "group.share.min.partition.max.record.locks": "bounds the share.partition.max.record.locks group config",
    "group.share.min.record.lock.duration.ms": "bounds the share.record.lock.duration.ms group config",
    "group.share.min.session.timeout.ms": "bounds the share.session.timeout.ms group config",
    "group.share.partition.max.record.locks": "the default of share groups' share.partition.max.record.locks",
    "group.share.record.lock.duration.ms": "the default of share groups' share.record.lock.duration.ms",
    "group.share.session.timeout.ms": "",
    "group.max.session.timeout.ms": "",
    "group.max.size": "",
    "group.min.session.timeout.ms": "",
    "inter.broker.listener.name": "",
    "inter.broker.protocol.version": "in a ZooKeeper cluster: the broker registration's version",
    "leader.imbalance.check.interval.seconds": "in a ZooKeeper cluster",
    "leader.imbalance.per.broker.percentage": "in a ZooKeeper cluster",
    "listener.security.protocol.map": "",
    "listeners": "",
    "log.cleaner.backoff.ms": "",
    "log.cleaner.dedupe.buffer.size": "",
    "log.cleaner.enable": "",
    "log.cleaner.io.buffer.load.factor": "",
    "log.cleaner.io.buffer.size": "",
    "log.cleaner.io.max.bytes.per.second": "",
    "log.cleaner.threads": "a dynamic change takes effect at the next start",
    "log.dir": "",
    "log.dir.failure.timeout.ms": "with process.roles=broker: how long a failed log dir may wait for the controller to hear of it",
    "log.dirs": "",
    "metadata.log.dir": "with process.roles=broker: where its copy of the metadata log is kept",
    "metadata.log.max.record.bytes.between.snapshots": "with process.roles=broker",
    "metadata.log.max.snapshot.interval.ms": "with process.roles=broker",
    "metadata.log.segment.bytes": "with process.roles=broker",
    "metadata.log.segment.ms": "with process.roles=broker",
    "metadata.max.retention.bytes": "with process.roles=broker",
    "metadata.max.retention.ms": "with process.roles=broker",
    "log.flush.offset.checkpoint.interval.ms": "also paces the log start offset and high watermark checkpoints",
    "log.flush.scheduler.interval.ms": "",
    "log.retention.check.interval.ms": "",
    "log.retention.hours": "",
    "log.retention.minutes": "",
    "log.roll.hours": "",
    "log.roll.jitter.hours": "",
    "max.connection.creation.rate": "",
    "max.connections": "",
    "max.connections.per.ip": "",
    "max.connections.per.ip.overrides": "",
    "max.incremental.fetch.session.cache.slots": "",
    "node.id": "",
    "num.partitions": "",
    "num.replica.fetchers": "",
    "offset.metadata.max.bytes": "",
    "offsets.commit.timeout.ms": "",
    "offsets.retention.check.interval.ms": "",
    "offsets.retention.minutes": "",
    "offsets.topic.compression.codec": "",
    "offsets.topic.num.partitions": "",
    "offsets.topic.replication.factor": "",
    "offsets.topic.segment.bytes": "",
    "producer.id.expiration.ms": "",
    "quota.window.num": "",
    "quota.window.size.seconds": "",
    "replica.alter.log.dirs.io.max.bytes.per.second": "",
    "replica.fetch.backoff.ms": "",
    "replica.fetch.max.bytes": "",
    "replica.fetch.min.bytes": "",
    "replica.fetch.response.max.bytes": "",
    "replica.fetch.wait.max.ms": "",
    "replica.lag.time.max.ms": "",
    "replica.socket.timeout.ms": "",
    "request.timeout.ms": "",
    "reserved.broker.max.id": "in a ZooKeeper cluster",
    "sasl.jaas.config": "read for PLAIN's users (PlainLoginModule's user_<name> options) and OAUTHBEARER's unsecured "
                        "validator options; other login modules are ignored",
    "sasl.oauthbearer.allow.unverified.audience": "",
    "sasl.oauthbearer.allow.unverified.issuer": "",
    "sasl.oauthbearer.clock.skew.seconds": "",
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "",
    "sasl.oauthbearer.jwks.endpoint.url": "http, https and file URLs, each listed in Kafka's system property "
                                          "org.apache.kafka.sasl.oauthbearer.allowed.urls, which Samsa reads from "
                                          "KAFKA_OPTS (-D...); an https endpoint is verified with the ssl.* options of "
                                          "the listener's OAuthBearerLoginModule, as in Kafka (PEM or PKCS12 stores), "
                                          "else the system's CAs",
    "sasl.oauthbearer.scope.claim.name": "",
    "sasl.oauthbearer.sub.claim.name": "",
    "sasl.server.max.receive.size": "",
    "security.inter.broker.protocol": "",
    "share.coordinator.snapshot.update.records.per.snapshot": "",
    "share.coordinator.state.topic.compression.codec": "",
    "share.coordinator.state.topic.min.isr": "",
    "share.coordinator.state.topic.num.partitions": "",
    "share.coordinator.state.topic.replication.factor": "a single broker creates the topic with 1",
    "share.coordinator.state.topic.segment.bytes": "",
    "share.coordinator.write.timeout.ms": "in a ZooKeeper cluster (how long a write waits for the ISR)",
    "socket.receive.buffer.bytes": "",
    "socket.request.max.bytes": "",
    "socket.send.buffer.bytes": "",
    "ssl.cipher.suites": "Java's names; TLS 1.3 suites cannot be narrowed",
    "ssl.client.auth": "",
    "ssl.enabled.protocols": "",
    "ssl.key.password": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.keystore.key": "",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.principal.mapping.rules": "",
    "ssl.truststore.certificates": "",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "super.users": "",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "",
    "transaction.max.timeout.ms": "",
    "transaction.partition.verification.enable": "",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "",
    "transaction.state.log.min.isr": "",
    "transaction.state.log.num.partitions": "",
    "transaction.state.log.replication.factor": "",
    "transaction.state.log.segment.bytes": "",
    "transactional.id.expiration.ms": "",
    "zookeeper.connect": "",
    "zookeeper.connection.timeout.ms": "",
    "zookeeper.session.timeout.ms": "",
}

# Broker configs of which Samsa takes some values and refuses the others (at startup, or the
# dynamic update): honoured within those values.
REFUSED_BROKER_VALUES: dict[str, str] = {
    "authorizer.class.name": "only Kafka's StandardAuthorizer or AclAuthorizer (or none)",
    "group.consumer.assignors": "only uniform and range (by name or Kafka's class name)",
    "group.coordinator.rebalance.protocols": "classic is required; streams is accepted but not served; share groups "
                                             "follow share.version, not this list, as in Kafka 4.4",
    "replica.selector.class": "only Kafka's RackAwareReplicaSelector (or none)",
    "sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER; GSSAPI is refused",
    "sasl.oauthbearer.jwt.validator.class": "only Kafka's DefaultJwtValidator (or BrokerJwtValidator)",
    "sasl.server.callback.handler.class": "for OAUTHBEARER only Kafka's OAuthBearerUnsecuredValidatorCallbackHandler "
                                          "(the default) and OAuthBearerValidatorCallbackHandler (JWT validation "
                                          "against a JWKS, KIP-768); not read for PLAIN and SCRAM",
    "ssl.keystore.type": "only PEM and PKCS12 (no JKS)",
    "ssl.truststore.type": "only PEM and PKCS12 (no JKS)",
}

# Broker configs refused when set to anything but their default.
REFUSED_BROKER_CONFIGS: dict[str, str] = {
    "principal.builder.class": "anything but Kafka's DefaultKafkaPrincipalBuilder (no custom principal builders)",
}

# Broker configs whose names the code holds without acting on their value: why each is ignored.
IGNORED_BROKER_CONFIGS: dict[str, str] = {
    "group.streams.assignors": "streams groups use the sticky assignor only, without rack awareness",
    "ssl.endpoint.identification.algorithm": "the broker makes no TLS connections of its own; the samsa tool "
                                             "reads it from --command-config (client/tls.py's client_context)",
    "background.threads": "trio tasks, no thread pool: only validated as a dynamic thread-pool config",
    "follower.replication.throttled.rate": "replication between brokers is not throttled; described only "
                                           "where set, as Kafka's broker quota configs",
    "leader.replication.throttled.rate": "replication between brokers is not throttled; described only "
                                         "where set, as Kafka's broker quota configs",
    "compression.gzip.level": "recompression uses the codec's default level",
    "compression.lz4.level": "recompression uses the codec's default level",
    "compression.zstd.level": "recompression uses the codec's default level",
    "cordoned.log.dirs": "only reported (DescribeLogDirs v5's IsCordoned, KIP-1066): new partitions may still "
                         "be placed in a cordoned log dir",
    "log.message.format.version": "logs hold v2 batches: legacy message sets are up-converted",
    "max.decompressed.message.bytes": "the codec's own limit applies",
    "num.io.threads": "trio tasks, no thread pool: only validated as a dynamic thread-pool config",
    "num.network.threads": "trio tasks, no thread pool: only validated as a dynamic thread-pool config",
    "num.recovery.threads.per.data.dir": "logs are loaded and recovered one after another in one thread",
    "password.encoder.secret": "dynamic password configs (ssl.keystore.password, ...) are refused in a cluster: "
                               "Samsa does not encrypt them in ZooKeeper yet",
    "process.roles": "broker: a broker of a KRaft cluster under Apache Kafka's controllers; broker,controller: a single "
                     "broker, its own controller; Samsa runs no controller role alone",
    "remote.log.storage.system.enable": "no tiered storage; only lets topics set remote.storage.enable",
}


# Group configs (the GROUP config resource) the broker acts on: a group's settings (read through
# GroupConfigManager by the group coordinator and the share partitions); every other group config
# is accepted and ignored.
HONOURED_GROUP_CONFIGS: dict[str, str] = {
    "consumer.assignment.interval.ms": "",
    "consumer.heartbeat.interval.ms": "",
    "consumer.session.timeout.ms": "",
    "share.assignment.interval.ms": "",
    "share.auto.offset.reset": "",
    "share.delivery.count.limit": "",
    "share.heartbeat.interval.ms": "",
    "share.isolation.level": "",
    "share.partition.max.record.locks": "",
    "share.record.lock.duration.ms": "",
    "share.renew.acknowledge.enable": "",
    "share.session.timeout.ms": "",
    "streams.acceptable.recovery.lag": "",
    "streams.assignment.interval.ms": "",
    "streams.heartbeat.interval.ms": "",
    "streams.initial.rebalance.delay.ms": "",
    "streams.num.standby.replicas": "",
    "streams.rack.aware.assignment.tags": _STREAMS_TAGS_NOTE,
    "streams.session.timeout.ms": "",
    "streams.task.offset.interval.ms": "",
}

IGNORED_GROUP_CONFIGS: dict[str, str] = {
    "errors.deadletterqueue.copy.record.enable": "share groups' dead-letter queues (share.version 2) are not implemented",
    "errors.deadletterqueue.topic.name": "share groups' dead-letter queues (share.version 2) are not implemented",
    "streams.num.warmup.replicas": "Kafka 4.4 assigns no warm-up tasks either (its AssignmentRefiner returns the "
                                   "target assignment unchanged)",
}


def group_support(name: str) -> Support:
    if name in HONOURED_GROUP_CONFIGS:
        return Support(HONOURED, HONOURED_GROUP_CONFIGS[name])
    if name.startswith("streams."):
        return Support(IGNORED, "streams groups use the sticky assignor only, without rack awareness")
    return Support(IGNORED, IGNORED_GROUP_CONFIGS.get(name, ""))


def topic_support(name: str) -> Support:
    if name in HONOURED_TOPIC_CONFIGS:
        return Support(HONOURED, HONOURED_TOPIC_CONFIGS[name])
    return Support(IGNORED, IGNORED_TOPIC_CONFIGS.get(name, ""))


# The broker configs that only supply a topic config's default.
_TOPIC_DEFAULTS = {d.server_default_property: d.name for d in TOPIC_CONFIGS.values() if d.server_default_property}


def broker_support(name: str) -> Support:
    if name in REFUSED_BROKER_CONFIGS:
        return Support(REFUSED, REFUSED_BROKER_CONFIGS[name])
    if name in REFUSED_BROKER_VALUES:
        return Support(HONOURED, "refuses other values: " + REFUSED_BROKER_VALUES[name])
    if name in HONOURED_BROKER_CONFIGS:
        return Support(HONOURED, HONOURED_BROKER_CONFIGS[name])
    if name in IGNORED_BROKER_CONFIGS:
        return Support(IGNORED, IGNORED_BROKER_CONFIGS[name])
    if name in _TOPIC_DEFAULTS:
        topic = topic_support(_TOPIC_DEFAULTS[name])
        return Support(topic.status, f"the default of topic config {_TOPIC_DEFAULTS[name]}"
                       + (f"; {topic.note}" if topic.note else ""))
    return Support(IGNORED)
