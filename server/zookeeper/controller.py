"""The controller's shell (Kafka 3.9's KafkaController's I/O half): runs for controller through
the ephemeral /controller znode, and while elected reads ZooKeeper, watches it, serves the
controller's requests and carries out what the pure controller (coordinator/controller/) decides.

- Election (KafkaZkClient.registerControllerAndIncrementControllerEpoch): /controller_epoch created
  at 0 where missing; then one multi creates the ephemeral /controller and sets /controller_epoch
  to epoch + 1 at the version read. A /controller already there: another broker is controller;
  its deletion (the watch) starts another election.
- Every event is handled in order, one at a time (ControllerEventManager): ZooKeeper watches
  (/controller, /brokers/ids children, /brokers/topics children and each topic's data,
  /admin/delete_topics children, /admin/preferred_replica_election, /admin/reassign_partitions,
  /log_dir_event_notification children), AlterPartition, ControlledShutdown, ElectLeaders, AlterPartitionReassignments,
  ListPartitionReassignments, StopReplica and LeaderAndIsr answers, the auto leader rebalance's timer. Kazoo calls run in worker threads, never on the event loop; watch callbacks come from
  kazoo's thread and reach trio through the event channel.
- Every ZooKeeper write is a multi with a check of /controller_epoch's version: refused, this broker
  is no longer controller and resigns (its channels close: it sends nothing more).
- A new ZooKeeper session (the old one expired, /controller with it): resign, run again.
- A connection lost and found again within the session: kazoo dropped every watch meanwhile (it
  does not restore them as the Java client's SetWatches does), so every watched path is read again.
- A broker whose log dir failed writes /log_dir_event_notification/log_dir_event_<seq>
  (KafkaZkClient.propagateLogDirEvent): the controller reads the brokers named, deletes the
  notifications, and asks those brokers about their replicas (LeaderAndIsr); the replicas
  answering KAFKA_STORAGE_ERROR go offline. A new controller deletes the notifications it finds
  unhandled: its LeaderAndIsr to every replica asks the same question.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from ...coordinator.controller.actions import (CreatePartitionStates, DeleteTopic, DeleteTopicDeletionMarker,
                                              RemoveZkReassignments, SendLeaderAndIsr, SendStopReplica,
                                              SendUpdateMetadata, UpdatePartitionStates, WriteTopicAssignment)
from ...coordinator.controller.context import LiveBroker
from ...coordinator.controller.kafka_controller import KafkaController
from ...wire import zk_data
from ...wire.errors import ErrorCode
from ..clock import wall_clock_ms
from ...wire.zk_data import topic_uuid
from .controller_channel import ControllerChannelManager
from .zk_client import create_recursive, new_producer_id_block

log = logging.getLogger("samsa.controller")
RETRY_BACKOFF_S = 1.0
# The paths whose watches the controller's events come from (a topic's own znode is watched when
# TOPICS is read); /controller first, so that a broker elected meanwhile reads the rest as controller.
_WATCHED_PATHS = (zk_data.CONTROLLER, zk_data.BROKER_IDS, zk_data.TOPICS, zk_data.DELETE_TOPICS,
                  zk_data.PREFERRED_REPLICA_ELECTION, zk_data.LOG_DIR_EVENT_NOTIFICATION, zk_data.REASSIGN_PARTITIONS)


class ControllerMoved(Exception):
    """A write conditioned on the controller epoch's version was refused: another controller was elected."""


@dataclass
class _Request:
    """A broker's request for the controller, answered through `done`."""

    kind: str
    args: tuple
    done: trio.Event
    result: object = None


class ZkController:
    def __init__(self, membership, config) -> None:
        self._membership = membership
        self._client = membership.client
        self.broker_id = membership.broker_id
        self._config = config
        self.controller: KafkaController | None = None  # set while this broker is the controller
        self._channels: ControllerChannelManager | None = None
        self._events_send, self._events = trio.open_memory_channel[object](math.inf)
        self._token: trio.lowlevel.TrioToken | None = None
        self._kazoo_state = KazooState.CONNECTED  # the client is connected when the controller starts

    @property
    def is_active(self) -> bool:
        return self.controller is not None

    # -- requests from handlers -----------------------------------------------------------------

    async def call(self, kind: str, *args):
        """Run `kind` (a method of KafkaController) among the controller's events; None when this
        broker is not the controller (the handler answers NOT_CONTROLLER)."""
        if not self.is_active:
            return None
        request = _Request(kind, args, trio.Event())
        self._events_send.send_nowait(request)
        await request.done.wait()
        return request.result

    # -- the event loop -------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        await self._zk(lambda zk: zk.add_listener(self._session_state))
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._auto_rebalance)
            try:
                await self._elect_retrying(nursery)
                async for event in self._events:
                    try:
                        await self._handle(event, nursery)
                    except ControllerMoved:
                        log.info("Controller moved to another broker: broker %d resigns", self.broker_id)
                        self._resign()
                        await self._elect_retrying(nursery)
                    except KazooException as e:
                        log.warning("ZooKeeper failed the controller (%r): resigning, then running again", e)
                        await self._move_controller(nursery)
                    except Exception:
                        # As Kafka's ControllerEventManager: an event's failure does not stop the
                        # controller; resigning and running again rebuilds its context from ZooKeeper.
                        log.exception("Error processing controller event %r: resigning, then running again", event)
                        await self._move_controller(nursery)
            finally:
                self._resign()

    async def _handle(self, event, nursery: trio.Nursery) -> None:
        if isinstance(event, _Request):
            try:
                if self.controller is None:
                    event.result = None
                else:
                    event.result = await self._request(event, self.controller)
            finally:
                event.done.set()
            return
        kind, path = event
        if kind == "session":
            # The session expired. This event may come after a ZooKeeper error already made this
            # broker run again and win /controller in its new session: resigning then, and finding
            # its own /controller at the election, it would hold the znode while acting as no
            # controller, and no other broker could be elected (a mixed-load soak found the cluster
            # without a controller for 90 s). So give /controller up if this session holds it.
            await self._move_controller(nursery)
        elif kind == "reconnected":
            # The connection came back with the session kept. kazoo dropped every watch when the
            # connection was lost (it does not send ZooKeeper's SetWatches as the Java client does;
            # each watcher got a NONE event): every watched path is read again, which sets its watch
            # again and handles what changed meanwhile (a soak found a controller that never saw a
            # broker register after a one-second disconnection).
            for watched in _WATCHED_PATHS:
                await self._handle(("watch", watched), nursery)
        elif path == zk_data.CONTROLLER:
            if self.is_active and await self._controller_id() != self.broker_id:
                self._resign()
            if not self.is_active:
                await self._elect(nursery)
        elif self.controller is None:
            return
        elif path == zk_data.BROKER_IDS:
            brokers = await self._zk(self._read_brokers)
            channels = self._channels
            assert channels is not None  # made with the controller (_elect)
            for b in set(channels.brokers()) - set(brokers):
                channels.remove_broker(b)
            for b, live in brokers.items():
                if live.epoch != self.controller.ctx.live_brokers.get(b, live).epoch:
                    channels.remove_broker(b)  # bounced: a new connection to its new registration
                channels.add_broker(live.registration)
            await self._execute(self.controller.broker_change(brokers))
        elif path == zk_data.TOPICS or path.startswith(zk_data.TOPICS + "/"):
            topics, unclean = await self._zk(self._read_topics)
            await self._execute(self.controller.topics_changed(topics, unclean))
        elif path == zk_data.DELETE_TOPICS:
            topics = await self._zk(lambda zk: zk.get_children(zk_data.DELETE_TOPICS, watch=self._watch))
            await self._execute(self.controller.topic_deletion(set(topics)))
        elif path == zk_data.PREFERRED_REPLICA_ELECTION:
            await self._preferred_replica_election(self.controller)
        elif path == zk_data.LOG_DIR_EVENT_NOTIFICATION:
            await self._log_dir_event_notifications(self.controller)
        elif path == zk_data.REASSIGN_PARTITIONS:
            reassignments = await self._zk(self._read_zk_reassignments)
            if reassignments:
                await self._execute(self.controller.zk_reassignment(reassignments))

    async def _log_dir_event_notifications(self, controller: KafkaController) -> None:
        """processLogDirEventNotification: the brokers the notifications name, handled, then the
        notifications deleted (handled or not, as Kafka's `finally`)."""
        sequence_numbers = await self._zk(self._log_dir_event_sequence_numbers)
        try:
            brokers = await self._zk(_brokers_of_log_dir_events, sequence_numbers)
            if brokers:
                await self._execute(controller.log_dir_failure(brokers))
        finally:
            await self._zk(_delete_log_dir_events, controller.ctx.epoch_zk_version, sequence_numbers)

    def _log_dir_event_sequence_numbers(self, zk: KazooClient) -> list[str]:
        """getAllLogDirEventNotifications: the children's sequence numbers, the watch set again."""
        try:
            children = zk.get_children(zk_data.LOG_DIR_EVENT_NOTIFICATION, watch=self._watch)
        except NoNodeError:
            return []
        return sorted(zk_data.sequence_number(c, zk_data.LOG_DIR_EVENT_PREFIX) for c in children)

    def _read_zk_reassignments(self, zk: KazooClient) -> dict:
        """/admin/reassign_partitions (the watch set again), {} when absent."""
        if zk.exists(zk_data.REASSIGN_PARTITIONS, watch=self._watch) is None:
            return {}
        try:
            return zk_data.decode_reassign_partitions(zk.get(zk_data.REASSIGN_PARTITIONS)[0])
        except NoNodeError:
            return {}

    async def _preferred_replica_election(self, controller: KafkaController) -> None:
        """/admin/preferred_replica_election (kafka-preferred-replica-election.sh, older admin
        tools): the partitions it names elect their preferred replica, then the znode goes."""
        def read(zk: KazooClient):
            if zk.exists(zk_data.PREFERRED_REPLICA_ELECTION, watch=self._watch) is None:
                return None
            try:
                return zk_data.decode_preferred_replica_election(zk.get(zk_data.PREFERRED_REPLICA_ELECTION)[0])
            except NoNodeError:
                return None
        partitions = await self._zk(read)
        if partitions is None:
            return
        await self._execute(controller.elect_leaders(partitions)[1])
        await self._zk(_delete_paths, controller.ctx.epoch_zk_version, [zk_data.PREFERRED_REPLICA_ELECTION])

    async def _auto_rebalance(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds the controller
        looks for brokers leading too few of the partitions they are preferred for."""
        while True:
            await trio.sleep(self._config.get_int("leader.imbalance.check.interval.seconds"))
            if self.is_active and self._config.get_boolean("auto.leader.rebalance.enable"):
                self._events_send.send_nowait(_Request("auto_rebalance", (), trio.Event()))

    async def _request(self, request: _Request, controller: KafkaController):
        if request.kind in ("stop_replica_answered", "leader_and_isr_answered"):
            await self._execute(getattr(controller, request.kind)(*request.args))
            return None
        if request.kind == "auto_rebalance":
            imbalanced = controller.imbalanced_partitions(
                self._config.get_int("leader.imbalance.per.broker.percentage"))
            if imbalanced:
                log.info("Starting preferred replica leader election for partitions %s", imbalanced)
                await self._execute(controller.elect_leaders(imbalanced)[1])
            return None
        if request.kind == "allocate_producer_ids":
            return await self._allocate_producer_ids(controller, *request.args)
        result = getattr(controller, request.kind)(*request.args)
        *answer, actions = result
        await self._execute(actions)
        return tuple(answer)

    async def _allocate_producer_ids(self, controller: KafkaController, broker_id: int, broker_epoch: int):
        """KafkaController.processAllocateProducerIds: (error, block or None) for a live broker
        whose epoch is current, the block taken from /latest_producer_id_block."""
        live = controller.ctx.live_brokers.get(broker_id)
        if live is None:
            log.warning("Ignoring AllocateProducerIds due to unknown broker %d", broker_id)
            return ErrorCode.BROKER_ID_NOT_REGISTERED, None
        if live.epoch != broker_epoch:
            log.warning("Ignoring AllocateProducerIds due to stale broker epoch %d for broker %d",
                        broker_epoch, broker_id)
            return ErrorCode.STALE_BROKER_EPOCH, None
        try:
            return ErrorCode.NONE, await self._zk(new_producer_id_block, broker_id)
        except ValueError as e:
            log.error("Failed to allocate producer ids for broker %d: %s", broker_id, e)
            return ErrorCode.UNKNOWN_SERVER_ERROR, None

    # -- election -------------------------------------------------------------------------------

    async def _move_controller(self, nursery: trio.Nursery) -> None:
        """triggerControllerMove: resign, give up /controller if this session holds it, run again."""
        await self._give_up_controller()
        await self._elect_retrying(nursery)

    async def _give_up_controller(self) -> None:
        self._resign()

        def give_up(zk: KazooClient) -> None:
            stat = zk.exists(zk_data.CONTROLLER)
            if stat is not None and stat.ephemeralOwner == zk.client_id[0]:
                try:
                    zk.delete(zk_data.CONTROLLER, stat.version)
                except (NoNodeError, BadVersionError):
                    pass
        try:
            await self._zk(give_up)
        except KazooException as e:
            log.warning("Could not give up /controller (%r)", e)

    async def _elect_retrying(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                return await self._elect(nursery)
            except (KazooException, ControllerMoved) as e:
                log.warning("Running for controller failed (%r); trying again", e)
                await self._give_up_controller()
                await trio.sleep(RETRY_BACKOFF_S)

    async def _elect(self, nursery: trio.Nursery) -> None:
        """KafkaController.elect: the /controller watch set, then the election attempted."""
        elected = await self._zk(self._try_elect)
        if elected is None:
            return
        epoch, epoch_zk_version = elected
        log.info("Broker %d elected as the controller, with epoch %d (epoch zk version %d)", self.broker_id, epoch,
                 epoch_zk_version)
        brokers = await self._zk(self._read_brokers)
        topics, unclean = await self._zk(self._read_topics)
        states = await self._zk(self._read_states, topics)
        deleting = await self._zk(lambda zk: zk.get_children(zk_data.DELETE_TOPICS, watch=self._watch))
        reassignments = await self._zk(self._read_zk_reassignments)
        # onControllerFailover: the notifications found are deleted unhandled (the watch set).
        await self._zk(_delete_log_dir_events, epoch_zk_version, await self._zk(self._log_dir_event_sequence_numbers))
        controller = self.controller = KafkaController(
            self.broker_id, self._config.get_boolean("unclean.leader.election.enable"))
        channels = self._channels = ControllerChannelManager(
            nursery, self._config.inter_broker_listener_name, self._config.get_int("controller.socket.timeout.ms"),
            f"controller-{self.broker_id}", self._answered)
        for live in brokers.values():
            channels.add_broker(live.registration)
        await self._execute(controller.elected(epoch, epoch_zk_version, brokers, topics, states, unclean,
                                               deleting, reassignments))
        await self._preferred_replica_election(controller)

    def _try_elect(self, zk: KazooClient) -> tuple[int, int] | None:
        while True:
            if zk.exists(zk_data.CONTROLLER, watch=self._watch) is not None:
                return None
            try:
                data, stat = zk.get(zk_data.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    zk.create(zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(0))
                except NodeExistsError:
                    pass
                continue
            epoch = zk_data.decode_controller_epoch(data) + 1
            txn = zk.transaction()
            txn.create(zk_data.CONTROLLER, zk_data.encode_controller(
                zk_data.ControllerRegistration(self.broker_id, wall_clock_ms())), ephemeral=True)
            txn.set_data(zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(epoch), stat.version)
            results = txn.commit()
            if not any(isinstance(r, Exception) for r in results):
                zk.exists(zk_data.CONTROLLER, watch=self._watch)
                return epoch, results[1].version
            # Another broker won (the /controller create) or moved the epoch meanwhile: look again.

    async def _controller_id(self) -> int | None:
        def read(zk: KazooClient) -> int | None:
            try:
                data, _ = zk.get(zk_data.CONTROLLER, watch=self._watch)
            except NoNodeError:
                return None
            return zk_data.decode_controller(data).broker_id
        return await self._zk(read)

    def _resign(self) -> None:
        """onControllerResignation: stop sending; the requests waiting are answered NOT_CONTROLLER."""
        if self.controller is not None:
            log.info("Resigned as the controller (broker %d)", self.broker_id)
        self.controller = None
        if self._channels is not None:
            self._channels.close()
            self._channels = None

    # -- reading ZooKeeper ----------------------------------------------------------------------

    def _read_brokers(self, zk: KazooClient) -> dict[int, LiveBroker]:
        brokers = {}
        for child in zk.get_children(zk_data.BROKER_IDS, watch=self._watch):
            try:
                data, stat = zk.get(zk_data.broker_path(int(child)))
            except NoNodeError:
                continue
            brokers[int(child)] = LiveBroker(zk_data.decode_broker(int(child), data), stat.czxid)
        return dict(sorted(brokers.items()))

    def _read_topics(self, zk: KazooClient) -> tuple[dict[str, zk_data.TopicAssignment], dict[str, bool]]:
        topics, unclean = {}, {}
        for name in sorted(zk.get_children(zk_data.TOPICS, watch=self._watch)):
            try:
                data, _ = zk.get(zk_data.topic_path(name), watch=self._watch)
            except NoNodeError:
                continue
            topics[name] = zk_data.decode_topic(data)
            try:
                config, _ = zk.get(zk_data.config_entity_path("topics", name))
            except NoNodeError:
                continue
            value = zk_data.decode_config_entity(config).get("unclean.leader.election.enable")
            if value is not None:
                unclean[name] = value.strip().lower() == "true"
        return topics, unclean

    def _read_states(self, zk: KazooClient, topics: dict[str, zk_data.TopicAssignment]):
        states = {}
        for name, topic in topics.items():
            for p in topic.partitions:
                state = _read_state(zk, name, p)
                if state is not None:
                    states[(name, p)] = state
        return states

    # -- actions --------------------------------------------------------------------------------

    async def _execute(self, actions) -> None:
        for action in actions:
            if isinstance(action, (SendLeaderAndIsr, SendUpdateMetadata, SendStopReplica)):
                if self._channels is not None:
                    self._channels.send(action)
            elif isinstance(action, CreatePartitionStates):
                await self._zk(_create_states, action)
            elif isinstance(action, UpdatePartitionStates):
                conflicts = await self._zk(_update_states, action)
                for tp, state in conflicts.items():
                    log.warning("Partition %s-%d's state changed under the controller: now %s", tp[0], tp[1], state)
                    if self.controller is not None:  # still the controller, which wrote them
                        await self._execute(self.controller.partition_state_conflict(tp, state))
            elif isinstance(action, WriteTopicAssignment):
                await self._zk(_commit_checked, action.controller_epoch_zk_version, "set_data",
                               zk_data.topic_path(action.topic), zk_data.encode_topic(action.assignment))
            elif isinstance(action, RemoveZkReassignments):
                await self._zk(_remove_zk_reassignments, action)
            elif isinstance(action, DeleteTopic):
                await self._zk(_delete_topic, action)
            elif isinstance(action, DeleteTopicDeletionMarker):
                await self._zk(_delete_paths, action.controller_epoch_zk_version,
                               [zk_data.delete_topic_path(action.topic)])

    def _answered(self, action, response) -> None:
        """A broker answered (in a sender task): errors are logged; StopReplica answers of a
        deletion and LeaderAndIsr answers go back to the controller as events."""
        error = getattr(response, "error_code", ErrorCode.NONE)
        if error != ErrorCode.NONE:
            log.error("Received error %d in %s response from broker %d", error, type(response).__name__,
                      action.broker_id)
        if isinstance(action, SendLeaderAndIsr) and error == ErrorCode.NONE:
            errors = _leader_and_isr_errors(action, response)
            self._events_send.send_nowait(_Request("leader_and_isr_answered", (action.broker_id, errors),
                                                   trio.Event()))
        if isinstance(action, SendStopReplica) and any(p.delete for p in action.partitions):
            errors = {(p.topic, p.partition): error for p in action.partitions}
            if error == ErrorCode.NONE:
                errors.update({(p.topic_name, p.partition_index): p.error_code for p in response.partition_errors})
            self._events_send.send_nowait(_Request("stop_replica_answered", (action.broker_id, errors), trio.Event()))

    # -- kazoo ----------------------------------------------------------------------------------

    async def _zk(self, fn, *args):
        return await self._client.call(fn, *args)

    def _watch(self, event) -> None:
        """Kazoo's thread: a watch fired. Its path names the event; the handler reads again and
        sets the watch again."""
        if event.type == EventType.NONE:
            return
        self._from_kazoo(("watch", event.path))

    def _session_state(self, state: str) -> None:
        previous, self._kazoo_state = self._kazoo_state, state
        if state == KazooState.LOST:
            self._from_kazoo(("session", None))
        elif state == KazooState.CONNECTED and previous == KazooState.SUSPENDED:
            self._from_kazoo(("reconnected", None))

    def _from_kazoo(self, event) -> None:
        if self._token is None:
            return
        try:
            self._token.run_sync_soon(self._events_send.send_nowait, event)
        except trio.RunFinishedError:
            pass


def _leader_and_isr_errors(action: SendLeaderAndIsr, response) -> dict[tuple[str, int], int]:
    """LeaderAndIsrResponse.partitionErrors: by topic name before v5, by topic id from v5 (the
    ids the request carried name them; an unknown id is left out)."""
    errors = {(p.topic_name, p.partition_index): p.error_code for p in response.partition_errors or ()}
    names = {topic_uuid(topic_id): name for name, topic_id in action.topic_ids.items()}
    for topic in response.topics or ():
        name = names.get(topic.topic_id)
        if name is not None:
            errors.update({(name, p.partition_index): p.error_code for p in topic.partition_errors})
    return errors


def _brokers_of_log_dir_events(zk: KazooClient, sequence_numbers: list[str]) -> list[int]:
    """getBrokerIdsFromLogDirEvents: the broker each notification names (one gone meanwhile: none)."""
    brokers = []
    for sequence_number in sequence_numbers:
        try:
            data, _ = zk.get(zk_data.log_dir_event_path(sequence_number))
        except NoNodeError:
            continue
        brokers.append(zk_data.decode_log_dir_event(data))
    return brokers


def _delete_log_dir_events(zk: KazooClient, epoch_zk_version: int, sequence_numbers: list[str]) -> None:
    if sequence_numbers:
        _delete_paths(zk, epoch_zk_version, [zk_data.log_dir_event_path(n) for n in sequence_numbers])


def _read_state(zk: KazooClient, topic: str, partition: int) -> zk_data.PartitionState | None:
    try:
        data, stat = zk.get(zk_data.partition_state_path(topic, partition))
    except NoNodeError:
        return None
    return zk_data.decode_partition_state(data, stat.version)


def _commit_checked(zk: KazooClient, epoch_zk_version: int, operation: str, *args) -> list:
    """One multi: the controller epoch's version checked (checkControllerEpoch), then `operation`."""
    txn = zk.transaction()
    txn.check(zk_data.CONTROLLER_EPOCH, epoch_zk_version)
    getattr(txn, operation)(*args)
    results = txn.commit()
    if isinstance(results[0], BadVersionError) or isinstance(results[0], NoNodeError):
        raise ControllerMoved()
    return results[1:]


def _create_states(zk: KazooClient, action: CreatePartitionStates) -> None:
    for (topic, partition), state in action.states.items():
        create_recursive(zk, zk_data.partition_path(topic, partition), None, throw_if_path_exists=False)
        results = _commit_checked(zk, action.controller_epoch_zk_version, "create",
                                  zk_data.partition_state_path(topic, partition), zk_data.encode_partition_state(state))
        if isinstance(results[0], Exception):
            log.error("Cannot create the state of partition %s-%d: %r", topic, partition, results[0])


def _update_states(zk: KazooClient, action: UpdatePartitionStates) -> dict:
    conflicts = {}
    for (topic, partition), state in action.states.items():
        path = zk_data.partition_state_path(topic, partition)
        results = _commit_checked(zk, action.controller_epoch_zk_version, "set_data",
                                  path, zk_data.encode_partition_state(state), state.zk_version - 1)
        if isinstance(results[0], Exception):
            conflicts[(topic, partition)] = _read_state(zk, topic, partition)
    return conflicts


def _delete_topic(zk: KazooClient, action: DeleteTopic) -> None:
    _delete_paths(zk, action.controller_epoch_zk_version, [
        zk_data.topic_path(action.topic), zk_data.config_entity_path("topics", action.topic),
        zk_data.delete_topic_path(action.topic)])


def _delete_paths(zk: KazooClient, epoch_zk_version: int, paths: list[str]) -> None:
    _, stat = zk.get(zk_data.CONTROLLER_EPOCH)
    if stat.version != epoch_zk_version:
        raise ControllerMoved()
    for path in paths:
        try:
            zk.delete(path, recursive=True)
        except NoNodeError:
            pass


def _remove_zk_reassignments(zk: KazooClient, action: RemoveZkReassignments) -> None:
    """maybeRemoveFromZkReassignment: the znode rewritten without them, or deleted when empty."""
    try:
        data, stat = zk.get(zk_data.REASSIGN_PARTITIONS)
    except NoNodeError:
        return
    pending = zk_data.decode_reassign_partitions(data)
    remaining = {tp: r for tp, r in pending.items() if tp not in set(action.partitions)}
    if remaining == pending:
        return
    if remaining:
        _commit_checked(zk, action.controller_epoch_zk_version, "set_data", zk_data.REASSIGN_PARTITIONS,
                        zk_data.encode_reassign_partitions(remaining), stat.version)
    else:
        _commit_checked(zk, action.controller_epoch_zk_version, "delete", zk_data.REASSIGN_PARTITIONS, stat.version)
