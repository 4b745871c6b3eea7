"""A broker of a ZooKeeper cluster (`zookeeper.connect` set): how it joins at startup and stays
registered, in the steps of Kafka 3.9's KafkaServer.startup:

1. connect (the chroot created if missing), within zookeeper.connection.timeout.ms;
2. the persistent top-level paths, then /cluster/id: the one there, or a new one;
3. the broker id: broker.id if set, else the one in meta.properties, else generated
   (broker.id.generation.enable: reserved.broker.max.id + the next /brokers/seqid version);
4. meta.properties as a ZooKeeper-mode broker writes it: version=0, broker.id, cluster.id;
5. once the listeners are bound: the ephemeral /brokers/ids/<id>, made again after every session
   expiry (Kafka's controller sees a broker come back through it).

Disconnected from ZooKeeper, the broker serves on (its session may outlive the outage, and the
controller has not moved its leaders) and says so in its log. Once the session has expired, the
controller counts the broker as gone and may have elected other leaders: the broker stops acting as
leader (produces and fetches get NOT_LEADER_OR_FOLLOWER; an acks=all produce still waiting is
answered so, never acknowledged) until it has registered again, and the controller's LeaderAndIsr
for the new registration says what it leads. (Kafka 3.9's broker goes on leading until that
LeaderAndIsr; its acks=all is kept safe by the ISR change the controller refuses. Samsa does both.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import trio
from kazoo.client import KazooState
from kazoo.exceptions import KazooException

from ...storage.checkpoints import META_PROPERTIES, read_properties, write_properties
from ...wire import zk_data
from ..clock import wall_clock_ms
from ..config.kafka_config import ConfigError
from ..control_plane import UNKNOWN_BROKER_EPOCH
from ..cluster_join import ClusterJoinError
from .zk_client import BrokerIdInUse, KafkaZkClient, Registration

log = logging.getLogger("samsa.zk")
REGISTRATION_RETRY_BACKOFF_S = 1.0


class InconsistentClusterIdException(ClusterJoinError):
    pass


class InconsistentBrokerIdException(ClusterJoinError):
    pass


@dataclass
class ZkMembership:
    client: KafkaZkClient
    broker_id: int
    cluster_id: str
    # The czxid of the current /brokers/ids/<id> (Kafka's KafkaController.brokerEpoch): a
    # controller's request for an older one is stale. -1 until registered.
    broker_epoch: int = -1

    def is_broker_epoch_stale(self, in_request: int, request_name: str, request) -> bool:
        """Kafka's ZkSupport.isBrokerEpochStale, logged as KafkaApis does: only an older epoch is
        stale (a newer one is possible when the controller saw this broker's new registration before
        the broker learnt its czxid); UNKNOWN_BROKER_EPOCH (a request version without it) never is."""
        if in_request == UNKNOWN_BROKER_EPOCH or in_request >= self.broker_epoch:
            return False
        log.info("Received %s request with broker epoch %d smaller than the current broker epoch %d from "
                 "controller %d with epoch %d.", request_name, in_request, self.broker_epoch, request.controller_id,
                 request.controller_epoch)
        return True


async def join_cluster(config, log_dirs: list[Path], new_cluster_id) -> ZkMembership:
    """Steps 1 to 4; ClusterJoinError (a clear message, the broker exits 1) when refused."""
    session_timeout_ms = config.get("zookeeper.session.timeout.ms")
    client = KafkaZkClient(config.get("zookeeper.connect"), session_timeout_ms,
                           config.get("zookeeper.connection.timeout.ms") or session_timeout_ms)
    _check_broker_id_config(config)
    await client.start()
    try:
        await client.create_top_level_paths()
        cluster_id = await client.create_or_get_cluster_id(new_cluster_id())
        log.info("Cluster ID = %s", cluster_id)
        stored = await trio.to_thread.run_sync(_read_meta_properties, log_dirs)
        for directory, props in stored.items():
            if props.get("cluster.id") not in (None, cluster_id):
                raise InconsistentClusterIdException(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {props['cluster.id']} in "
                    f"{directory / META_PROPERTIES}. The broker is trying to join the wrong cluster. Configured "
                    f"zookeeper.connect may be wrong.")
        broker_id = await _broker_id(config, client, stored)
        await trio.to_thread.run_sync(_write_meta_properties, log_dirs, stored, broker_id, cluster_id)
    except BaseException:
        with trio.CancelScope(shield=True):
            await client.close()
        raise
    return ZkMembership(client, broker_id, cluster_id)


def _check_broker_id_config(config) -> None:
    if config.is_set("broker.id") and config.get("broker.id.generation.enable"):
        if not -1 <= config.broker_id <= config.get("reserved.broker.max.id"):
            raise ConfigError("broker.id", "broker.id must be greater than or equal to -1 and not greater than "
                                           "reserved.broker.max.id")


def _read_meta_properties(log_dirs: list[Path]) -> dict[Path, dict[str, str]]:
    return {d: props for d in log_dirs if (props := read_properties(d / META_PROPERTIES)) is not None}


async def _broker_id(config, client: KafkaZkClient, stored: dict[Path, dict[str, str]]) -> int:
    """KafkaServer.getOrGenerateBrokerId."""
    stored_ids = {int(i) for props in stored.values() if (i := props.get("broker.id") or props.get("node.id"))}
    if len(stored_ids) > 1:
        raise InconsistentBrokerIdException(
            f"Failed to match broker.id across log.dirs: they hold {sorted(stored_ids)}")
    stored_id = next(iter(stored_ids), None)
    configured = config.broker_id if config.is_set("broker.id") and config.broker_id >= 0 else None
    if configured is not None and stored_id is not None and stored_id != configured:
        raise InconsistentBrokerIdException(
            f"Configured broker.id {configured} doesn't match stored broker.id Some({stored_id}) in "
            "meta.properties. If you moved your data, make sure your configured broker.id matches. If you intend "
            "to create a new broker, you should remove all data in your data directories (log.dirs).")
    if configured is not None:
        return configured
    if stored_id is not None:
        return stored_id
    if config.get("broker.id.generation.enable"):
        return config.get("reserved.broker.max.id") + await client.generate_broker_sequence_id()
    return config.broker_id  # Samsa's default, 0


def _write_meta_properties(log_dirs: list[Path], stored: dict[Path, dict[str, str]], broker_id: int,
                           cluster_id: str) -> None:
    # In the order Kafka's Properties (a hash map) writes these three keys.
    wanted = {"broker.id": str(broker_id), "version": "0", "cluster.id": cluster_id}
    for directory in log_dirs:
        if stored.get(directory) != wanted:
            directory.mkdir(parents=True, exist_ok=True)
            write_properties(directory / META_PROPERTIES, wanted)


def registration_version(inter_broker_protocol_version: str) -> int:
    """BrokerInfo's JSON version: 5 from 2.7-IV0 (features), 4 from 0.10.0-IV1 (listener map), else 2."""
    ibp = _metadata_version(inter_broker_protocol_version)
    if ibp >= _metadata_version("2.7-IV0"):
        return 5
    if ibp >= _metadata_version("0.10.0-IV1"):
        return 4
    return 2


def _metadata_version(value: str) -> tuple[tuple[int, ...], int]:
    release, _, iv = value.partition("-IV")
    # A bare release ("3.9") is its latest IV.
    return tuple(int(p) for p in release.split(".")), int(iv) if iv else 1 << 16


def broker_registration(config, broker_id: int, endpoints: list[zk_data.EndPoint]) -> zk_data.BrokerRegistration:
    """What /brokers/ids/<id> holds: the advertised listeners (ports resolved), broker.rack, no
    supported features (a ZooKeeper-mode broker registers none)."""
    return zk_data.BrokerRegistration(
        broker_id, tuple(endpoints), rack=config.get("broker.rack"), features={}, jmx_port=-1,
        timestamp=wall_clock_ms(), version=registration_version(config.get("inter.broker.protocol.version")))


async def stay_registered(membership: ZkMembership, registration: zk_data.BrokerRegistration,
                          on_session_lost: Callable[[], None] = lambda: None,
                          on_registered_again: Callable[[], None] = lambda: None,
                          *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Register (BrokerIdInUse when another broker has this id: the broker does not start), then
    register again each time the session expires and kazoo opens a new one. `on_session_lost()`:
    the session expired (the broker is unregistered); `on_registered_again()`: registered with the
    new one."""
    client = membership.client
    current = await client.register_broker(registration)
    membership.broker_epoch = current.broker_epoch
    task_status.started(current)
    broker_id = registration.broker_id
    timeout_ms = client.session_timeout_ms

    def session_state(state: str) -> None:
        if state == KazooState.SUSPENDED:
            log.warning("Broker %d lost its connection to ZooKeeper at %s: it serves on until its session expires "
                        "(zookeeper.session.timeout.ms=%d), but the controller cannot reach it meanwhile",
                        broker_id, client.connect, timeout_ms)
        elif state == KazooState.LOST:
            log.warning("Broker %d's ZooKeeper session expired: it registers again; it leads what it led until the "
                        "controller says otherwise", broker_id)
            on_session_lost()
        elif state == KazooState.CONNECTED and client.connected and client.session_id == current.session_id:
            log.info("Broker %d reconnected to ZooKeeper, session 0x%x kept", broker_id, current.session_id)

    while True:
        await client.wait_for_new_session(current.session_id, session_state)
        log.info("New ZooKeeper session 0x%x: registering broker %d again", client.session_id, broker_id)
        current = await _register_again(client, registration, current)
        membership.broker_epoch = current.broker_epoch
        on_registered_again()


async def _register_again(client: KafkaZkClient, registration: zk_data.BrokerRegistration,
                          previous: Registration) -> Registration:
    while True:
        try:
            return await client.register_broker(replace(registration, timestamp=wall_clock_ms()))
        except BrokerIdInUse as e:
            log.error("%s; the broker stays unregistered until its next session", e)
            return replace(previous, session_id=client.session_id)
        except KazooException as e:  # the new session is gone again, or the connection dropped: retry
            log.warning("Registering broker %d failed (%r); retrying", registration.broker_id, e)
            await trio.sleep(REGISTRATION_RETRY_BACKOFF_S)
