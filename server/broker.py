"""The broker: owns the log manager, the metadata image and the replica manager, serves listeners,
and runs the periodic jobs (flush, retention, checkpoints, the log cleaner). One trio nursery holds
it all, so a shutdown cancels everything in order: stop accepting, let requests in flight finish,
flush, exit.

It is also where the services are wired: each gets what it uses when it is built (no service
holds the broker), and handlers get them as one BrokerServices (server/context.py).
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import os
import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..coordinator.group_config import GroupConfigManager
from ..coordinator.group_coordinator import OFFSETS_TOPIC
from ..coordinator.producer_id_manager import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from ..coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC
from ..coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC
from ..storage.checkpoints import META_PROPERTIES, read_properties
from ..storage.log_cleaner import CleanerConfig
from ..storage.log_manager import PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, LogManager
from ..wire.codec import FrameBuffer
from ..wire.errors import ErrorCode
from ..wire.exceptions import CodecError, UnsupportedVersionError
from ..wire import zk_data
from ..wire.protocol import ApiKey, decode_request_header, encode_response, request_class, response_class
from .replication.alter_partition_manager import AlterPartitionManager
from .security.authorizer import StandardAuthorizer, new_authorizer
from .config.client_metrics_configs import stored_subscriptions
from .metrics.client_telemetry import ClientTelemetry
from .clock import elapsed_ns, loop_time, wall_clock_ms
from .context import BrokerServices, CloseConnection, DelayedResponse, RequestContext
from .features import SHARE_GROUPS, TRANSACTION_VERSION, BrokerFeatures, disabled_feature_response
from .handlers import ListenerType, load_handlers
from .handlers.api_versions import unsupported_version_response
from .heap import freeze_long_lived_objects
from .replication.log_dir_failure_handler import handle_log_dir_failures
from .metadata.admin_manager import AdminManager
from .metadata.cache import BrokerInfo, MetadataCache
from .metadata.local_admin import LocalAdminManager
from .metadata.local_cache import LocalMetadataCache
from .metadata.local_controller import LocalController
from .metadata.image import MetadataImage, MetadataStore, load_or_import
from .metrics.request_metrics import RequestMetrics
from .metrics.sources import LoadedBroker
from .network.in_order_responses import InOrderResponses
from .network.socket_server import Connection, ConnectionClosed, Endpoint, open_listener, serve_listener
from .config.dynamic_broker_config import (
    apply_cluster_broker_configs,
    load_dynamic_broker_configs,
    write_formatted_dynamic_defaults,
)
from .replication.fetch_session import FetchSessionCache
from .coordinators.group_service import GroupService, random_member_uuid
from .coordinators.share_service import ShareService
from .coordinators.txn_service import TxnService
from .share.persister import DefaultStatePersister
from .cluster_join import ClusterJoinError
from .replication.replica_manager import ReplicaManager
from .share.share_partition_manager import SharePartitionManager
from .security.authenticator import AuthenticationFailed
from .network.connection_quotas import ConnectionQuotas
from .network.listeners import keep_key_sets, listener_securities
from .security.delegation_tokens import DelegationTokens, TokenConfig, TokenInformation
from .security.scram import stored_credential
from .throttle import BrokerQuotas, connection_throttle_ms, finish_request, wait_unmuted

if TYPE_CHECKING:
    from ..client.scram import ScramMechanism
    from ..storage.log_cleaner import LogCleaner
    from ..wire.codec import Message
    from .config.kafka_config import KafkaConfig
    from .control_plane import ControlPlane, Controller
    from .replication.replica_manager import PartitionEpoch
    from .security.authorizer import AclBinding
    from .security.scram import ScramCredential
    # A cluster mode's modules are imported where its services are built: a single broker loads
    # neither ZooKeeper's (kazoo) nor KRaft's (bench/run.py's startup cases).
    from .kraft.assignments import AssignmentsManager
    from .kraft.controller_channel import ControllerChannel
    from .kraft.lifecycle import Lifecycle
    from .kraft.metadata_cache import KraftMetadataCache
    from .kraft.producer_ids import KraftProducerIdBlocks
    from .kraft.publisher import BrokerMetadataPublisher
    from .kraft.quorum import QuorumObserver
    from .zookeeper.controller import ZkController
    from .zookeeper.membership import ZkMembership
    from .zookeeper.metadata_cache import ZkMetadataCache
    from .zookeeper.producer_ids import ZkProducerIdBlocks
    from .zookeeper.shared_metadata import ZkSharedMetadata

log = logging.getLogger("samsa.broker")

_SIZE = struct.Struct(">i")
# How often, at least, the broker looks for deleted logs and segments due for removal (their delay
# may be any length, and one deleted meanwhile is due at its own time).
_FILE_DELETION_POLL_MS = 1000
# Kafka's BrokerServer.shutdown waits this long for the controller to let the broker go.
_KRAFT_CONTROLLED_SHUTDOWN_TIMEOUT_S = 300
request_log = logging.getLogger("samsa.request")


def new_cluster_id() -> str:
    """Kafka's cluster ids are a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def halt() -> None:
    """Kafka's Exit.halt(1) once every log directory has failed: no shutdown (it would write to
    them), exit code 1; a service manager restarts the broker, which recovers them."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(1)


@dataclass
class ZkServices:
    """What a broker of a ZooKeeper cluster runs besides a single broker's services (built with them
    by Broker._load)."""

    membership: ZkMembership  # the ZooKeeper session and this broker's registration
    shared: ZkSharedMetadata  # configs, quotas, SCRAM credentials and ACLs in ZooKeeper
    metadata_cache: ZkMetadataCache  # what the controller said
    alter_partitions: AlterPartitionManager  # ISR changes to the controller
    controller: ZkController  # runs for controller
    producer_id_blocks: ZkProducerIdBlocks  # producer ids from /latest_producer_id_block, unique across the cluster

    def controller_counts(self) -> tuple[int, int]:
        """The controller gauges: (1 if active here, partitions without a leader as it sees them)."""
        if not self.controller.is_active:
            return 0, 0
        return 1, sum(1 for states in self.metadata_cache.partition_states.values()
                      for state in states.values() if state.leader < 0)


@dataclass
class KraftServices:
    """What a broker of a KRaft cluster (process.roles=broker) runs besides a single broker's
    services (built with them by Broker._load): the metadata log fetched from Kafka's controller
    quorum and published, registration and heartbeats, producer id blocks from the controller."""

    quorum: QuorumObserver  # the metadata log, as an observer of the quorum
    channel: ControllerChannel  # requests to the active controller (the quorum's leader)
    lifecycle: Lifecycle  # BrokerRegistration, BrokerHeartbeat, controlled shutdown
    metadata_cache: KraftMetadataCache  # what the metadata log says, as handlers read it
    publisher: BrokerMetadataPublisher  # each committed batch applied to this broker
    producer_id_blocks: KraftProducerIdBlocks
    alter_partitions: AlterPartitionManager  # ISR changes to the active controller
    assignments: AssignmentsManager  # replicas' log dirs to the active controller (AssignReplicasToDirs)
    directory_ids: dict[Path, uuid.UUID]  # each log dir's directory.id (meta.properties)

    def log_dir_failed(self, log_dir: Path) -> None:
        """A log dir failed: the controller hears of it through the heartbeats (Kafka's
        BrokerServer reports a directory by its id; one without an id would stop the broker)."""
        directory = self.directory_id(log_dir)
        if directory is not None:
            self.lifecycle.directory_failed(directory)

    def directory_id(self, log_dir: Path) -> uuid.UUID | None:
        return self.directory_ids.get(log_dir) or self.directory_ids.get(log_dir.resolve())

    def controller_counts(self) -> tuple[int, int]:
        """The controller gauges: the controller is not on this broker; its partitions without a leader."""
        return 0, sum(1 for states in self.metadata_cache.partition_states.values()
                      for state in states.values() if state.leader < 0)


def _single_broker_controller_counts() -> tuple[int, int]:
    """A single broker is its own controller and leads every partition it has."""
    return 1, 0


class Broker:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.node_id: int = config.node_id
        self.handlers = load_handlers()
        self.log_dirs = [Path(d).resolve() for d in config.log_dirs]
        # Built by _load once the logs and the metadata are read (None until then): what handlers
        # use, and in a ZooKeeper cluster what it adds.
        self.services: BrokerServices | None = None
        self.zk_services: ZkServices | None = None
        self.kraft: KraftServices | None = None  # in a KRaft cluster (process.roles=broker)
        self._controlled_shutdown_begun = False
        self._kraft_stopped = trio.Event()  # the lifecycle ended: let go by the controller, or not registered
        self._kraft_failure: str | None = None  # why, when it was not a controlled shutdown
        self.endpoints: list[Endpoint] = []
        self.advertised: dict[str, BrokerInfo] = {}
        self.cluster_id = ""
        self.zookeeper: ZkMembership | None = None  # in a ZooKeeper cluster (zookeeper.connect)
        self._in_flight = 0
        self._connections: set[Connection] = set()
        self._drained: trio.Event | None = None  # set when the last request in flight ends, at shutdown
        self.started = trio.Event()
        self.fetch_sessions = FetchSessionCache(config.get_int("max.incremental.fetch.session.cache.slots"))
        self.disk_limiter = trio.CapacityLimiter(1)  # fsync, retention, checkpoints: one at a time
        # Delegation tokens (KIP-48): read by SCRAM logins from the start, filled once the metadata is read.
        self.delegation_tokens = DelegationTokens(TokenConfig.from_broker_config(config))
        self.listener_security = listener_securities(config, self._scram_credential, self.delegation_tokens.login)
        self.connection_quotas = ConnectionQuotas(config)
        self.request_metrics = RequestMetrics()
        # KIP-714; its collect() is a Prometheus collector of what clients push.
        self.client_telemetry = ClientTelemetry(config.get_int("telemetry.max.bytes"))
        self.features = (BrokerFeatures.zookeeper_mode() if config.is_set("zookeeper.connect")
                         else BrokerFeatures.kraft_mode() if config.kraft_broker else BrokerFeatures.create())
        self.metrics_port: int | None = None  # the endpoint's port once it listens
        self.loaded_broker: LoadedBroker | None = None  # what the metrics report on, once the logs are loaded
        self.recovered = False  # the logs are loaded and recovered: /healthz
        self.registered = False  # in a cluster, registered in ZooKeeper (with recovered: /readyz)

    # --- lifecycle ----------------------------------------------------------------------------

    def _load(self) -> tuple[BrokerServices, ZkServices | None]:
        """Recover the logs, read the metadata and build the services on them (in a worker thread,
        before any request is served)."""
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        config = self.config
        log_manager = LogManager(self.log_dirs, config.log_config(), wall_clock_ms,
                                 producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
                                 cleaner_config=CleanerConfig.from_broker_config(config.get),
                                 on_all_log_dirs_failed=halt)
        formatting = not log_manager.is_formatted()
        if config.kraft_broker and formatting:  # Kafka's KRaft nodes start only on formatted log dirs
            raise ClusterJoinError(f"No `meta.properties` found in {self.log_dirs[0]} (have you run "
                                   "`samsa format` (or `kafka-storage.sh format`) to format the directory?)")
        self.cluster_id = log_manager.ensure_meta_properties(self.node_id, new_cluster_id)
        if config.kraft_broker:  # the metadata is the controllers' (fetched once running); the image holds nothing
            metadata: MetadataStore = MetadataImage.load(self.log_dirs[0], self.cluster_id)
        else:
            metadata = load_or_import(self.log_dirs, self.cluster_id)
        if not config.is_set("zookeeper.connect") and not config.kraft_broker:
            # A ZooKeeper-mode broker's levels are fixed (features.py); a KRaft broker's are the controller's.
            self.features = BrokerFeatures.create(metadata.features, metadata.features_epoch)
        if formatting and not config.is_set("zookeeper.connect"):
            # Kafka 4's `kafka-storage format` writes it; a ZooKeeper-mode Kafka 3.9 broker has no such step.
            write_formatted_dynamic_defaults(config, metadata)
        zk_services: ZkServices | None
        if self.zookeeper is None:  # in a cluster they are ZooKeeper's, applied once read (_run)
            load_dynamic_broker_configs(config, metadata, log_manager, self.node_id)
            # Client-metrics subscriptions: a ZooKeeper-mode Kafka 3.9 broker has none.
            for name, subscription in stored_subscriptions(metadata).items():
                self.client_telemetry.update_subscription(name, subscription)
            if config.kraft_broker:
                services, self.kraft = self._kraft_broker_services(log_manager, metadata)
            else:
                services = self._single_broker_services(log_manager, metadata)
            zk_services = None
        else:
            services, zk_services = self._zk_broker_services(self.zookeeper, log_manager, metadata)
        self.loaded_broker = LoadedBroker(
            services.replica_manager, log_manager, services.groups,
            zk_services.controller_counts if zk_services is not None else
            self.kraft.controller_counts if self.kraft is not None else _single_broker_controller_counts,
            services.share_coordinator, services.share_partitions)
        log_manager.startup({name: services.replica_manager.topic_log_config(topic)
                             for name, topic in metadata.topics.items()},
                            {name: topic.topic_id for name, topic in metadata.topics.items()})
        services.replica_manager.load()
        return services, zk_services

    def _single_broker_services(self, log_manager: LogManager, metadata: MetadataStore) -> BrokerServices:
        """A single broker's: its metadata image holds the dynamic configs, ACLs, quotas, SCRAM
        credentials and producer id blocks, and it leads every partition of the image."""
        replicas = ReplicaManager(log_manager, metadata, self.config)
        self.delegation_tokens.replace_all(TokenInformation.from_json(t) for t in metadata.delegation_tokens.values())
        return self._services(
            log_manager, metadata, replicas, new_authorizer(self.config, metadata.acls),
            ProducerIdManager(metadata.allocate_producer_id_block), BrokerQuotas(self.config, metadata.client_quotas),
            metadata_cache=LocalMetadataCache(metadata, self.node_id, self.advertised,
                                              lambda topic, index: replicas.partitions[(topic, index)].leader_epoch),
            admin=LocalAdminManager(), listener_type=ListenerType.BROKER,
            controller=LocalController(self.node_id, lambda: metadata.topics))

    def _kraft_broker_services(self, log_manager: LogManager,
                               metadata: MetadataStore) -> tuple[BrokerServices, KraftServices]:
        """A KRaft cluster member's: the controller quorum's metadata log holds the topics, configs,
        ACLs, quotas and SCRAM credentials (fetched once the broker runs: _run) and the controller
        hands out producer id blocks; the partitions' registrations say which this broker leads or
        follows (server/kraft/)."""
        from .kraft.admin_manager import KraftAdminManager
        from .kraft.assignments import AssignmentsManager
        from .kraft.controller_channel import ControllerChannel
        from .kraft.dynamic_configs import DynamicConfigPublisher
        from .kraft.forwarding import ForwardingManager
        from .kraft.lifecycle import Lifecycle
        from .kraft.metadata_cache import KraftMetadataCache
        from .kraft.producer_ids import KraftProducerIdBlocks
        from .kraft.publisher import BrokerMetadataPublisher
        from .kraft.quorum import QuorumObserver
        config = self.config
        cache = KraftMetadataCache(self.node_id, self.cluster_id)
        authorizer = new_authorizer(config, [])
        quotas = BrokerQuotas(config, cache.client_quotas)
        replicas = ReplicaManager(log_manager, metadata, config)
        directory_ids = [_directory_id(d) for d in self.log_dirs]
        publisher: BrokerMetadataPublisher | None = None
        services: BrokerServices | None = None
        dynamic_configs = DynamicConfigPublisher(self.node_id, cache)

        def committed(replay, offset: int) -> None:
            assert publisher is not None and services is not None
            publisher.publish(replay, offset)
            dynamic_configs.publish(services)

        # Kafka's metadata.log.dir: the first log dir unless set.
        metadata_log_dir = Path(config.get_string("metadata.log.dir") or self.log_dirs[0])
        quorum = QuorumObserver(config, self.cluster_id, self.node_id, directory_ids[0], committed, metadata_log_dir)
        channel = ControllerChannel(quorum, self.node_id, config.get_int("controller.quorum.request.timeout.ms"))
        # Kafka's broker has a channel of its own for the clients' requests it forwards ("forwarding"):
        # a slow one never holds up the heartbeats. It learns the controller's API versions, which
        # bound those of the forwarded APIs this broker advertises.
        forwarding = ControllerChannel(quorum, self.node_id, config.get_int("controller.socket.timeout.ms"),
                                       learn_api_versions=True, name="forwarding")
        lifecycle = Lifecycle(config, channel, self.cluster_id, self.node_id, directory_ids, self.features.supported,
                              lambda: [(adv.name, self.advertised[adv.name].host, self.advertised[adv.name].port,
                                        adv.security_protocol) for adv in config.advertised_listeners],
                              self._kraft_shut_down)
        producer_id_blocks = KraftProducerIdBlocks(channel, self.node_id, lambda: lifecycle.broker_epoch)
        alter_partitions = AlterPartitionManager(lifecycle, quorum, config)
        replicas.isr_change_listener = alter_partitions.submit
        def hosted_here(topic_id: uuid.UUID, partition: int) -> bool:
            topic = cache.topics_by_id.get(topic_id)
            state = None if topic is None else cache.partition_states.get(topic.name, {}).get(partition)
            return state is not None and self.node_id in state.replicas

        assignments = AssignmentsManager(channel, self.node_id, lambda: lifecycle.broker_epoch, hosted_here)
        ids_by_dir = dict(zip(self.log_dirs, directory_ids))
        publisher = BrokerMetadataPublisher(self.node_id, cache, replicas, self.features, authorizer, quotas,
                                            config.inter_broker_listener_name, lifecycle.metadata_applied,
                                            assignments, lambda d: ids_by_dir.get(d) or ids_by_dir.get(d.resolve()))
        services = self._services(
            log_manager, metadata, replicas, authorizer, ProducerIdManager(producer_id_blocks.allocate_block), quotas,
            metadata_cache=cache, admin=KraftAdminManager(cache, channel, ForwardingManager(forwarding)),
            listener_type=ListenerType.BROKER, cluster=cache)
        replicas.on_leadership_change = _leadership_changed(services)
        return services, KraftServices(quorum, channel, lifecycle, cache, publisher, producer_id_blocks,
                                       alter_partitions, assignments, ids_by_dir)

    def _kraft_shut_down(self, reason: str) -> None:
        """The lifecycle's end: after a controlled shutdown the broker stops (serve() is already
        stopping it); a registration that never succeeded stops it with an error."""
        self._kraft_failure = None if self._controlled_shutdown_begun else reason
        self._kraft_stopped.set()

    async def _join_kraft_cluster(self, kraft: KraftServices, tasks: trio.Nursery) -> None:
        """Register with the active controller once the listeners are bound, then wait until the
        metadata log is caught up before serving (Kafka's BrokerServer.startup); the controller
        unfences the broker after that."""
        await tasks.start(kraft.lifecycle.run)
        await tasks.start(kraft.producer_id_blocks.run, kraft.lifecycle.registered)
        await tasks.start(kraft.assignments.run, kraft.lifecycle.registered)
        async with trio.open_nursery() as waiting:
            async def until(event: trio.Event) -> None:
                await event.wait()
                waiting.cancel_scope.cancel()
            waiting.start_soon(until, kraft.lifecycle.caught_up)
            waiting.start_soon(until, self._kraft_stopped)
        if self._kraft_failure is not None:
            raise ClusterJoinError(f"Shutting down because we were {self._kraft_failure}.")
        tasks.start_soon(self._watch_kraft_lifecycle)

    async def _watch_kraft_lifecycle(self) -> None:
        await self._kraft_stopped.wait()
        if self._kraft_failure is not None:
            raise ClusterJoinError(self._kraft_failure)

    def _zk_broker_services(self, zookeeper: ZkMembership, log_manager: LogManager,
                            metadata: MetadataStore) -> tuple[BrokerServices, ZkServices]:
        """A ZooKeeper cluster member's: ZooKeeper holds the dynamic configs, ACLs, quotas and SCRAM
        credentials (read once it runs: _run) and hands out producer id blocks; the controller says
        which partitions this broker leads or follows."""
        from .zookeeper.admin_manager import ZkAdminManager
        from .zookeeper.control_plane import ZkControlPlane
        from .zookeeper.controller import ZkController
        from .zookeeper.metadata_cache import ZkMetadataCache
        from .zookeeper.producer_ids import ZkProducerIdBlocks
        from .zookeeper.shared_metadata import ZkSharedMetadata
        config = self.config
        authorizer = new_authorizer(config, [])

        # ZooKeeper's change notifications reach the services made below; they come once the broker runs.
        def topic_configs_changed(topic: str, configs: dict[str, str]) -> None:
            """A topic's overrides changed in ZooKeeper: the metadata cache and the logs here take them."""
            metadata_cache.set_topic_configs(topic, configs)
            replicas.apply_topic_configs(topic, configs)

        def acls_changed(acls: list[AclBinding]) -> None:
            """The cluster's ACLs changed in ZooKeeper: the authorizer, when one is set, takes them."""
            if authorizer is not None:
                authorizer.set_acls(acls)

        shared = ZkSharedMetadata(zookeeper.client, self.node_id, topic_configs_changed, lambda: quotas.refresh(),
                                  acls_changed, lambda: apply_cluster_broker_configs(services),
                                  lambda group_id, configs: services.group_configs.update_group_config(group_id, configs),
                                  self.delegation_tokens)
        metadata_cache = ZkMetadataCache(self.node_id, metadata, shared)
        producer_id_blocks = ZkProducerIdBlocks(zookeeper.client, self.node_id, PRODUCER_ID_BLOCK_SIZE)
        quotas = BrokerQuotas(config, shared.client_quotas)
        replicas = ReplicaManager(log_manager, metadata, config)
        alter_partitions = AlterPartitionManager(zookeeper, metadata_cache, config)
        replicas.isr_change_listener = alter_partitions.submit
        controller = ZkController(zookeeper, config)
        services = self._services(
            log_manager, metadata, replicas, authorizer, ProducerIdManager(producer_id_blocks.allocate_block), quotas,
            metadata_cache=metadata_cache, admin=ZkAdminManager(zookeeper.client, metadata_cache, shared),
            listener_type=ListenerType.ZK_BROKER, cluster=metadata_cache,
            control_plane=ZkControlPlane(zookeeper, metadata_cache), controller=controller)
        replicas.on_leadership_change = _leadership_changed(services)
        return services, ZkServices(zookeeper, shared, metadata_cache, alter_partitions, controller, producer_id_blocks)

    def _services(self, log_manager: LogManager, metadata: MetadataStore, replicas: ReplicaManager,
                  authorizer: StandardAuthorizer | None, producer_ids: ProducerIdManager, quotas: BrokerQuotas, *,
                  metadata_cache: MetadataCache, admin: AdminManager, listener_type: ListenerType,
                  cluster: ZkMetadataCache | KraftMetadataCache | None = None,
                  control_plane: ControlPlane | None = None,
                  controller: Controller | None = None) -> BrokerServices:
        """The coordinators on the replicas, and what handlers use of it all. `cluster`: the
        metadata of the ZooKeeper cluster the broker is in."""
        config = self.config
        group_configs = GroupConfigManager(config.get)
        for group_id, configs in metadata.group_configs.items():  # a ZooKeeper cluster's come from ZooKeeper
            group_configs.update_group_config(group_id, configs)
        groups = GroupService(config, metadata, replicas, self.disk_limiter, wall_clock_ms, random_member_uuid,
                              cluster=cluster, group_configs=group_configs)
        transactions = TxnService(config, metadata, replicas, self.disk_limiter, producer_ids.generate_producer_id,
                                  groups.complete_transaction, wall_clock_ms, cluster=cluster,
                                  transaction_version_level=self.features.level(TRANSACTION_VERSION))
        share_coordinator = ShareService(config, metadata, replicas, self.disk_limiter, wall_clock_ms,
                                         self.features.enabled(SHARE_GROUPS), cluster=cluster)
        persister = DefaultStatePersister(self.node_id, share_coordinator, lambda partition: admin.coordinator(
            services, SHARE_GROUP_STATE_TOPIC, partition, config.inter_broker_listener_name))
        groups.persister = persister  # share partitions are initialized and deleted through it
        share_partitions = SharePartitionManager(replicas, config, persister, group_configs)

        def feature_changed(name: str, old: int, new: int) -> None:
            if name == SHARE_GROUPS[0] and new < SHARE_GROUPS[1] <= old:
                share_partitions.sessions.remove_all()  # Kafka's onShareVersionToggle
            if name == SHARE_GROUPS[0]:
                share_coordinator.share_groups_changed(new >= SHARE_GROUPS[1])
            if name == TRANSACTION_VERSION:
                transactions.transaction_version_changed(new)

        self.features.listeners.append(feature_changed)
        # Not the group coordinator's share_group_listener: as in Kafka, a member leaving its group
        # keeps its share session (its client acknowledges and closes it after the leave heartbeat);
        # only a closed connection or session releases what it holds (share_session_cache.py).

        def topics_changed() -> None:
            groups.topics_changed()  # the groups subscribed to a topic rebalance
            share_partitions.drop_stale()  # the share partitions of a deleted topic go

        replicas.on_topics_changed = topics_changed
        services = BrokerServices(
            config=config, node_id=self.node_id, cluster_id=self.cluster_id, log_dirs=self.log_dirs,
            log_manager=log_manager, metadata=metadata, metadata_cache=metadata_cache, admin=admin,
            listener_type=listener_type, features=self.features, replica_manager=replicas, groups=groups,
            group_configs=group_configs, transactions=transactions, share_coordinator=share_coordinator,
            persister=persister, share_partitions=share_partitions, producer_ids=producer_ids, quotas=quotas,
            authorizer=authorizer, fetch_sessions=self.fetch_sessions, disk_limiter=self.disk_limiter,
            advertised=self.advertised, client_telemetry=self.client_telemetry,
            connection_quotas=self.connection_quotas, control_plane=control_plane, controller=controller,
            delegation_tokens=self.delegation_tokens)
        return services

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """A user's SCRAM credential: ZooKeeper's in a cluster, else the metadata image's (none
        before the logs are loaded, when no connection is served yet)."""
        if self.zk_services is not None:
            return stored_credential(self.zk_services.shared.scram_credentials, user, mechanism)
        if self.kraft is not None:
            return stored_credential(self.kraft.metadata_cache.scram_credentials, user, mechanism)
        if self.services is not None:
            return stored_credential(self.services.metadata.scram_credentials, user, mechanism)
        return None

    @functools.cached_property
    def metrics(self):
        """What the metrics endpoint (metrics.port) serves: other components register their
        collectors here. Made on first use: prometheus_client (with http.server, urllib and
        wsgiref) is imported only by a broker that serves metrics, not at every start."""
        from prometheus_client import CollectorRegistry

        from .metrics.collectors import BrokerCollector
        registry = CollectorRegistry()
        registry.register(BrokerCollector(self.request_metrics, self.connection_quotas, lambda: self.loaded_broker))
        registry.register(self.client_telemetry)
        return registry

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        started_at = elapsed_ns()
        async with trio.open_nursery() as nursery:
            if self.config.get_int("metrics.port"):  # first: /healthz answers 503 while the logs recover
                from .metrics.http_server import MetricsEndpoint, serve_metrics
                endpoint = MetricsEndpoint(self.metrics, lambda: self.recovered, self._ready)
                self.metrics_port = await nursery.start(serve_metrics, endpoint, self.config.get_string("metrics.host"),
                                                        self.config.get_int("metrics.port"))
            try:
                await self._run_member(started_at, task_status)
            finally:
                nursery.cancel_scope.cancel()

    def _ready(self) -> bool:
        """/readyz: recovered and, in a cluster, registered in ZooKeeper (not since the session
        expired and before registering again: the controller counts the broker as gone meanwhile)."""
        if not self.recovered:
            return False
        if self.kraft is not None:
            return self.kraft.lifecycle.unfenced.is_set()
        return self.zookeeper is None or self.registered

    def zookeeper_session_lost(self) -> None:
        """Not registered until the new session's registration. What it leads stays as the last
        LeaderAndIsr said (as in Kafka, whose ReplicaManager ignores the session): the controller
        moves leaders with LeaderAndIsr. Refusing produces meanwhile, or answering the acks=all ones
        waiting with NOT_LEADER_OR_FOLLOWER although the ISR has their records, makes an idempotent
        producer take written records for unwritten ones, and the next request, in sequence after a
        refused one, OUT_OF_ORDER_SEQUENCE_NUMBER: librdkafka then bumps its epoch and sends the
        written records again under new sequence numbers (duplicates)."""
        self.registered = False

    def registered_again(self) -> None:
        self.registered = True

    async def _run_member(self, started_at: int, task_status) -> None:
        """The broker, having joined its cluster first when it is in one."""
        if self.config.get_string("zookeeper.connect"):
            from .zookeeper.membership import join_cluster
            # The cluster's id and this broker's (maybe generated) id, into meta.properties.
            self.zookeeper = await join_cluster(self.config, self.log_dirs, new_cluster_id)
            self.node_id = self.zookeeper.broker_id
        try:
            await self._run(started_at, task_status)
        finally:
            if self.zookeeper is not None:
                with trio.CancelScope(shield=True):
                    await self.zookeeper.client.close()  # the ephemeral registration goes with the session

    async def _run(self, started_at: int, task_status) -> None:
        services, zk_services = await trio.to_thread.run_sync(self._load)
        self.services, self.zk_services = services, zk_services
        self.recovered = True
        if zk_services is not None:
            await zk_services.shared.load()
            apply_cluster_broker_configs(services)
            services.quotas.refresh()
            if services.authorizer is not None:
                services.authorizer.set_acls(zk_services.shared.acl_bindings())
        async with trio.open_nursery() as tasks:
            await tasks.start(handle_log_dir_failures, services.log_manager.failure_channel, services.replica_manager,
                              None if zk_services is None else zk_services.membership.client, self.node_id,
                              None if self.kraft is None else self.kraft.log_dir_failed)
            await tasks.start(services.groups.run)  # groups and offsets loaded before any request
            await tasks.start(services.transactions.run)  # then transactions, whose markers may complete offsets
            await tasks.start(services.share_coordinator.run)  # share partitions' state
            if isinstance(services.persister, DefaultStatePersister):  # its connections to other brokers
                await tasks.start(services.persister.run)
            await tasks.start(services.replica_manager.run)  # replica fetchers, ISR expiration
            await tasks.start(services.share_partitions.run)  # share partitions' loads, writes and lock expiry
            kraft = self.kraft
            if kraft is not None:
                await tasks.start(kraft.quorum.run)  # the metadata log, from the controller quorum
                await tasks.start(kraft.alter_partitions.run)  # ISR changes to the active controller
            if zk_services is not None:
                await tasks.start(zk_services.alter_partitions.run)  # ISR changes to the controller
                await tasks.start(zk_services.shared.run)  # /config/changes and ACL change notifications
                await tasks.start(zk_services.producer_id_blocks.run)  # a spare block of producer ids
            await tasks.start(keep_key_sets, self.listener_security)  # OAUTHBEARER's JWKS, fetched before serving
            listeners = []
            for listener in self.config.listeners:
                ep = Endpoint(listener.name, listener.host, listener.port, listener.security_protocol)
                sock = await open_listener(ep, (self.config.get_int("socket.send.buffer.bytes"),
                                                self.config.get_int("socket.receive.buffer.bytes")))
                ep.port = sock.getsockname()[1]  # resolves port 0
                self.endpoints.append(ep)
                listeners.append((sock, ep))
            for adv in self.config.advertised_listeners:
                port = adv.port
                if port == 0:
                    port = next(e.port for e in self.endpoints if e.listener == adv.name)
                self.advertised[adv.name] = BrokerInfo(self.node_id, adv.host or "localhost", port,
                                                       self.config.get_string("broker.rack"))
            if zk_services is not None:
                from .zookeeper.membership import broker_registration, stay_registered
                await tasks.start(stay_registered, zk_services.membership, broker_registration(
                    self.config, self.node_id, self._advertised_endpoints()),
                    self.zookeeper_session_lost, self.registered_again)
                self.registered = True
                await tasks.start(zk_services.controller.run)  # registered first, as KafkaServer starts its controller
            if kraft is not None:
                await self._join_kraft_cluster(kraft, tasks)
            async with trio.open_nursery() as connections:
                for sock, ep in listeners:
                    tasks.start_soon(serve_listener, sock, ep, functools.partial(self._serve_connection, services),
                                     connections, self.connection_quotas)
                tasks.start_soon(self._periodic_jobs, services.log_manager)
                if self.delegation_tokens.enabled:
                    async def remove_expired_tokens() -> None:
                        await self._remove_expired_tokens(services)
                    tasks.start_soon(_every, self.delegation_tokens.config.expiry_check_interval_ms,
                                     remove_expired_tokens)
                log.info("[KafkaServer id=%d] started (%.2fs) on %s", self.node_id,
                         (elapsed_ns() - started_at) / 1e9,
                         ", ".join(f"{e.listener}://{e.host or ''}:{e.port}" for e in self.endpoints))
                freeze_long_lived_objects()  # what startup loaded
                self.started.set()
                task_status.started(self)
                try:
                    await trio.sleep_forever()
                finally:
                    with trio.CancelScope(shield=True):
                        await self._shutdown(services, tasks, connections)

    async def _remove_expired_tokens(self, services: BrokerServices) -> None:
        """Every delegation.token.expiry.check.interval.ms, the tokens past their expiry are removed
        (Kafka's controller: sweepExpiredDelegationTokens; in a ZooKeeper cluster the active
        controller's expireTokens)."""
        if services.controller is not None and not services.controller.is_active:
            return
        for token in self.delegation_tokens.expired(wall_clock_ms()):
            log.info("Delegation token expired for token: %s for owner: %s", token.token_id, token.owner)
            await services.admin.remove_delegation_token(services, token.token_id)

    async def controlled_shutdown(self) -> None:
        """Before a shutdown in a ZooKeeper cluster (controlled.shutdown.enable): the controller moves
        this broker's leaders away while it still serves (server/zookeeper/controlled_shutdown.py)."""
        self._controlled_shutdown_begun = True
        if self.kraft is not None:
            # Kafka's BrokerServer.shutdown: want_shut_down in the heartbeats until the controller
            # moved this broker's leaders away and lets it go (bounded, as Kafka waits at most 5 min).
            if self.started.is_set() and self.config.get_boolean("controlled.shutdown.enable"):
                with trio.move_on_after(_KRAFT_CONTROLLED_SHUTDOWN_TIMEOUT_S) as waited:
                    await self.kraft.lifecycle.controlled_shutdown()
                if waited.cancelled_caught:
                    log.error("[BrokerServer id=%d] Timed out waiting for the controller to approve controlled "
                              "shutdown", self.node_id)
            return
        zk_services = self.zk_services
        if zk_services is None or not self.started.is_set() or not self.config.get_boolean("controlled.shutdown.enable"):
            return
        from .zookeeper.controlled_shutdown import controlled_shutdown
        await controlled_shutdown(zk_services.membership, zk_services.metadata_cache, self.config)

    def _advertised_endpoints(self) -> list[zk_data.EndPoint]:
        return [zk_data.EndPoint(adv.name, self.advertised[adv.name].host, self.advertised[adv.name].port,
                                 adv.security_protocol) for adv in self.config.advertised_listeners]

    async def _shutdown(self, services: BrokerServices, tasks: trio.Nursery, connections: trio.Nursery) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.node_id)
        tasks.cancel_scope.cancel()  # stop accepting and periodic jobs
        with trio.move_on_after(self.config.get_int("controlled.shutdown.retry.backoff.ms") / 1000 + 5):
            if self._in_flight:
                self._drained = trio.Event()
                await self._drained.wait()  # requests in flight finish
        connections.cancel_scope.cancel()
        services.replica_manager.wake_all()
        await trio.to_thread.run_sync(services.log_manager.shutdown)
        log.info("[KafkaServer id=%d] shut down completed", self.node_id)

    async def _periodic_jobs(self, log_manager: LogManager) -> None:
        config = self.config
        jobs = _LogJobs(log_manager, config, self.disk_limiter)
        async with trio.open_nursery() as nursery:
            # Idle and authentication timeouts: checked each second (a tenth of a shorter idle time).
            nursery.start_soon(_every, min(1000, config.get_int("connections.max.idle.ms") // 10),
                               self._close_idle_connections)
            nursery.start_soon(_every, config.get_int("log.retention.check.interval.ms"), jobs.retention)
            nursery.start_soon(jobs.delete_due_files)
            nursery.start_soon(_every, config.get_int("log.flush.scheduler.interval.ms"), jobs.flush)
            nursery.start_soon(_every, config.get_int("log.flush.offset.checkpoint.interval.ms"), jobs.checkpoint)
            nursery.start_soon(_every, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, jobs.expire_producers)
            cleaner = log_manager.cleaner
            if cleaner is not None:
                # log.cleaner.threads as it is now, dynamic configs applied; a later change of it
                # takes effect at the next start.
                threads = config.get_int("log.cleaner.threads")
                limiter = trio.CapacityLimiter(max(threads, 1))
                for _ in range(threads):
                    nursery.start_soon(jobs.clean_logs, cleaner, limiter)

    # --- requests -----------------------------------------------------------------------------

    async def _serve_connection(self, services: BrokerServices, conn: Connection) -> None:
        try:
            refused_ms = connection_throttle_ms(services.quotas, conn.client_host)
            if refused_ms:
                await trio.sleep(refused_ms / 1000)  # closed unread once throttled, as Kafka does
                return
            await self.listener_security[conn.listener.listener].start(conn)
            # Cancelled by _close_idle_connections while it waits too long for a request: cheaper
            # than a deadline per request, and a request being served is never cancelled by it.
            with conn.idle_scope:
                self._connections.add(conn)
                failure: Exception | None = None
                responses: InOrderResponses[_Answer] | None = None
                try:
                    async with trio.open_nursery() as nursery:
                        responses = InOrderResponses(nursery, functools.partial(self._respond, conn))
                        try:
                            await self._serve_requests(services, conn, responses)
                        except Exception as e:  # raised below, once the nursery is closed: not in a group
                            failure = e
                        # Kafka answered the requests read before the one that ended the connection.
                        responses.close()
                        await responses.drained()
                finally:
                    for _ in responses.unanswered() if responses is not None else ():  # closed first
                        self._request_done()
                if failure is not None:
                    raise failure
                if responses.failure is not None:
                    raise responses.failure
            log.debug("closing %s connection %s", "idle" if conn.authenticator.complete else "unauthenticated", conn.id)
        except (ConnectionClosed, CloseConnection):
            pass
        except AuthenticationFailed as e:
            self.request_metrics.authentication_failed(conn.listener.listener)
            log.info("closing connection %s from %s: %s", conn.id, conn.client_host, e)
        except (ValueError, CodecError) as e:
            log.warning("closing connection %s from %s:%s: %s", conn.id, conn.client_host, conn.client_port, e)
        except OSError as e:
            log.debug("connection %s: %s", conn.id, e)
        finally:
            self._connections.discard(conn)
            self.client_telemetry.disconnected(conn.id)
            if self.services is not None:
                self.services.share_partitions.connection_closed(conn.id)  # its share session ends
            conn.close()

    async def _serve_requests(self, services: BrokerServices, conn: Connection,
                              responses: InOrderResponses[_Answer]) -> None:
        """Read and answer a connection's requests until it closes, idles out or fails."""
        max_frame = self.config.get_int("socket.request.max.bytes")
        idle_timeout = self.config.get_int("connections.max.idle.ms") / 1000
        parked = False  # the last request parked: the task yielded since its frame was read
        while True:
            auth = conn.authenticator
            conn.idle_deadline = min(loop_time() + idle_timeout, auth.deadline)
            if conn.muted_until:  # a muted connection may idle out too
                await wait_unmuted(conn)
            frame = await conn.read_frame(*auth.receive_limit(max_frame), yielded=parked)
            received_ns = elapsed_ns()
            conn.idle_deadline = math.inf
            if conn.idle_scope.cancel_called:  # the deadline passed as the request came in
                return
            self._in_flight += 1
            try:
                answer = await self._process(services, conn, frame, responses)
            except BaseException:
                self._request_done()
                raise
            # A large frame's memory is read into again once unreferenced: the request's records
            # are views of it.
            del frame
            ctx = answer.ctx
            # Time parked (not_request_time) is time spent in the scheduler's hands.
            parked = ctx is not None and ctx.waited_ns > 0
            answer.received_ns = received_ns
            if responses.pending or isinstance(answer.response, DelayedResponse):
                parked = False
                await responses.put(answer)  # answered after those before it
                del answer, ctx
                continue
            await self._respond(conn, answer)
            del answer, ctx  # the frame's memory is read into again (above)
            if conn.authenticator.failure is not None:  # answered; now closed, as Kafka does, after a delay
                self.request_metrics.authentication_failed(conn.listener.listener)
                log.info("Failed authentication with /%s (channelId=%s) (%s)", conn.client_host, conn.id,
                         conn.authenticator.failure)
                await trio.sleep(self.config.get_int("connection.failed.authentication.delay.ms") / 1000)
                return

    async def _respond(self, conn: Connection, answer: _Answer) -> None:
        """Send a request's response (once a delayed one is complete) and record the request."""
        try:
            ctx, request, response = answer.ctx, answer.request, answer.response
            if isinstance(response, DelayedResponse):
                assert ctx is not None and request is not None
                response, answer.encoded = await self._complete(ctx, request, response)
            send_ns = elapsed_ns()
            if answer.encoded is not None:
                await conn.send_response(answer.encoded)
            if ctx is not None:
                self.request_metrics.record(ctx, request, response, answer.received_ns, send_ns, elapsed_ns())
        finally:
            self._request_done()

    def _request_done(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._drained is not None:
            self._drained.set()

    async def _close_idle_connections(self) -> None:
        now = loop_time()
        for conn in self._connections:
            if conn.idle_deadline <= now:
                conn.idle_scope.cancel()

    async def _process(self, services: BrokerServices, conn: Connection, frame: bytearray,
                       responses: InOrderResponses[_Answer]) -> _Answer:
        """The request's response, encoded unless it is delayed (no response for an acks=0
        produce; no context, request or response for a bare SASL token)."""
        auth = conn.authenticator
        if auth.expects_raw_token:  # after a v0 SaslHandshake: a bare SASL token, answered bare
            token = auth.evaluate_raw_token(bytes(frame), loop_time())
            return _Answer(None, None, None, bytes(_SIZE.pack(len(token))) + token)
        try:
            header, pos = decode_request_header(frame)
        except CodecError as e:
            raise CodecError(f"malformed request header: {e}") from e
        api_key, version = header.request_api_key, header.request_api_version
        auth.admit(api_key, version, loop_time())
        ctx = RequestContext(services, conn, api_key, version, header.correlation_id, header.client_id,
                             auth.principal, request_size=len(frame), started_ns=elapsed_ns())
        handler = self.handlers.get(api_key)
        if (handler is None or not handler.min_version <= version <= handler.max_version_for(services.listener_type)
                or not handler.served(services.listener_type, services.admin.forwards_to_controller)):
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer an unknown ApiVersions version with v0 and our range of it.
                return _Answer(None, None, None,
                               encode_response(unsupported_version_response(), 0, header.correlation_id))
            raise CodecError(f"unsupported api {api_key} version {version} from client {header.client_id!r}")
        request = request_class(api_key).decode(frame, version, pos)
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("%s v%d (correlation id %d) from %s: %r", type(request).__name__, version,
                              header.correlation_id, conn.id, request)
        if responses.pending and not (api_key == ApiKey.PRODUCE and request.acks == -1):
            # Only an acks=all produce appends while earlier ones wait for their ISR
            # (server/network/in_order_responses.py): this request sees the broker as it is once
            # they are answered, as in Kafka.
            await responses.drained()
        response: Message | DelayedResponse | None
        try:
            if handler.feature is not None and not services.features.enabled(handler.feature):
                response = disabled_feature_response(api_key, request)
            elif handler.forwarded and (forwarded := await services.admin.forward(ctx, request)) is not None:
                response = forwarded  # the active controller's answer (KafkaApis.forwardToController)
            else:
                response = await handler.handle(ctx, request)
        except (UnsupportedVersionError, ConnectionClosed, CloseConnection):
            raise
        except Exception as e:
            response = _server_error(ctx, request, e)
        if isinstance(response, DelayedResponse):
            return _Answer(ctx, request, response, None)
        return _Answer(ctx, request, response, _encoded(ctx, request, response))

    async def _complete(self, ctx: RequestContext, request: Message,
                        delayed: DelayedResponse) -> tuple[Message | None, bytearray | None]:
        """A delayed response once complete, and its encoding."""
        try:
            response = await delayed.complete()
        except (ConnectionClosed, CloseConnection):
            raise
        except Exception as e:
            response = _server_error(ctx, request, e)
        return response, _encoded(ctx, request, response)


@dataclass(slots=True)
class _Answer:
    """What a connection sends for one request, and what its metrics need."""
    ctx: RequestContext | None
    request: Message | None
    response: Message | DelayedResponse | None
    encoded: bytes | bytearray | FrameBuffer | None  # None: not yet (delayed), or nothing to send
    received_ns: int = 0


def _server_error(ctx: RequestContext, request: Message, e: Exception) -> Message:
    """UNKNOWN_SERVER_ERROR for a handler's unexpected exception (logged); CodecError, closing
    the connection, where the API has no error response."""
    log.exception("error handling %s v%d from %s", type(request).__name__, ctx.api_version, ctx.client_id)
    response = error_response(ctx.api_key, ErrorCode.UNKNOWN_SERVER_ERROR)
    if response is None:
        raise CodecError("no error response for this api; closing the connection") from e
    return response


def _encoded(ctx: RequestContext, request: Message, response: Message | None) -> bytearray | None:
    """A handler's response, its throttle time set, encoded (None: no response, acks=0)."""
    finish_request(ctx, response)
    if request_log.isEnabledFor(logging.DEBUG):
        request_log.debug("completed %s v%d (correlation id %d) from %s: %r", type(request).__name__,
                          ctx.api_version, ctx.correlation_id, ctx.connection.id, response)
    if response is None:
        return None
    return encode_response(response, ctx.api_version, ctx.correlation_id, FrameBuffer())


def _directory_id(log_dir: Path) -> uuid.UUID:
    """The directory.id meta.properties gives a log dir (Kafka's Uuid: URL-safe base64 without padding)."""
    props = read_properties(log_dir / META_PROPERTIES) or {}
    text = props.get("directory.id")
    if text is None:
        raise ClusterJoinError(f"{log_dir / META_PROPERTIES} has no directory.id: format the log dirs with "
                               "`samsa format` (or Kafka's kafka-storage.sh format)")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _leadership_changed(services: BrokerServices) -> Callable[[list[PartitionEpoch], list[PartitionEpoch]], None]:
    """ReplicaManager.on_leadership_change in a cluster (Kafka's onLeadershipChange): the
    coordinators load the partitions of their topics this broker now leads and unload those it no
    longer leads, and the share partitions of partitions no longer led here go."""
    coordinators = ((services.groups, OFFSETS_TOPIC), (services.transactions, TRANSACTION_STATE_TOPIC),
                    (services.share_coordinator, SHARE_GROUP_STATE_TOPIC))

    def changed(led: list[PartitionEpoch], resigned: list[PartitionEpoch]) -> None:
        for service, topic in coordinators:
            ours = [[(index, epoch) for (name, index), epoch in changes if name == topic] for changes in (led, resigned)]
            if ours[0] or ours[1]:
                service.on_leadership_change(*ours)
        services.share_partitions.drop_stale()
    return changed


class _LogJobs:
    """The periodic jobs on the logs, which Kafka's LogManager schedules: retention, deleting
    files, flushes, checkpoints, producer expiration and the log cleaner's threads."""

    def __init__(self, log_manager: LogManager, config: KafkaConfig, disk_limiter: trio.CapacityLimiter) -> None:
        self._logs = log_manager
        self._config = config
        self._disk_limiter = disk_limiter  # fsync, retention, checkpoints: one at a time

    async def retention(self) -> None:
        await trio.to_thread.run_sync(self._logs.cleanup, wall_clock_ms(), limiter=self._disk_limiter)

    async def delete_due_files(self) -> None:
        """Kafka's kafka-delete-logs and delete-file tasks: a deleted partition's directory, and a
        segment renamed `.deleted` (by retention, truncation or the cleaner), go once their
        file.delete.delay.ms has passed, not at the next retention check (up to
        log.retention.check.interval.ms later: their disk space and page cache held meanwhile).
        Looks at least once a second, in the event loop (no I/O); deletes in a worker thread."""
        while True:
            due_in = self._logs.file_deletion_due_in(wall_clock_ms())
            if due_in is not None and due_in <= 0:
                try:
                    await trio.to_thread.run_sync(self._logs.delete_due_files, wall_clock_ms(),
                                                  limiter=self._disk_limiter)
                except Exception:
                    log.exception("deleting files failed")
                    await trio.sleep(1)
                continue
            await trio.sleep(min(due_in or _FILE_DELETION_POLL_MS, _FILE_DELETION_POLL_MS) / 1000)

    async def flush(self) -> None:
        await trio.to_thread.run_sync(self._logs.flush_dirty, wall_clock_ms(), limiter=self._disk_limiter)

    async def checkpoint(self) -> None:
        await trio.to_thread.run_sync(self._logs.checkpoint, limiter=self._disk_limiter)

    async def expire_producers(self) -> None:
        self._logs.remove_expired_producers(wall_clock_ms(), self._config.get_int("producer.id.expiration.ms"))

    async def clean_logs(self, cleaner: LogCleaner, limiter: trio.CapacityLimiter) -> None:
        """One log cleaner thread: clean the dirtiest log, or wait log.cleaner.backoff.ms. The
        log.cleaner.* configs are read before every turn: they may be changed dynamically."""
        while True:
            cleaner.reconfigure(CleanerConfig.from_broker_config(self._config.get))
            try:
                cleaned = await trio.to_thread.run_sync(cleaner.clean_filthiest_log, limiter=limiter)
            except Exception:
                log.exception("log cleaner failed")
                cleaned = False
            if not cleaned:
                await trio.sleep(cleaner.config.backoff_ms / 1000)


async def _every(interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
    """Run `job` every `interval_ms` (10 ms at least), logging its failures."""
    interval = max(interval_ms, 10) / 1000
    while True:
        await trio.sleep(interval)
        try:
            await job()
        except Exception:
            log.exception("periodic job %s failed", job.__name__)


def error_response(api_key: int, code: int) -> Message | None:
    """A response carrying `code` at the top level, for apis that have a top-level error code."""
    response = response_class(api_key)()
    if "error_code" in response._fields:
        response.error_code = code
        return response
    return None
