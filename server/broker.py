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
from pathlib import Path

import trio

from ..coordinator.group_coordinator import OFFSETS_TOPIC
from ..coordinator.producer_id_manager import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from ..coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC
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
from .context import BrokerServices, CloseConnection, RequestContext
from .zookeeper.controlled_shutdown import controlled_shutdown
from .handlers import ListenerType, load_handlers
from .handlers.api_versions import unsupported_version_response
from .heap import freeze_long_lived_objects
from .replication.log_dir_failure_handler import handle_log_dir_failures
from .metadata.admin_manager import AdminManager
from .metadata.cache import BrokerInfo, MetadataCache
from .metadata.local_admin import LocalAdminManager
from .metadata.local_cache import LocalMetadataCache
from .metadata.image import MetadataStore, load_or_import
from .metrics.request_metrics import RequestMetrics
from .metrics.sources import LoadedBroker
from .network.socket_server import Connection, ConnectionClosed, Endpoint, open_listener, serve_listener
from .config.dynamic_broker_config import (
    apply_cluster_broker_configs,
    load_dynamic_broker_configs,
    write_formatted_dynamic_defaults,
)
from .replication.fetch_session import FetchSessionCache
from .coordinators.group_service import GroupService, random_member_uuid
from .coordinators.txn_service import TxnService
from .zookeeper.membership import ZkMembership, broker_registration, join_cluster, stay_registered
from .zookeeper.admin_manager import ZkAdminManager
from .zookeeper.control_plane import ZkControlPlane
from .zookeeper.controller import ZkController
from .zookeeper.metadata_cache import ZkMetadataCache
from .zookeeper.shared_metadata import ZkSharedMetadata
from .zookeeper.producer_ids import ZkProducerIdBlocks
from .replication.replica_manager import ReplicaManager
from .security.authenticator import AuthenticationFailed
from .network.connection_quotas import ConnectionQuotas
from .network.listeners import listener_securities
from .security.scram import stored_credential
from .throttle import BrokerQuotas, connection_throttle_ms, finish_request, wait_unmuted

log = logging.getLogger("samsa.broker")

_SIZE = struct.Struct(">i")
# How often, at least, the broker looks for deleted logs and segments due for removal (their delay
# may be any length, and one deleted meanwhile is due at its own time).
_FILE_DELETION_POLL_MS = 1000
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


class Broker:
    def __init__(self, config) -> None:
        self.config = config
        self.node_id: int = config.node_id
        self.handlers = load_handlers()
        self.log_dirs = [Path(d).resolve() for d in config.log_dirs]
        # Built by _load, once the logs and the metadata are read:
        self.log_manager: LogManager | None = None
        self.metadata: MetadataStore | None = None
        self.authorizer: StandardAuthorizer | None = None  # None: authorizer.class.name is empty
        self.replica_manager: ReplicaManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.groups: GroupService | None = None
        self.quotas: BrokerQuotas | None = None
        self.transactions: TxnService | None = None
        self.services: BrokerServices | None = None  # what handlers use of all this
        self.endpoints: list[Endpoint] = []
        self.advertised: dict[str, BrokerInfo] = {}
        self.cluster_id = ""
        self.zookeeper: ZkMembership | None = None  # in a ZooKeeper cluster (zookeeper.connect)
        self.alter_partitions: AlterPartitionManager | None = None  # in a cluster: ISR changes to the controller
        self.zk_shared: ZkSharedMetadata | None = None  # in a cluster: configs, quotas, SCRAM, ACLs in ZooKeeper
        self.controller: ZkController | None = None  # in a cluster: runs for controller
        self.zk_metadata: ZkMetadataCache | None = None  # in a cluster: what the controller said
        self.zk_producer_id_blocks: ZkProducerIdBlocks | None = None  # in a cluster: producer ids from ZooKeeper
        self._in_flight = 0
        self._connections: set[Connection] = set()
        self._drained: trio.Event | None = None  # set when the last request in flight ends, at shutdown
        self.started = trio.Event()
        self.fetch_sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"))
        self.disk_limiter = trio.CapacityLimiter(1)  # fsync, retention, checkpoints: one at a time
        self.listener_security = listener_securities(
            config, lambda user, mechanism: stored_credential(self._shared_metadata().scram_credentials, user, mechanism))
        self.connection_quotas = ConnectionQuotas(config)
        self.request_metrics = RequestMetrics()
        # KIP-714; its collect() is a Prometheus collector of what clients push.
        self.client_telemetry = ClientTelemetry(config.get("telemetry.max.bytes"))
        self.metrics_port: int | None = None  # the endpoint's port once it listens
        self.loaded_broker: LoadedBroker | None = None  # what the metrics report on, once the logs are loaded
        self.recovered = False  # the logs are loaded and recovered: /healthz
        self.registered = False  # in a cluster, registered in ZooKeeper (with recovered: /readyz)

    # --- lifecycle ----------------------------------------------------------------------------

    def _load(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.log_manager = LogManager(self.log_dirs, self.config.log_config(), wall_clock_ms,
                                      producer_id_expiration_ms=self.config.get("producer.id.expiration.ms"),
                                      cleaner_config=CleanerConfig.from_broker_config(self.config.get),
                                      on_all_log_dirs_failed=halt)
        formatting = not self.log_manager.is_formatted()
        self.cluster_id = self.log_manager.ensure_meta_properties(self.node_id, new_cluster_id)
        self.metadata = metadata = load_or_import(self.log_dirs, self.cluster_id)
        if formatting and not self.config.is_set("zookeeper.connect"):
            # Kafka 4's `kafka-storage format` writes it; a ZooKeeper-mode Kafka 3.9 broker has no such step.
            write_formatted_dynamic_defaults(self.config, metadata)
        if self.zookeeper is None:  # in a cluster they are ZooKeeper's, applied once read (_run)
            load_dynamic_broker_configs(self.config, metadata, self.log_manager, self.node_id)
            # Client-metrics subscriptions: a ZooKeeper-mode Kafka 3.9 broker has none.
            for name, subscription in stored_subscriptions(metadata).items():
                self.client_telemetry.update_subscription(name, subscription)
        # In a cluster the ACLs, quotas and SCRAM credentials are ZooKeeper's, read once it is running (_run).
        shared = self.zk_shared = None if self.zookeeper is None else ZkSharedMetadata(
            self.zookeeper.client, self.node_id, self._topic_configs_changed, lambda: self.quotas.refresh(),
            self._acls_changed, lambda: apply_cluster_broker_configs(self.services))
        self.authorizer = new_authorizer(self.config, metadata.acls if shared is None else [])
        if self.zookeeper is not None:  # blocks from /latest_producer_id_block, unique across the cluster
            self.zk_producer_id_blocks = ZkProducerIdBlocks(self.zookeeper.client, self.node_id, PRODUCER_ID_BLOCK_SIZE)
            self.producer_ids = ProducerIdManager(self.zk_producer_id_blocks.allocate_block)
        else:
            self.producer_ids = ProducerIdManager(metadata.allocate_producer_id_block)
        self.quotas = BrokerQuotas(self.config, metadata.client_quotas if shared is None else shared.client_quotas)
        self.replica_manager = ReplicaManager(self.log_manager, metadata, self.config,
                                              on_topics_changed=self._topics_changed)
        zk_metadata = None if self.zookeeper is None else ZkMetadataCache(self.node_id, metadata, shared)
        self.groups = GroupService(self.config, metadata, self.replica_manager, self.disk_limiter, wall_clock_ms,
                                   random_member_uuid, cluster=zk_metadata)
        self.transactions = TxnService(self.config, metadata, self.replica_manager, self.disk_limiter,
                                       self.producer_ids.generate_producer_id, self.groups.complete_transaction,
                                       wall_clock_ms, cluster=zk_metadata)
        metadata_cache: MetadataCache
        admin: AdminManager
        control_plane = None
        if zk_metadata is not None:
            assert self.zookeeper is not None and shared is not None
            self.zk_metadata = metadata_cache = zk_metadata
            admin = ZkAdminManager(self.zookeeper.client, zk_metadata, shared)
            control_plane = ZkControlPlane(self.zookeeper, zk_metadata)
            self.alter_partitions = AlterPartitionManager(self.zookeeper, zk_metadata, self.config)
            self.replica_manager.isr_change_listener = self.alter_partitions.submit
            self.replica_manager.on_leadership_change = self._coordinator_leadership_changed
            self.controller = ZkController(self.zookeeper, self.config)
        else:
            replicas = self.replica_manager
            metadata_cache = LocalMetadataCache(metadata, self.node_id, self.advertised,
                                                lambda topic, index: replicas.get(topic, index).leader_epoch)
            admin = LocalAdminManager()
        self.services = BrokerServices(
            config=self.config, node_id=self.node_id, cluster_id=self.cluster_id, log_dirs=self.log_dirs,
            log_manager=self.log_manager, metadata=metadata, metadata_cache=metadata_cache, admin=admin,
            listener_type=ListenerType.BROKER if self.zookeeper is None else ListenerType.ZK_BROKER,
            replica_manager=self.replica_manager,
            groups=self.groups, transactions=self.transactions, producer_ids=self.producer_ids, quotas=self.quotas,
            authorizer=self.authorizer, fetch_sessions=self.fetch_sessions, disk_limiter=self.disk_limiter,
            advertised=self.advertised, client_telemetry=self.client_telemetry,
            connection_quotas=self.connection_quotas, control_plane=control_plane, controller=self.controller)
        self.loaded_broker = LoadedBroker(self.replica_manager, self.log_manager, self.groups, self._controller_counts)
        self.log_manager.startup({name: self.replica_manager.topic_log_config(topic)
                                  for name, topic in metadata.topics.items()},
                                 {name: topic.topic_id for name, topic in metadata.topics.items()})
        self.replica_manager.load()

    def _shared_metadata(self):
        """Where ACLs, quotas and SCRAM credentials are kept: ZooKeeper's in a cluster, else the image."""
        return self.metadata if self.zk_shared is None else self.zk_shared

    def _topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        """A topic's overrides changed in ZooKeeper: the metadata cache and the logs here take them."""
        assert self.zk_metadata is not None
        self.zk_metadata.set_topic_configs(topic, configs)
        self.replica_manager.apply_topic_configs(topic, configs)

    def _acls_changed(self, acls) -> None:
        """The cluster's ACLs changed in ZooKeeper: the authorizer, when one is set, takes them."""
        if self.authorizer is not None:
            self.authorizer.set_acls(acls)

    def _coordinator_leadership_changed(self, led: list[tuple[tuple[str, int], int]],
                                        resigned: list[tuple[tuple[str, int], int]]) -> None:
        """Kafka's onLeadershipChange: the coordinators load the partitions of their topics this
        broker now leads and unload those it no longer leads."""
        for service, topic in ((self.groups, OFFSETS_TOPIC), (self.transactions, TRANSACTION_STATE_TOPIC)):
            ours = [[(index, epoch) for (name, index), epoch in changes if name == topic] for changes in (led, resigned)]
            if ours[0] or ours[1]:
                service.on_leadership_change(*ours)

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

    def _controller_counts(self) -> tuple[int, int]:
        """The controller gauges: (1 if active here, partitions without a leader as it sees them)."""
        if self.controller is None or self.zk_metadata is None:
            return 1, 0  # a single broker is its own controller and leads every partition it has
        if not self.controller.is_active:
            return 0, 0
        return 1, sum(1 for states in self.zk_metadata.partition_states.values()
                      for state in states.values() if state.leader < 0)

    def _topics_changed(self) -> None:
        """A topic was created, deleted or grew: consumer groups subscribed to it rebalance."""
        self.groups.topics_changed()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        started_at = elapsed_ns()
        async with trio.open_nursery() as nursery:
            if self.config.get("metrics.port"):  # first: /healthz answers 503 while the logs recover
                from .metrics.http_server import MetricsEndpoint, serve_metrics
                endpoint = MetricsEndpoint(self.metrics, lambda: self.recovered, self._ready)
                self.metrics_port = await nursery.start(serve_metrics, endpoint, self.config.get("metrics.host"),
                                                        self.config.get("metrics.port"))
            try:
                await self._run_member(started_at, task_status)
            finally:
                nursery.cancel_scope.cancel()

    def _ready(self) -> bool:
        """/readyz: recovered and, in a cluster, registered in ZooKeeper (not since the session
        expired and before registering again: the controller counts the broker as gone meanwhile)."""
        if not self.recovered:
            return False
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
        if self.config.get("zookeeper.connect"):
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
        await trio.to_thread.run_sync(self._load)
        self.recovered = True
        if self.zk_shared is not None:
            await self.zk_shared.load()
            apply_cluster_broker_configs(self.services)
            self.quotas.refresh()
            if self.authorizer is not None:
                self.authorizer.set_acls(self.zk_shared.acl_bindings())
        async with trio.open_nursery() as services:
            await services.start(handle_log_dir_failures, self.log_manager.failure_channel, self.replica_manager,
                                 None if self.zookeeper is None else self.zookeeper.client, self.node_id)
            await services.start(self.groups.run)  # groups and offsets loaded before any request
            await services.start(self.transactions.run)  # then transactions, whose markers may complete offsets
            await services.start(self.replica_manager.run)  # replica fetchers, ISR expiration
            if self.alter_partitions is not None:
                await services.start(self.alter_partitions.run)  # ISR changes to the controller
            if self.zk_shared is not None:
                await services.start(self.zk_shared.run)  # /config/changes and ACL change notifications
            if self.zk_producer_id_blocks is not None:
                await services.start(self.zk_producer_id_blocks.run)  # a spare block of producer ids
            listeners = []
            for listener in self.config.listeners:
                ep = Endpoint(listener.name, listener.host, listener.port, listener.security_protocol)
                sock = await open_listener(ep)
                ep.port = sock.getsockname()[1]  # resolves port 0
                self.endpoints.append(ep)
                listeners.append((sock, ep))
            for adv in self.config.advertised_listeners:
                port = adv.port
                if port == 0:
                    port = next(e.port for e in self.endpoints if e.listener == adv.name)
                self.advertised[adv.name] = BrokerInfo(self.node_id, adv.host or "localhost", port,
                                                       self.config.get("broker.rack"))
            if self.zookeeper is not None:
                await services.start(stay_registered, self.zookeeper, broker_registration(
                    self.config, self.node_id, self._advertised_endpoints()),
                    self.zookeeper_session_lost, self.registered_again)
                self.registered = True
                await services.start(self.controller.run)  # registered first, as KafkaServer starts its controller
            async with trio.open_nursery() as connections:
                for sock, ep in listeners:
                    services.start_soon(serve_listener, sock, ep, self._serve_connection, connections,
                                        (self.config.get("socket.send.buffer.bytes"),
                                         self.config.get("socket.receive.buffer.bytes")),
                                        self.connection_quotas)
                services.start_soon(self._periodic_jobs)
                log.info("[KafkaServer id=%d] started (%.2fs) on %s", self.node_id,
                         (elapsed_ns() - started_at) / 1e9,
                         ", ".join(f"{e.listener}://{e.host}:{e.port}" for e in self.endpoints))
                freeze_long_lived_objects()  # what startup loaded
                self.started.set()
                task_status.started(self)
                try:
                    await trio.sleep_forever()
                finally:
                    with trio.CancelScope(shield=True):
                        await self._shutdown(services, connections)

    async def controlled_shutdown(self) -> None:
        """Before a shutdown in a ZooKeeper cluster (controlled.shutdown.enable): the controller moves
        this broker's leaders away while it still serves (server/zookeeper/controlled_shutdown.py)."""
        if self.zookeeper is None or not self.started.is_set() or not self.config.get("controlled.shutdown.enable"):
            return
        assert self.zk_metadata is not None
        await controlled_shutdown(self.zookeeper, self.zk_metadata, self.config)

    def _advertised_endpoints(self) -> list[zk_data.EndPoint]:
        return [zk_data.EndPoint(adv.name, self.advertised[adv.name].host, self.advertised[adv.name].port,
                                 adv.security_protocol) for adv in self.config.advertised_listeners]

    async def _shutdown(self, services: trio.Nursery, connections: trio.Nursery) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.node_id)
        services.cancel_scope.cancel()  # stop accepting and periodic jobs
        with trio.move_on_after(self.config.get("controlled.shutdown.retry.backoff.ms") / 1000 + 5):
            if self._in_flight:
                self._drained = trio.Event()
                await self._drained.wait()  # requests in flight finish
        connections.cancel_scope.cancel()
        if self.replica_manager is not None:
            self.replica_manager.wake_all()
        if self.log_manager is not None:
            await trio.to_thread.run_sync(self.log_manager.shutdown)
        log.info("[KafkaServer id=%d] shut down completed", self.node_id)

    async def _periodic_jobs(self) -> None:
        async with trio.open_nursery() as nursery:
            # Idle and authentication timeouts: checked each second (a tenth of a shorter idle time).
            nursery.start_soon(self._every, min(1000, self.config.get("connections.max.idle.ms") // 10),
                               self._close_idle_connections)
            nursery.start_soon(self._every, self.config.get("log.retention.check.interval.ms"),
                               self._retention)
            nursery.start_soon(self._delete_due_files)
            nursery.start_soon(self._every, self.config.get("log.flush.scheduler.interval.ms"),
                               self._flush)
            nursery.start_soon(self._every, self.config.get("log.flush.offset.checkpoint.interval.ms"),
                               self._checkpoint)
            nursery.start_soon(self._every, PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, self._expire_producers)
            if self.log_manager.cleaner is not None:
                # log.cleaner.threads as it is now, dynamic configs applied; a later change of it
                # takes effect at the next start.
                threads = self.config.get("log.cleaner.threads")
                limiter = trio.CapacityLimiter(max(threads, 1))
                for _ in range(threads):
                    nursery.start_soon(self._clean_logs, limiter)

    async def _every(self, interval_ms: int, job) -> None:
        interval = max(interval_ms, 10) / 1000
        while True:
            await trio.sleep(interval)
            try:
                await job()
            except Exception:
                log.exception("periodic job %s failed", job.__name__)

    async def _retention(self) -> None:
        await trio.to_thread.run_sync(self.log_manager.cleanup, wall_clock_ms(), limiter=self.disk_limiter)

    async def _delete_due_files(self) -> None:
        """Kafka's kafka-delete-logs and delete-file tasks: a deleted partition's directory, and a
        segment renamed `.deleted` (by retention, truncation or the cleaner), go once their
        file.delete.delay.ms has passed, not at the next retention check (up to
        log.retention.check.interval.ms later: their disk space and page cache held meanwhile).
        Looks at least once a second, in the event loop (no I/O); deletes in a worker thread."""
        while True:
            due_in = self.log_manager.file_deletion_due_in(wall_clock_ms())
            if due_in is not None and due_in <= 0:
                try:
                    await trio.to_thread.run_sync(self.log_manager.delete_due_files, wall_clock_ms(),
                                                  limiter=self.disk_limiter)
                except Exception:
                    log.exception("deleting files failed")
                    await trio.sleep(1)
                continue
            await trio.sleep(min(due_in or _FILE_DELETION_POLL_MS, _FILE_DELETION_POLL_MS) / 1000)

    async def _flush(self) -> None:
        await trio.to_thread.run_sync(self.log_manager.flush_dirty, wall_clock_ms(), limiter=self.disk_limiter)

    async def _checkpoint(self) -> None:
        await trio.to_thread.run_sync(self.log_manager.checkpoint, limiter=self.disk_limiter)

    async def _expire_producers(self) -> None:
        self.log_manager.remove_expired_producers(wall_clock_ms(), self.config.get("producer.id.expiration.ms"))

    async def _clean_logs(self, limiter: trio.CapacityLimiter) -> None:
        """One log cleaner thread: clean the dirtiest log, or wait log.cleaner.backoff.ms. The
        log.cleaner.* configs are read before every turn: they may be changed dynamically."""
        cleaner = self.log_manager.cleaner
        while True:
            cleaner.reconfigure(CleanerConfig.from_broker_config(self.config.get))
            try:
                cleaned = await trio.to_thread.run_sync(cleaner.clean_filthiest_log, limiter=limiter)
            except Exception:
                log.exception("log cleaner failed")
                cleaned = False
            if not cleaned:
                await trio.sleep(cleaner.config.backoff_ms / 1000)

    # --- requests -----------------------------------------------------------------------------

    async def _serve_connection(self, conn: Connection) -> None:
        max_frame = self.config.get("socket.request.max.bytes")
        idle_timeout = self.config.get("connections.max.idle.ms") / 1000
        try:
            refused_ms = connection_throttle_ms(self.quotas, conn.client_host)
            if refused_ms:
                await trio.sleep(refused_ms / 1000)  # closed unread once throttled, as Kafka does
                return
            await self.listener_security[conn.listener.listener].start(conn)
            # Cancelled by _close_idle_connections while it waits too long for a request: cheaper
            # than a deadline per request, and a request being served is never cancelled by it.
            with conn.idle_scope:
                self._connections.add(conn)
                while True:
                    auth = conn.authenticator
                    conn.idle_deadline = min(loop_time() + idle_timeout, auth.deadline)
                    if conn.muted_until:  # a muted connection may idle out too
                        await wait_unmuted(conn)
                    frame = await conn.read_frame(*auth.receive_limit(max_frame))
                    received_ns = elapsed_ns()
                    conn.idle_deadline = math.inf
                    if conn.idle_scope.cancel_called:  # the deadline passed as the request came in
                        break
                    self._in_flight += 1
                    try:
                        ctx, request, response, encoded = await self._process(conn, frame)
                        send_ns = elapsed_ns()
                        if encoded is not None:
                            await conn.send_response(encoded)
                        if ctx is not None:
                            self.request_metrics.record(ctx, request, response, received_ns, send_ns, elapsed_ns())
                        # A large frame's memory is read into again once unreferenced: the request's
                        # records are views of it.
                        frame = request = response = encoded = None
                        if conn.authenticator.failure is not None:  # answered; now closed, as Kafka does, after a delay
                            self.request_metrics.authentication_failed(conn.listener.listener)
                            log.info("Failed authentication with /%s (channelId=%s) (%s)", conn.client_host, conn.id,
                                     conn.authenticator.failure)
                            await trio.sleep(self.config.get("connection.failed.authentication.delay.ms") / 1000)
                            return
                    finally:
                        self._in_flight -= 1
                        if self._in_flight == 0 and self._drained is not None:
                            self._drained.set()
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
            conn.close()

    async def _close_idle_connections(self) -> None:
        now = loop_time()
        for conn in self._connections:
            if conn.idle_deadline <= now:
                conn.idle_scope.cancel()

    async def _process(self, conn: Connection, frame: bytearray):
        """(context, request, response, the response encoded): the first three None for a bare
        SASL token, the last two None when no response is sent (an acks=0 produce)."""
        auth = conn.authenticator
        if auth.expects_raw_token:  # after a v0 SaslHandshake: a bare SASL token, answered bare
            token = auth.evaluate_raw_token(frame, loop_time())
            return None, None, None, bytes(_SIZE.pack(len(token))) + token
        try:
            header, pos = decode_request_header(frame)
        except CodecError as e:
            raise CodecError(f"malformed request header: {e}") from e
        api_key, version = header.request_api_key, header.request_api_version
        auth.admit(api_key, version, loop_time())
        ctx = RequestContext(self.services, conn, api_key, version, header.correlation_id, header.client_id,
                             auth.principal, request_size=len(frame), started_ns=elapsed_ns())
        handler = self.handlers.get(api_key)
        if (handler is None or not handler.min_version <= version <= handler.max_version
                or not handler.served(self.services.listener_type)):
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer an unknown ApiVersions version with v0 and our range of it.
                return None, None, None, encode_response(unsupported_version_response(), 0, header.correlation_id)
            raise CodecError(f"unsupported api {api_key} version {version} from client {header.client_id!r}")
        request = request_class(api_key).decode(frame, version, pos)
        debug = request_log.isEnabledFor(logging.DEBUG)
        if debug:
            request_log.debug("%s v%d (correlation id %d) from %s: %r", type(request).__name__, version,
                              header.correlation_id, conn.id, request)
        try:
            response = await handler.handle(ctx, request)
        except (UnsupportedVersionError, ConnectionClosed, CloseConnection):
            raise
        except Exception as e:
            log.exception("error handling %s v%d from %s", type(request).__name__, version, header.client_id)
            response = error_response(api_key, ErrorCode.UNKNOWN_SERVER_ERROR)
            if response is None:
                raise CodecError("no error response for this api; closing the connection") from e
        finish_request(ctx, response)
        if debug:
            request_log.debug("completed %s v%d (correlation id %d) from %s: %r", type(request).__name__, version,
                              header.correlation_id, conn.id, response)
        if response is None:
            return ctx, request, None, None
        return ctx, request, response, encode_response(response, version, header.correlation_id, FrameBuffer())



def error_response(api_key: int, code: int):
    """A response carrying `code` at the top level, for apis that have a top-level error code."""
    response = response_class(api_key)()
    if "error_code" in response._fields:
        response.error_code = code
        return response
    return None
