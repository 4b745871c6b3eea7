"""KafkaZkClient: the broker's ZooKeeper operations, on kazoo, in Kafka 3.9's layout (wire/zk_data.py).

Kazoo's calls block on its own connection thread: each one here runs in a worker thread
(trio.to_thread), so the event loop never waits on ZooKeeper. Session events come from kazoo's
thread and reach trio through a memory channel (`session_events`).

What Kafka's KafkaZkClient does and this one does the same way: the chroot of `zookeeper.connect`
created first through a client without it; znodes Kafka creates without data (null, not empty)
likewise; the broker's ephemeral created and filled in one multi (so its data version is 1,
as Kafka's CheckedEphemeral leaves it), its czxid the broker epoch; /brokers/seqid's data version
as the sequence of generated broker ids.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from ...wire import zk_data
from ..cluster_join import ClusterJoinError

log = logging.getLogger("samsa.zk")


class ZooKeeperClientTimeoutException(ClusterJoinError):
    """No connection to any server of zookeeper.connect within zookeeper.connection.timeout.ms."""


class BrokerIdInUse(ClusterJoinError):
    """/brokers/ids/<id> exists, owned by another session: another broker runs with this id."""


@dataclass(frozen=True)
class ZkConnect:
    """zookeeper.connect: `host:port[,host:port...][/chroot]`."""

    hosts: str
    chroot: str  # "" for the root

    @classmethod
    def parse(cls, connect: str) -> ZkConnect:
        slash = connect.find("/")
        if slash < 0:
            return cls(connect, "")
        chroot = connect[slash:].rstrip("/")
        return cls(connect[:slash], chroot)

    def __str__(self) -> str:
        return self.hosts + self.chroot


@dataclass(frozen=True)
class Registration:
    broker_epoch: int  # the czxid of /brokers/ids/<id>
    session_id: int


class KafkaZkClient:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect = ZkConnect.parse(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._zk: KazooClient | None = None
        self._session_send, self.session_events = trio.open_memory_channel[str](16)
        self._trio_token: trio.lowlevel.TrioToken | None = None

    # -- connection --------------------------------------------------------------------------------

    def _client(self, hosts: str) -> KazooClient:
        # Reconnect attempts forever, at most a second apart (kazoo's default backs off to an hour),
        # as ZooKeeper's own client keeps trying each server of the ensemble.
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                           connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
                           logger=logging.getLogger("samsa.zk.kazoo"))

    def _start(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise ZooKeeperClientTimeoutException(
                f"Timed out waiting for connection to ZooKeeper at {self.connect} after "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)") from None

    async def start(self) -> None:
        """Connect, the chroot created first if missing (KafkaZkClient's createChrootIfNecessary);
        ZooKeeperClientTimeoutException after zookeeper.connection.timeout.ms."""
        self._trio_token = trio.lowlevel.current_trio_token()
        await trio.to_thread.run_sync(self._connect)

    def _connect(self) -> None:
        if self.connect.chroot:
            root = self._client(self.connect.hosts)
            self._start(root)
            try:
                create_recursive(root, self.connect.chroot, None, throw_if_path_exists=False)
            finally:
                root.stop()
                root.close()
        zk = self._client(str(self.connect))
        self._start(zk)
        zk.add_listener(self._state_changed)
        self._zk = zk
        log.info("Connected to ZooKeeper at %s (session 0x%x)", self.connect, zk.client_id[0])

    def _state_changed(self, state: str) -> None:
        # kazoo's thread: must not block. LOST is an expired session; CONNECTED after it a new one.
        if self._trio_token is None:
            return
        try:
            self._trio_token.run_sync_soon(self._deliver_state, state)
        except trio.RunFinishedError:
            pass

    def _deliver_state(self, state: str) -> None:
        try:
            self._session_send.send_nowait(state)
        except (trio.WouldBlock, trio.ClosedResourceError):
            pass  # a backlog of transitions: the latest connection state is what matters

    async def wait_for_new_session(self, current_session: int, on_state=None) -> None:
        """Return when the client is connected with a session other than `current_session` (the old
        one expired and kazoo made a new one); `on_state(state)` sees every connection state met
        meanwhile (kazoo's SUSPENDED: disconnected, the session may live on; LOST: expired;
        CONNECTED)."""
        while True:
            if self.connected and self.session_id != current_session:
                return
            state = await self.session_events.receive()
            if state == KazooState.LOST:
                log.warning("ZooKeeper session 0x%x expired", current_session)
            if on_state is not None:
                on_state(state)

    @property
    def connected(self) -> bool:
        return self._zk is not None and self._zk.state == KazooState.CONNECTED

    @property
    def session_id(self) -> int:
        assert self._zk is not None
        return self._zk.client_id[0] if self._zk.client_id else 0

    async def close(self) -> None:
        zk, self._zk = self._zk, None
        if zk is not None:
            zk.remove_listener(self._state_changed)
            await trio.to_thread.run_sync(_stop, zk)
        self._session_send.close()

    async def call(self, fn, *args):
        """`fn(kazoo_client, *args)` on a worker thread: the blocking ZooKeeper calls off the event
        loop (the controller composes its multi-ops this way)."""
        assert self._zk is not None, "not started"
        return await trio.to_thread.run_sync(fn, self._zk, *args)

    # -- cluster ----------------------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        """ZkData.PersistentZkPaths, each created without data where missing."""
        def create_all(zk: KazooClient) -> None:
            for path in zk_data.PERSISTENT_ZK_PATHS:
                create_recursive(zk, path, None, throw_if_path_exists=False)
        await self.call(create_all)

    async def create_or_get_cluster_id(self, proposed: str) -> str:
        def create_or_get(zk: KazooClient) -> str:
            try:
                create_recursive(zk, zk_data.CLUSTER_ID, zk_data.encode_cluster_id(proposed))
                return proposed
            except NodeExistsError:
                data, _ = zk.get(zk_data.CLUSTER_ID)
                return zk_data.decode_cluster_id(data)
        return await self.call(create_or_get)

    async def generate_broker_sequence_id(self) -> int:
        """The next version of /brokers/seqid (1, 2, ...): Kafka adds reserved.broker.max.id to it."""
        def generate(zk: KazooClient) -> int:
            while True:
                try:
                    return zk.set(zk_data.BROKER_SEQUENCE_ID, b"", -1).version
                except NoNodeError:
                    create_recursive(zk, zk_data.BROKER_SEQUENCE_ID, b"", throw_if_path_exists=False)
        return await self.call(generate)

    # -- brokers ----------------------------------------------------------------------------------

    async def register_broker(self, broker: zk_data.BrokerRegistration) -> Registration:
        """Create the broker's ephemeral znode; BrokerIdInUse if another session holds it, as Kafka
        3.9's CheckedEphemeral (a broker restarted before its killed process's session expired does
        not start; its caller starts it again). One this session holds already is taken as is."""
        path = zk_data.broker_path(broker.broker_id)
        data = zk_data.encode_broker(broker)

        def register(zk: KazooClient) -> Registration:
            while True:
                session = zk.client_id[0]
                txn = zk.transaction()
                txn.create(path, b"", ephemeral=True)  # Kafka's is null: kazoo's multi takes bytes only
                txn.set_data(path, data, 0)
                results = txn.commit()
                if not any(isinstance(r, Exception) for r in results):
                    return Registration(results[1].czxid, session)
                if not isinstance(results[0], NodeExistsError):
                    raise next(r for r in results if isinstance(r, Exception) and not _rolled_back(r))
                try:
                    _, stat = zk.get(path)
                except NoNodeError:
                    continue  # went away while we looked: create again
                if stat.ephemeralOwner == session:
                    return Registration(stat.czxid, session)
                raise BrokerIdInUse(
                    f"Error while creating ephemeral at {path}, node already exists and owner "
                    f"'0x{stat.ephemeralOwner:x}' does not match current session '0x{session:x}'")
        registration = await self.call(register)
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d", broker.broker_id,
                 path, ",".join(e.connection_string for e in broker.endpoints), registration.broker_epoch)
        return registration

    async def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """/config/<type>/<name>'s overrides, none when the znode is missing (AdminZkClient.fetchEntityConfig)."""
        data = await self._get(zk_data.config_entity_path(entity_type, entity_name))
        return {} if data is None else zk_data.decode_config_entity(data[0])

    async def create_topic(self, topic: str, topic_id: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> None:
        """AdminZkClient.createTopicWithAssignment: /config/topics/<t> (set or created; not atomic with
        the rest, as in Kafka), then /brokers/topics/<t>, which the controller watches.
        NodeExistsError when the topic exists."""
        config_path = zk_data.config_entity_path("topics", topic)
        config_data = zk_data.encode_config_entity(configs)
        topic_data = zk_data.encode_topic(zk_data.TopicAssignment(
            {p: zk_data.ReplicaAssignment(tuple(r)) for p, r in assignment.items()}, topic_id))

        def create(zk: KazooClient) -> None:
            try:
                zk.set(config_path, config_data)
            except NoNodeError:
                create_recursive(zk, config_path, config_data, throw_if_path_exists=False)
            create_recursive(zk, zk_data.topic_path(topic), topic_data)
        await self.call(create)
        log.info("Creating topic %s with configuration %s and initial partition assignment %s", topic, configs,
                 assignment)

    async def get_topic_assignment(self, topic: str) -> zk_data.TopicAssignment | None:
        data = await self._get(zk_data.topic_path(topic))
        return None if data is None else zk_data.decode_topic(data[0])

    async def set_topic_assignment(self, topic: str, assignment: zk_data.TopicAssignment) -> None:
        """KafkaZkClient.setTopicAssignment: the whole znode replaced (any version), its topic id kept."""
        data = zk_data.encode_topic(assignment)
        await self.call(lambda zk: zk.set(zk_data.topic_path(topic), data))

    async def mark_topic_for_deletion(self, topic: str) -> None:
        """AdminZkClient.deleteTopic: /admin/delete_topics/<t>, which the controller watches (already
        there: the deletion is under way, nothing to do)."""
        def mark(zk: KazooClient) -> None:
            create_recursive(zk, zk_data.delete_topic_path(topic), None, throw_if_path_exists=False)
        await self.call(mark)

    # -- shared metadata: /config entities, their change notifications, ACL znodes ---------------

    async def get_children(self, path: str, watch=None) -> list[str]:
        """The children of `path` ([] when it is missing); `watch` (called once, on kazoo's thread)
        when they change."""
        def children(zk: KazooClient) -> list[str]:
            try:
                return zk.get_children(path, watch=watch)
            except NoNodeError:
                if watch is not None:  # watch the parent's creation instead
                    zk.exists(path, watch=watch)
                return []
        return await self.call(children)

    async def get_data(self, path: str) -> tuple[bytes | None, int] | None:
        """The znode's data and data version, None when it is missing."""
        found = await self._get(path)
        return None if found is None else (found[0], found[1].version)

    async def change_entity_config(self, entity_type: str, sanitized_name: str, configs: dict[str, str],
                                   is_user_client_id: bool = False,
                                   changes_path: str = zk_data.CONFIG_CHANGES) -> None:
        """AdminZkClient.changeEntityConfig: the entity's znode set or created (a quota entity left
        empty and without children is deleted instead, as tryCleanQuotaNodes), then the
        config_change_<seq> notification under `changes_path` (/config/changes, which every
        broker's config manager watches; a group's go elsewhere: zk_data.GROUP_CONFIG_CHANGES)."""
        path = zk_data.config_entity_path(entity_type, sanitized_name)
        data = zk_data.encode_config_entity(configs)
        entity_path = f"{entity_type}/{sanitized_name}"

        def change(zk: KazooClient) -> None:
            if not (entity_type in ("clients", "users", "ips") and not configs
                    and _try_clean_quota_nodes(zk, entity_type, sanitized_name, is_user_client_id)):
                try:
                    zk.set(path, data)
                except NoNodeError:
                    try:
                        create_recursive(zk, path, data)
                    except NodeExistsError:
                        zk.set(path, data)
            create_recursive(zk, changes_path, None, throw_if_path_exists=False)
            zk.create(f"{changes_path}/{zk_data.CONFIG_CHANGE_PREFIX}", zk_data.encode_config_change(entity_path),
                      sequence=True)
        await self.call(change)

    async def write_resource_acls(self, path: str, data: bytes | None, version: int | None) -> int | None:
        """AclAuthorizer.updateResourceAcls' write: the resource znode created (version None), set
        at `version`, or deleted at it (data None). The new version, or None when the znode moved
        meanwhile (the caller reads it again and retries)."""
        def write(zk: KazooClient) -> int | None:
            try:
                if data is None:
                    if version is not None:
                        zk.delete(path, version=version)
                    return 0
                if version is None:
                    create_recursive(zk, path, data)
                    return 0
                return zk.set(path, data, version).version
            except (BadVersionError, NodeExistsError, NoNodeError):
                return None
        return await self.call(write)

    async def purge_obsolete_notifications(self, path: str, prefix: str, up_to: int, before_ms: int) -> None:
        """ZkNodeChangeNotificationListener.purgeObsoleteNotifications: notifications up to sequence
        `up_to` (already processed) created before `before_ms` are deleted (any broker may do it)."""
        def purge(zk: KazooClient) -> None:
            try:
                children = zk.get_children(path)
            except NoNodeError:  # the ACL change paths exist once an authorizer made them (AclAuthorizer)
                return
            for child in children:
                if not child.startswith(prefix) or int(zk_data.sequence_number(child, prefix)) > up_to:
                    continue
                node = f"{path}/{child}"
                try:
                    stat = zk.exists(node)
                    if stat is not None and stat.ctime < before_ms:
                        zk.delete(node, version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
        await self.call(purge)

    async def create_acl_change_notification(self, store_path: str, data: bytes) -> None:
        """KafkaZkClient.createAclChangeNotification: a persistent sequential acl_changes_<seq>."""
        def create(zk: KazooClient) -> None:
            create_recursive(zk, store_path, None, throw_if_path_exists=False)
            zk.create(f"{store_path}/{zk_data.ACL_CHANGE_PREFIX}", data, sequence=True)
        await self.call(create)
    async def create_persistent_path(self, path: str) -> None:
        """KafkaZkClient.createRecursive(path, throwIfPathExists = false), without data."""
        await self.call(lambda zk: create_recursive(zk, path, None, throw_if_path_exists=False))

    async def set_or_create_delegation_token(self, token_id: str, data: bytes) -> None:
        """KafkaZkClient.setOrCreateDelegationToken, then createTokenChangeNotification."""
        path = zk_data.delegation_token_path(token_id)

        def write(zk: KazooClient) -> None:
            try:
                zk.set(path, data)
            except NoNodeError:
                create_recursive(zk, path, data)
            _create_token_change_notification(zk, token_id)
        await self.call(write)

    async def delete_delegation_token(self, token_id: str) -> None:
        """KafkaZkClient.deleteDelegationToken (gone already is fine), then createTokenChangeNotification."""
        def delete(zk: KazooClient) -> None:
            try:
                zk.delete(zk_data.delegation_token_path(token_id), recursive=True)
            except NoNodeError:
                pass
            _create_token_change_notification(zk, token_id)
        await self.call(delete)

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """KafkaZkClient.propagateLogDirEvent: a persistent sequential
        /log_dir_event_notification/log_dir_event_<seq> naming this broker; the controller answers
        with LeaderAndIsr for its replicas. Returns the znode's path."""
        def create(zk: KazooClient) -> str:
            return zk.create(zk_data.log_dir_event_path(""), zk_data.encode_log_dir_event(broker_id), sequence=True)
        path = await self.call(create)
        log.debug("Added %s for broker %d", path, broker_id)
        return path

    async def new_producer_id_block(self, broker_id: int, size: int) -> zk_data.ProducerIdBlock:
        """The next block of producer ids, taken in `/latest_producer_id_block` (ZkProducerIdManager)."""
        return await self.call(new_producer_id_block, broker_id, size)

    def new_producer_id_block_blocking(self, broker_id: int, size: int) -> zk_data.ProducerIdBlock:
        """The same, blocking the caller until ZooKeeper answers."""
        assert self._zk is not None, "not started"
        return new_producer_id_block(self._zk, broker_id, size)

    async def _get(self, path: str):
        def get(zk: KazooClient):
            try:
                return zk.get(path)
            except NoNodeError:
                return None
        return await self.call(get)


def _create_token_change_notification(zk: KazooClient, token_id: str) -> None:
    """KafkaZkClient.createTokenChangeNotification: a persistent sequential token_change_<seq>
    holding the token id (createDelegationTokenPaths made its parent)."""
    create_recursive(zk, zk_data.DELEGATION_TOKEN_CHANGES, None, throw_if_path_exists=False)
    zk.create(f"{zk_data.DELEGATION_TOKEN_CHANGES}/{zk_data.DELEGATION_TOKEN_CHANGE_PREFIX}", token_id.encode(),
              sequence=True)


def _rolled_back(error: Exception) -> bool:
    return type(error).__name__ == "RolledBackError"


def create_recursive(zk: KazooClient, path: str, data: bytes | None, throw_if_path_exists: bool = True) -> None:
    """KafkaZkClient.createRecursive: missing parents are created without data."""
    try:
        zk.create(path, data)
    except NoNodeError:
        parent = path.rsplit("/", 1)[0]
        if parent:
            create_recursive(zk, parent, None, throw_if_path_exists=False)
        try:
            zk.create(path, data)
        except NodeExistsError:
            if throw_if_path_exists:
                raise
    except NodeExistsError:
        if throw_if_path_exists:
            raise


def _try_clean_quota_nodes(zk: KazooClient, entity_type: str, name: str, is_user_client_id: bool) -> bool:
    """AdminZkClient.tryCleanQuotaNodes: an emptied quota entity without children is deleted, with
    its user's `clients` node and the user's own when nothing else is left there. False when the
    entity has children (its znode is then set empty)."""
    path = zk_data.config_entity_path(entity_type, name)
    try:
        if zk.get_children(path):
            return False
    except NoNodeError:
        pass
    to_delete = path
    if is_user_client_id:
        user, client_id = name[:name.index("/")], name[name.rindex("/") + 1:]
        clients_path = zk_data.config_entity_path("users", f"{user}/clients")
        try:
            if zk.get_children(clients_path) == [client_id]:
                to_delete = clients_path
                user_path = zk_data.config_entity_path("users", user)
                user_data, _ = zk.get(user_path)
                if not zk_data.decode_config_entity(user_data) and zk.get_children(user_path) == ["clients"]:
                    to_delete = user_path
        except NoNodeError:
            pass
    log.info("Deleting zk node %s since node of entityType %s and entityName %s is empty.", to_delete,
             entity_type, name)
    try:
        zk.delete(to_delete, recursive=True)
    except NoNodeError:
        pass
    return True


def _stop(zk: KazooClient) -> None:
    zk.stop()
    zk.close()


def new_producer_id_block(zk: KazooClient, broker_id: int, size: int = 1000) -> zk_data.ProducerIdBlock:
    """ZkProducerIdManager.getNewProducerIdBlock: the block after the latest one, written at the
    version read (not checked against the controller epoch, as Kafka's); read again on a conflict.
    The controller takes blocks for Kafka 3.9 brokers (AllocateProducerIds), a Samsa broker its own."""
    while True:
        try:
            data, stat = zk.get(zk_data.LATEST_PRODUCER_ID_BLOCK)
        except NoNodeError:
            data, stat = None, None
        block = zk_data.next_producer_id_block(zk_data.decode_producer_id_block(data) if data else None, broker_id,
                                               size)
        encoded = zk_data.encode_producer_id_block(block)
        try:
            if stat is None:
                zk.create(zk_data.LATEST_PRODUCER_ID_BLOCK, encoded)
            else:
                zk.set(zk_data.LATEST_PRODUCER_ID_BLOCK, encoded, stat.version)
        except (BadVersionError, NodeExistsError):
            log.debug("Producer id block taken by another broker meanwhile; retrying")
            continue
        log.info("Acquired new producerId block %s by writing to Zk", block)
        return block
