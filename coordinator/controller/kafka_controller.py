"""Kafka 3.9's KafkaController with its partition and replica state machines, pure: each event
method changes the ControllerContext and returns the actions (ZooKeeper writes first, then the
requests to brokers) that carry the change out. The shell runs the actions in order and stops at
the first ZooKeeper write refused for a stale controller epoch (the controller resigns).

The shell assumes every conditioned write succeeds, as the controller's context does once its
multi returns: a state znode written goes to version zk_version + 1, one created to version 0.
A partition epoch moved by someone else comes back as `partition_state_conflict`.

What follows Kafka (the method each event mirrors is named in it): elected (onControllerFailover),
broker_change (processBrokerChange: onBrokerStartup, onBrokerFailure), topics_changed
(processTopicChange, processPartitionModifications: onNewPartitionCreation), topic_deletion
(TopicDeletionManager), alter_partition (processAlterPartition), controlled_shutdown
(doControlledShutdown), elect_leaders (onReplicaElection, preferred or unclean), log_dir_failure
(processLogDirEventNotification: onBrokerLogDirFailure), leader_and_isr_answered
(processLeaderAndIsrResponseReceived: onReplicasBecomeOffline for replicas in failed log dirs).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ...wire.errors import ErrorCode
from ...wire.zk_data import (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING, NO_LEADER, PartitionState,
                             ReplicaAssignment, TopicAssignment)
from . import election
from .actions import (Action, CreatePartitionStates, DeleteTopic, DeleteTopicDeletionMarker, LeaderAndIsrPartition,
                      RemoveZkReassignments, SendLeaderAndIsr, SendStopReplica, SendUpdateMetadata,
                      StopReplicaPartition, UpdateMetadataPartition, UpdatePartitionStates, WriteTopicAssignment)
from .context import ControllerContext, LiveBroker, TopicPartition

log = logging.getLogger("samsa.controller")
LEADER_DURING_DELETE = -2  # LeaderAndIsr.LeaderDuringDelete: UpdateMetadata's leader of a partition being deleted
EPOCH_DURING_DELETE = -2  # LeaderAndIsr.EpochDuringDelete: StopReplica's leader epoch for a deletion
UNKNOWN_BROKER_EPOCH = -1


@dataclass(frozen=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request, its topic already resolved."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


class KafkaController:
    def __init__(self, broker_id: int, unclean_leader_election_default: bool = False) -> None:
        self.broker_id = broker_id
        self.unclean_default = unclean_leader_election_default
        self.ctx = ControllerContext()

    # -- events ---------------------------------------------------------------------------------

    def elected(self, epoch: int, epoch_zk_version: int, brokers: Mapping[int, LiveBroker],
                topics: Mapping[str, TopicAssignment], states: Mapping[TopicPartition, PartitionState],
                unclean_overrides: Mapping[str, bool], topics_to_delete: Iterable[str],
                zk_reassignments: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> list[Action]:
        """onControllerFailover, with everything read from ZooKeeper: UpdateMetadata of every
        partition to every live broker, LeaderAndIsr of every partition to its live replicas, then
        leaders for the partitions that have none (new or offline), then the pending deletions."""
        ctx = self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version,
                                           live_brokers=dict(sorted(brokers.items())))
        # Which registration of each broker the new controller found tells a bounce it took for
        # live (registered again before this read) from one it will see (a broker change).
        log.info("Initialized broker epochs cache: %s", {b: live.epoch for b, live in ctx.live_brokers.items()})
        for name, topic in topics.items():
            self._add_topic(name, topic)
        ctx.states = dict(states)
        ctx.unclean_overrides = dict(unclean_overrides)
        batch = _Batch(self)
        batch.update_metadata(ctx.live_or_shutting_down(), sorted(ctx.assignments))
        actions = batch.send()
        for tp in sorted(ctx.states):
            if tp in ctx.assignments:
                batch.leader_and_isr(self._online_replicas(tp), tp)
        actions += batch.send()
        actions += self._trigger_online_partitions()
        # ReplicaStateMachine.startup: replicas on brokers not alive leave the ISRs.
        dead = sorted({r for a in ctx.assignments.values() for r in a.replicas} - set(ctx.live_brokers))
        actions += self._replicas_offline([tp for tp in sorted(ctx.states) if tp in ctx.assignments
                                           and tp[0] not in set(topics_to_delete)], dead)
        actions += self.topic_deletion(set(topics_to_delete))
        # initializePartitionReassignments: those in the topics' znodes resume, then /admin/reassign_partitions.
        for tp, a in sorted(ctx.assignments.items()):
            if _being_reassigned(a) and tp[0] not in ctx.topics_to_delete:
                actions += self._on_partition_reassignment(tp, a)
        if zk_reassignments:
            actions += self.zk_reassignment(zk_reassignments)
        return actions

    def broker_change(self, brokers: Mapping[int, LiveBroker]) -> list[Action]:
        """processBrokerChange: the children of /brokers/ids changed (new, bounced: a new epoch, dead)."""
        ctx = self.ctx
        current = ctx.live_brokers
        new = sorted(set(brokers) - set(current))
        dead = sorted(set(current) - set(brokers))
        bounced = sorted(b for b in set(brokers) & set(current) if brokers[b].epoch != current[b].epoch)
        if new or dead or bounced:
            log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                     new, dead, bounced, sorted(brokers))
        actions: list[Action] = []
        if new:
            for b in new:
                ctx.live_brokers[b] = brokers[b]
            actions += self._on_broker_startup(new)
        if bounced:
            for b in bounced:
                del ctx.live_brokers[b]
            actions += self._on_broker_failure(bounced)
            for b in bounced:
                ctx.live_brokers[b] = brokers[b]
            actions += self._on_broker_startup(bounced)
        if dead:
            for b in dead:
                del ctx.live_brokers[b]
            actions += self._on_broker_failure(dead)
        ctx.live_brokers = dict(sorted(ctx.live_brokers.items()))
        return actions

    def topics_changed(self, topics: Mapping[str, TopicAssignment],
                       unclean_overrides: Mapping[str, bool] | None = None) -> list[Action]:
        """processTopicChange and processPartitionModifications: new topics, and new partitions of
        known ones, get their state znodes and leaders; topics whose znode went are forgotten."""
        ctx = self.ctx
        known = ctx.topics()
        for gone in sorted(known - set(topics)):
            ctx.remove_topic(gone)
        known_partitions = set(ctx.assignments)
        for name, topic in topics.items():
            if name not in ctx.topics_to_delete:
                self._add_topic(name, topic)
        new_partitions = sorted(set(ctx.assignments) - known_partitions)
        if unclean_overrides:
            ctx.unclean_overrides.update(unclean_overrides)
        if not new_partitions:
            return []
        log.info("New partitions: %s", new_partitions)
        return self._on_new_partitions(new_partitions)

    def topic_deletion(self, topics: set[str]) -> list[Action]:
        """TopicDeletionManager.enqueueTopicsForDeletion and onTopicDeletion: UpdateMetadata with the
        partitions' leader -2 to every broker, StopReplica with delete to every live replica; the
        znodes go once every replica answered (replicas on dead brokers wait for them)."""
        ctx = self.ctx
        actions: list[Action] = []
        for topic in sorted(topics):
            if topic not in ctx.topics():
                log.info("Removing the deletion of topic %s, which does not exist", topic)
                actions.append(DeleteTopicDeletionMarker(topic, ctx.epoch_zk_version))
                continue
            if topic in ctx.topics_to_delete:
                continue
            ctx.topics_to_delete.add(topic)
            for tp in ctx.partitions_of(topic):
                ctx.deletion_pending.update((tp, r) for r in ctx.replicas(tp))
            batch = _Batch(self)
            batch.update_metadata(ctx.live_or_shutting_down(), ctx.partitions_of(topic))
            actions += batch.send()
        actions += self._resume_deletions(ctx.live_or_shutting_down())
        return actions

    def stop_replica_answered(self, broker_id: int, errors: Mapping[TopicPartition, int]) -> list[Action]:
        """A StopReplica with delete answered: the replicas deleted (NONE) are done; a topic with
        all its replicas done is removed from ZooKeeper (completeDeleteTopic)."""
        ctx = self.ctx
        for tp, error in errors.items():
            if error == ErrorCode.NONE:
                ctx.deletion_pending.discard((tp, broker_id))
        actions: list[Action] = []
        for topic in sorted(ctx.topics_to_delete):
            if not any(tp[0] == topic for tp, _ in ctx.deletion_pending):
                log.info("Deletion of topic %s successfully completed", topic)
                ctx.remove_topic(topic)
                actions.append(DeleteTopic(topic, ctx.epoch_zk_version))
        return actions

    def partition_state_conflict(self, tp: TopicPartition, state: PartitionState | None) -> list[Action]:
        """A conditioned state write was refused (someone else moved the partition epoch): take what
        the znode holds and elect again if its leader is not alive."""
        if state is None or tp not in self.ctx.assignments:
            return []
        self.ctx.states[tp] = state
        return self._trigger_online_partitions([tp])

    def alter_partition(self, broker_id: int, broker_epoch: int, items: list[AlterPartitionItem],
                        version: int) -> tuple[int, dict[TopicPartition, int | PartitionState], list[Action]]:
        """processAlterPartition: (top-level error, per partition an error or the state now held,
        actions). The ISR is written with the leader epoch unchanged."""
        ctx = self.ctx
        live = ctx.live_brokers.get(broker_id)
        if live is None or live.epoch != broker_epoch:
            log.info("Ignoring AlterPartition due to stale broker epoch %d of broker %d", broker_epoch, broker_id)
            return ErrorCode.STALE_BROKER_EPOCH, {}, []
        results: dict[TopicPartition, int | PartitionState] = {}
        accepted: dict[TopicPartition, PartitionState] = {}
        for item in items:
            tp = (item.topic, item.partition)
            current = ctx.states.get(tp)
            if current is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif item.partition_epoch > current.zk_version or item.leader_epoch > current.leader_epoch:
                results[tp] = ErrorCode.NOT_CONTROLLER  # the leader knows newer epochs than this controller
            elif item.leader_epoch < current.leader_epoch:
                results[tp] = ErrorCode.FENCED_LEADER_EPOCH
            elif (broker_id == current.leader and item.new_isr == current.isr
                  and item.leader_recovery_state == current.leader_recovery_state):
                results[tp] = current  # equalsAllowStalePartitionEpoch: already so
            elif item.partition_epoch < current.zk_version:
                results[tp] = ErrorCode.INVALID_UPDATE_VERSION
            elif item.leader_recovery_state == LEADER_RECOVERY_RECOVERING and len(item.new_isr) > 1:
                results[tp] = ErrorCode.INVALID_REQUEST
            elif (current.leader_recovery_state == LEADER_RECOVERY_RECOVERED
                  and item.leader_recovery_state == LEADER_RECOVERY_RECOVERING):
                results[tp] = ErrorCode.INVALID_REQUEST
            elif ineligible := set(item.new_isr) - ctx.live_broker_ids:
                log.info("Rejecting AlterPartition request from node %d for %s because it specified ineligible "
                         "replicas %s in the new ISR %s.", broker_id, tp, sorted(ineligible), list(item.new_isr))
                results[tp] = ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
            else:
                accepted[tp] = replace(current, leader=broker_id, isr=item.new_isr,
                                       leader_recovery_state=item.leader_recovery_state, controller_epoch=ctx.epoch)
        actions: list[Action] = []
        if accepted:
            actions.append(self._write_states(accepted))
            results.update({tp: ctx.states[tp] for tp in accepted})
        batch = _Batch(self)
        batch.update_metadata(ctx.live_or_shutting_down(), sorted({(i.topic, i.partition) for i in items}
                                                                  & set(ctx.assignments)))
        actions += batch.send()
        for tp in sorted(accepted):
            if tp in ctx.reassigning and self._reassignment_complete(tp, ctx.assignments[tp]):
                log.info("Target replicas %s have all caught up with the leader for reassigning partition %s",
                         list(_target(ctx.assignments[tp])), tp)
                actions += self._on_partition_reassignment(tp, ctx.assignments[tp])
        return ErrorCode.NONE, results, actions

    def log_dir_failure(self, broker_ids: Iterable[int]) -> list[Action]:
        """onBrokerLogDirFailure: /log_dir_event_notification named these brokers. Each gets
        LeaderAndIsr for every replica it holds (OnlineReplica to OnlineReplica); the replicas in a
        failed log dir answer KAFKA_STORAGE_ERROR (leader_and_isr_answered)."""
        ctx = self.ctx
        brokers = sorted(set(broker_ids))
        log.info("Handling log directory failure for brokers %s", ",".join(map(str, brokers)))
        batch = _Batch(self)
        for b in brokers:
            if b not in ctx.live_brokers:
                continue
            for tp in ctx.partitions_on_broker(b):
                if tp in ctx.states and tp[0] not in ctx.topics_to_delete:
                    batch.leader_and_isr([b], tp)
        return batch.send()

    def leader_and_isr_answered(self, broker_id: int, errors: Mapping[TopicPartition, int]) -> list[Action]:
        """processLeaderAndIsrResponseReceived: the replicas answering KAFKA_STORAGE_ERROR are in a
        failed log dir, those answering NONE are not (any more). The newly offline ones
        (onReplicasBecomeOffline): partitions they led elect a leader among the online replicas of
        the ISR, then they leave the ISRs (OfflineReplica: StopReplica without delete to them,
        LeaderAndIsr to the others)."""
        ctx = self.ctx
        if broker_id not in ctx.live_brokers:
            return []
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        offline = {tp for tp, e in errors.items() if e == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, e in errors.items() if e == ErrorCode.NONE}
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        newly_offline = sorted(tp for tp in current - previous if tp in ctx.assignments)
        if not newly_offline:
            return []
        log.info("Mark replicas %s on broker %d as offline", ",".join(f"{t}-{p}" for t, p in newly_offline),
                 broker_id)
        not_deleting = [tp for tp in newly_offline if tp[0] not in ctx.topics_to_delete]
        actions = self._trigger_online_partitions()
        batch = _Batch(self)
        for tp in not_deleting:
            batch.stop_replica([broker_id], tp, delete=False)
        actions += batch.send()
        offline_actions = self._replicas_offline(not_deleting, [broker_id])
        actions += offline_actions
        if not offline_actions and not any(isinstance(a, SendUpdateMetadata) for a in actions):
            batch.update_metadata(ctx.live_or_shutting_down(), [])  # the others learn of the offline replicas
            actions += batch.send()
        return actions

    def controlled_shutdown(self, broker_id: int, broker_epoch: int
                            ) -> tuple[int, list[TopicPartition], list[Action]]:
        """doControlledShutdown: (error, the partitions the broker still leads, actions). Its leaders
        move to another replica of the ISR; as a follower it is sent StopReplica and leaves the ISRs."""
        ctx = self.ctx
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_id in ctx.live_brokers \
                and broker_epoch < ctx.live_brokers[broker_id].epoch:
            log.info("Received controlled shutdown request from an old broker epoch %d for broker %d", broker_epoch,
                     broker_id)
            return ErrorCode.STALE_BROKER_EPOCH, [], []
        if broker_id not in ctx.live_brokers:
            return ErrorCode.BROKER_NOT_AVAILABLE, [], []
        log.info("Shutting down broker %d", broker_id)
        ctx.shutting_down.add(broker_id)
        to_act_on = [tp for tp in ctx.partitions_on_broker(broker_id)
                     if len(ctx.replicas(tp)) > 1 and tp in ctx.states and tp[0] not in ctx.topics_to_delete]
        led = [tp for tp in to_act_on if ctx.states[tp].leader == broker_id]
        followed = [tp for tp in to_act_on if ctx.states[tp].leader != broker_id]
        elected = {}
        for tp in led:
            state = election.elect_controlled_shutdown(ctx.states[tp], ctx.replicas(tp), ctx.live_brokers,
                                                       ctx.shutting_down)
            if state is not None:
                elected[tp] = state
        actions = self._elect(elected, recipients=lambda tp: [r for r in ctx.replicas(tp)
                                                              if ctx.is_replica_online(r, True)])
        batch = _Batch(self)
        for tp in followed:
            batch.stop_replica([broker_id], tp, delete=False)
        actions += batch.send()
        actions += self._replicas_offline(followed, [broker_id])
        remaining = sorted(tp for tp, s in ctx.states.items() if s.leader == broker_id and tp in ctx.assignments)
        return ErrorCode.NONE, remaining, actions

    def elect_leaders(self, partitions: Iterable[TopicPartition], unclean: bool = False
                      ) -> tuple[dict[TopicPartition, int], list[Action]]:
        """onReplicaElection (ElectLeaders, /admin/preferred_replica_election, the auto rebalance):
        per partition NONE (elected), ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION, or the
        strategy's failure. Preferred: the first replica of the assignment if alive and in the ISR
        (else PREFERRED_LEADER_NOT_AVAILABLE). Unclean: for a partition without a live leader, an
        offline election with unclean allowed (else ELIGIBLE_LEADERS_NOT_AVAILABLE)."""
        ctx = self.ctx
        results: dict[TopicPartition, int] = {}
        elected: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            if tp not in ctx.assignments or tp not in ctx.states or tp[0] in ctx.topics_to_delete:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            state = ctx.states[tp]
            if unclean:
                if ctx.is_replica_online(state.leader, True, tp):
                    results[tp] = ErrorCode.ELECTION_NOT_NEEDED
                    continue
                new = election.elect_offline(state, ctx.replicas(tp), ctx.online_brokers_for(tp), True)
                failure = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                if state.leader == ctx.replicas(tp)[0]:
                    results[tp] = ErrorCode.ELECTION_NOT_NEEDED
                    continue
                new = election.elect_preferred(state, ctx.replicas(tp), ctx.online_brokers_for(tp))
                failure = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            if new is None:
                results[tp] = failure
            else:
                elected[tp] = new
                results[tp] = ErrorCode.NONE
        return results, self._elect(elected)

    def reassign(self, reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
                 allow_replication_factor_change: bool = True
                 ) -> tuple[dict[TopicPartition, tuple[int, str | None]], list[Action]]:
        """processApiPartitionReassignment (AlterPartitionReassignments): per partition (error,
        message); None as the target cancels a reassignment (back to the original replicas).
        Without `allow_replication_factor_change` (v1, KIP-860) a target with another number of
        replicas than the partition has (or is being reassigned to) is refused, as Kafka 4's
        ReplicationControlManager.validatePartitionReplicationFactorUnchanged."""
        ctx = self.ctx
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            if tp not in ctx.assignments or tp[0] in ctx.topics_to_delete:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            invalid = None if target is None else self._invalid_replicas(tp, target)
            if invalid is not None:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, invalid)
                continue
            current = ctx.assignments[tp]
            if target is not None and not allow_replication_factor_change and len(_target(current)) != len(target):
                results[tp] = (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from "
                               f"{len(_target(current))} to {len(target)}")
                continue
            if target is None and not _being_reassigned(current):
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                continue
            to_reassign[tp] = _reassign_to(current, _origin(current) if target is None else target)
        actions: list[Action] = []
        if to_reassign:
            actions.append(RemoveZkReassignments(tuple(sorted(to_reassign)), ctx.epoch_zk_version))
        for tp, assignment in sorted(to_reassign.items()):
            actions += self._on_partition_reassignment(tp, assignment)
            results[tp] = (ErrorCode.NONE, None)
        return results, actions

    def zk_reassignment(self, reassignments: Mapping[TopicPartition, tuple[int, ...]]) -> list[Action]:
        """processZkPartitionReassignment (/admin/reassign_partitions): the valid ones start; the
        others leave the znode at once."""
        ctx = self.ctx
        actions: list[Action] = []
        refused = []
        for tp, target in sorted(reassignments.items()):
            if tp not in ctx.assignments or tp[0] in ctx.topics_to_delete or self._invalid_replicas(tp, target):
                refused.append(tp)
                continue
            actions += self._on_partition_reassignment(tp, _reassign_to(ctx.assignments[tp], target))
        if refused:
            actions.insert(0, RemoveZkReassignments(tuple(refused), ctx.epoch_zk_version))
        return actions

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None
                           ) -> tuple[dict[TopicPartition, ReplicaAssignment], list]:
        """processListPartitionReassignments: the ongoing reassignments, and no actions (the
        shell runs every request as answer..., actions)."""
        ctx = self.ctx
        chosen = sorted(ctx.reassigning) if partitions is None else partitions
        return {tp: ctx.assignments[tp] for tp in chosen if tp in ctx.assignments
                and _being_reassigned(ctx.assignments[tp])}, []

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(tp for tp in self.ctx.assignments if tp[0] not in self.ctx.topics_to_delete)

    def imbalanced_partitions(self, imbalance_percentage: int) -> list[TopicPartition]:
        """checkAndTriggerAutoLeaderRebalance: for each broker whose share of partitions not led by
        their preferred replica exceeds leader.imbalance.per.broker.percentage, those of its
        partitions whose preferred replica (it) is alive and in the ISR."""
        ctx = self.ctx
        chosen: list[TopicPartition] = []
        preferred: dict[int, list[TopicPartition]] = {}
        for tp, assignment in sorted(ctx.assignments.items()):
            if assignment.replicas and tp[0] not in ctx.topics_to_delete:
                preferred.setdefault(assignment.replicas[0], []).append(tp)
        for broker, tps in preferred.items():
            not_led = [tp for tp in tps if tp in ctx.states and ctx.states[tp].leader != broker]
            if tps and len(not_led) * 100 / len(tps) > imbalance_percentage:
                chosen += [tp for tp in not_led if ctx.is_replica_online(broker, tp=tp) and broker in ctx.states[tp].isr]
        return chosen

    def topic_name(self, topic_id: str) -> str | None:
        return next((name for name, i in self.ctx.topic_ids.items() if i == topic_id), None)

    # -- state machines -------------------------------------------------------------------------

    def _add_topic(self, name: str, topic: TopicAssignment) -> None:
        if topic.topic_id is not None:
            self.ctx.topic_ids[name] = topic.topic_id
        for p, assignment in topic.partitions.items():
            self.ctx.assignments[(name, p)] = assignment

    def _online_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.ctx.replicas(tp) if self.ctx.is_replica_online(r, tp=tp)]

    def _unclean(self, topic: str) -> bool:
        return self.ctx.unclean_overrides.get(topic, self.unclean_default)

    def _on_broker_startup(self, brokers: list[int]) -> list[Action]:
        """onBrokerStartup: the others learn of the new brokers, the new ones get everything, their
        replicas their LeaderAndIsr; partitions without a leader may get one now; deletions
        waiting for them go on."""
        ctx = self.ctx
        ctx.shutting_down.difference_update(brokers)
        for b in brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)  # registered again: its log dirs are online
        batch = _Batch(self)
        existing = [b for b in ctx.live_or_shutting_down() if b not in brokers]
        batch.update_metadata(existing, [])
        batch.update_metadata(brokers, sorted(ctx.assignments))
        actions = batch.send()
        for b in brokers:
            for tp in ctx.partitions_on_broker(b):
                if tp in ctx.states and tp[0] not in ctx.topics_to_delete:
                    batch.leader_and_isr([b], tp)
        actions += batch.send()
        actions += self._trigger_online_partitions()
        for tp in sorted(ctx.reassigning):
            if set(ctx.replicas(tp)) & set(brokers):
                actions += self._on_partition_reassignment(tp, ctx.assignments[tp])
        actions += self._resume_deletions(brokers)
        return actions

    def _on_broker_failure(self, brokers: list[int]) -> list[Action]:
        """onBrokerFailure: partitions led by them elect a new leader (offline election); then their
        replicas leave the ISRs (OfflineReplica)."""
        ctx = self.ctx
        ctx.shutting_down.difference_update(brokers)
        for b in brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        dead = set(brokers)
        offline_led = [tp for tp, s in sorted(ctx.states.items())
                       if s.leader in dead and tp in ctx.assignments and tp[0] not in ctx.topics_to_delete]
        actions = self._trigger_online_partitions(offline_led)
        followed = [tp for tp in sorted(ctx.assignments) if dead & set(ctx.replicas(tp))
                    and tp[0] not in ctx.topics_to_delete]
        actions += self._replicas_offline(followed, brokers)
        batch = _Batch(self)
        batch.update_metadata(ctx.live_or_shutting_down(), [])  # the others learn who is gone
        return actions + batch.send()

    def _replicas_offline(self, partitions: list[TopicPartition], brokers: list[int]) -> list[Action]:
        """ReplicaStateMachine to OfflineReplica: each broker leaves the partition's ISR (not the
        last member; a leader leaving makes the partition leaderless), the leader epoch bumped; the
        other replicas are told by LeaderAndIsr."""
        ctx = self.ctx
        gone = set(brokers)
        changed: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None or not gone & set(state.isr):
                continue
            isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r not in gone)
            if not isr:
                isr = state.isr[:1]
            leader = NO_LEADER if state.leader in gone else state.leader
            changed[tp] = election.new_leader_and_isr(state, leader, isr)
        return self._elect(changed, recipients=lambda tp: [r for r in self._online_replicas(tp) if r not in gone])

    def _trigger_online_partitions(self, partitions: Iterable[TopicPartition] | None = None) -> list[Action]:
        """PartitionStateMachine.triggerOnlinePartitionStateChange: new partitions (no state znode)
        get created, offline ones (no live leader) an offline election."""
        ctx = self.ctx
        candidates = sorted(ctx.assignments) if partitions is None else list(partitions)
        new = [tp for tp in candidates if tp not in ctx.states and tp[0] not in ctx.topics_to_delete]
        elected: dict[TopicPartition, PartitionState] = {}
        for tp in candidates:
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.topics_to_delete or ctx.is_replica_online(state.leader, True, tp):
                continue
            new_state = election.elect_offline(state, ctx.replicas(tp), ctx.online_brokers_for(tp),
                                               self._unclean(tp[0]))
            if new_state is None:
                log.error("Cannot elect a leader for partition %s: no live replica in the ISR %s (assignment %s, live "
                          "brokers %s)", tp, list(state.isr), list(ctx.replicas(tp)), sorted(ctx.live_broker_ids))
            else:
                elected[tp] = new_state
        return self._on_new_partitions(new) + self._elect(elected)

    def _on_new_partitions(self, partitions: list[TopicPartition]) -> list[Action]:
        """NewPartition to OnlinePartition: the first live replica leads, the live replicas are the
        ISR, leader epoch 0; the state znode created; LeaderAndIsr (is_new) to the live replicas."""
        ctx = self.ctx
        created: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            live = self._online_replicas(tp)
            if not live:
                log.error("Cannot bring partition %s online: no replica of %s is alive", tp, list(ctx.replicas(tp)))
                continue
            created[tp] = PartitionState(live[0], 0, tuple(live), ctx.epoch, zk_version=0)
        if not created:
            return []
        ctx.states.update(created)
        batch = _Batch(self)
        for tp in created:
            batch.leader_and_isr(self._online_replicas(tp), tp, is_new=True)
        return [CreatePartitionStates(created, ctx.epoch_zk_version), *batch.send()]

    def _elect(self, elected: dict[TopicPartition, PartitionState], recipients=None) -> list[Action]:
        """Write the new states, then LeaderAndIsr to the recipients (by default the live replicas)
        and UpdateMetadata to everyone."""
        if not elected:
            return []
        actions: list[Action] = [self._write_states(elected)]
        batch = _Batch(self)
        for tp in elected:
            batch.leader_and_isr(recipients(tp) if recipients else self._online_replicas(tp), tp)
        return actions + batch.send()

    def _write_states(self, states: dict[TopicPartition, PartitionState]) -> UpdatePartitionStates:
        ctx = self.ctx
        written = {tp: replace(s, controller_epoch=ctx.epoch, zk_version=ctx.states[tp].zk_version + 1)
                   for tp, s in states.items()}
        ctx.states.update(written)
        for tp, s in written.items():
            log.info("Partition %s-%d: leader %d, leader epoch %d, ISR %s, partition epoch %d", tp[0], tp[1], s.leader,
                     s.leader_epoch, list(s.isr), s.zk_version)
        return UpdatePartitionStates(written, ctx.epoch_zk_version)

    def _resume_deletions(self, brokers: Iterable[int]) -> list[Action]:
        """StopReplica with delete to the given live brokers for the replicas they still hold of
        topics being deleted."""
        ctx = self.ctx
        live = set(brokers) & set(ctx.live_brokers)
        batch = _Batch(self)
        for tp, broker in sorted(ctx.deletion_pending):
            if broker in live:
                batch.stop_replica([broker], tp, delete=True, leader_epoch=EPOCH_DURING_DELETE)
        return batch.send()


    # -- reassignment (KIP-455) -------------------------------------------------------------------

    def _invalid_replicas(self, tp: TopicPartition, replicas: tuple[int, ...]) -> str | None:
        """validateReplicas: the error message, None when valid."""
        if not replicas:
            return "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}"
        if any(r < 0 for r in replicas):
            return f"Invalid broker id in replica list: {list(replicas)}"
        adding = _reassign_to(self.ctx.assignments[tp], replicas).adding_replicas
        if not set(adding) <= self.ctx.live_broker_ids:
            return (f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, live broker "
                    f"list: {sorted(self.ctx.live_broker_ids)}")
        return None

    def _reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not _being_reassigned(assignment):
            return True
        state = self.ctx.states.get(tp)
        return state is not None and set(_target(assignment)) <= set(state.isr)

    def _on_partition_reassignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> list[Action]:
        """onPartitionReassignment. Phase one (the targets not all in the ISR): the assignment with
        adding and removing replicas written, the leader epoch bumped, LeaderAndIsr to every replica
        (the adding ones as new). Phase two (called again once the ISR has them all): the targets
        alone, a leader among them, the removed replicas stopped and deleted, the reassignment gone."""
        ctx = self.ctx
        actions: list[Action] = []
        current = ctx.assignments[tp]
        if current != assignment:
            ctx.assignments[tp] = assignment
            actions.append(self._write_assignment(tp[0]))
            unneeded = [r for r in current.replicas if r not in assignment.replicas]
            if unneeded:
                actions += self._stop_removed_replicas(tp, unneeded)
        ctx.reassigning.add(tp)
        if not self._reassignment_complete(tp, assignment):
            return actions + self._bump_leader_epoch(tp, assignment)
        completed = ReplicaAssignment(_target(assignment))
        ctx.assignments[tp] = completed
        state = ctx.states[tp]
        if state.leader not in completed.replicas or not ctx.is_replica_online(state.leader):
            live = [r for r in completed.replicas if ctx.is_replica_online(r)]
            leader = next((r for r in completed.replicas if r in live and r in state.isr), None)
            if leader is None:
                log.error("Cannot elect a leader among %s for reassigned partition %s", list(completed.replicas), tp)
            else:
                actions += self._elect({tp: election.new_leader_and_isr(state, leader, state.isr)})
        else:
            actions += self._bump_leader_epoch(tp, completed)
        actions += self._stop_removed_replicas(tp, list(assignment.removing_replicas))
        actions.append(self._write_assignment(tp[0]))
        ctx.reassigning.discard(tp)
        actions.append(RemoveZkReassignments((tp,), ctx.epoch_zk_version))
        batch = _Batch(self)
        batch.update_metadata(ctx.live_or_shutting_down(), [tp])
        log.info("Reassignment of partition %s to %s completed", tp, list(completed.replicas))
        return actions + batch.send()

    def _bump_leader_epoch(self, tp: TopicPartition, assignment: ReplicaAssignment) -> list[Action]:
        """updateLeaderEpochAndSendRequest: LeaderAndIsr with the new epoch to the original replicas,
        and as new to the adding ones."""
        ctx = self.ctx
        state = ctx.states.get(tp)
        if state is None:
            return []
        actions: list[Action] = [self._write_states({tp: replace(state, leader_epoch=state.leader_epoch + 1)})]
        batch = _Batch(self)
        batch.leader_and_isr([r for r in _origin(assignment) if ctx.is_replica_online(r, True)], tp)
        batch.leader_and_isr([r for r in assignment.adding_replicas if ctx.is_replica_online(r, True)], tp,
                             is_new=True)
        return actions + batch.send()

    def _stop_removed_replicas(self, tp: TopicPartition, replicas: list[int]) -> list[Action]:
        """stopRemovedReplicasOfReassignedPartition: out of the ISR (OfflineReplica), then
        StopReplica with delete."""
        actions = self._replicas_offline([tp], replicas)
        batch = _Batch(self)
        batch.stop_replica([r for r in replicas if r in self.ctx.live_brokers], tp, delete=True)
        return actions + batch.send()

    def _write_assignment(self, topic: str) -> WriteTopicAssignment:
        ctx = self.ctx
        return WriteTopicAssignment(topic, TopicAssignment(
            {tp[1]: ctx.assignments[tp] for tp in ctx.partitions_of(topic)}, ctx.topic_ids.get(topic)),
            ctx.epoch_zk_version)


def _being_reassigned(a: ReplicaAssignment) -> bool:
    return bool(a.adding_replicas or a.removing_replicas)


def _origin(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in a.replicas if r not in a.adding_replicas)


def _target(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(r for r in a.replicas if r not in a.removing_replicas)


def _reassign_to(current: ReplicaAssignment, target: tuple[int, ...]) -> ReplicaAssignment:
    """ReplicaAssignment.reassignTo: the targets then the original replicas, those added and those
    to remove."""
    origin = _origin(current)
    full = tuple(dict.fromkeys((*target, *origin)))
    return ReplicaAssignment(full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target))


class _Batch:
    """ControllerBrokerRequestBatch: requests gathered per broker, sent as one request each."""

    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller
        self._clear()

    def _clear(self) -> None:
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: set[TopicPartition] = set()
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}

    def leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        """addLeaderAndIsrRequestForBrokers: also UpdateMetadata of the partition to every broker."""
        ctx = self._controller.ctx
        a = ctx.assignments[tp]
        for b in brokers:
            self._leader_and_isr.setdefault(b, {})[tp] = LeaderAndIsrPartition(
                tp[0], tp[1], ctx.states[tp], a.replicas, a.adding_replicas, a.removing_replicas, is_new)
        self._update_metadata_brokers.update(ctx.live_brokers)
        self._update_metadata_partitions.add(tp)

    def update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self._update_metadata_brokers.update(brokers)
        self._update_metadata_partitions.update(partitions)

    def stop_replica(self, brokers: Iterable[int], tp: TopicPartition, delete: bool,
                     leader_epoch: int | None = None) -> None:
        ctx = self._controller.ctx
        if leader_epoch is None:
            state = ctx.states.get(tp)
            leader_epoch = state.leader_epoch if state is not None else -1
        for b in brokers:
            self._stop_replica.setdefault(b, {})[tp] = StopReplicaPartition(tp[0], tp[1], leader_epoch, delete)

    def send(self) -> list[Action]:
        """sendRequestsToBrokers: LeaderAndIsr, then UpdateMetadata, then StopReplica; the batch is
        empty afterwards."""
        controller = self._controller
        ctx = controller.ctx
        actions: list[Action] = []
        live = ctx.live_brokers
        for b, by_partition in sorted(self._leader_and_isr.items()):
            if b not in live:
                continue
            leader_ids = {p.state.leader for p in by_partition.values()}
            topics = {tp[0] for tp in by_partition}
            actions.append(SendLeaderAndIsr(
                b, live[b].epoch, controller.broker_id, ctx.epoch, tuple(by_partition.values()),
                {t: i for t, i in ctx.topic_ids.items() if t in topics},
                tuple(live[i].registration for i in sorted(leader_ids) if i in live)))
        if self._update_metadata_brokers:
            partitions = tuple(self._update_metadata_partition(tp) for tp in sorted(self._update_metadata_partitions)
                               if tp in ctx.assignments and tp in ctx.states)
            topics = {p.topic for p in partitions}
            registrations = tuple(live[b].registration for b in sorted(live))
            for b in sorted(self._update_metadata_brokers):
                if b in live:
                    actions.append(SendUpdateMetadata(
                        b, live[b].epoch, controller.broker_id, ctx.epoch, partitions,
                        {t: i for t, i in ctx.topic_ids.items() if t in topics}, registrations))
        for b, stops in sorted(self._stop_replica.items()):
            if b in live:
                actions.append(SendStopReplica(b, live[b].epoch, controller.broker_id, ctx.epoch,
                                               tuple(stops.values())))
        self._clear()
        return actions

    def _update_metadata_partition(self, tp: TopicPartition) -> UpdateMetadataPartition:
        ctx = self._controller.ctx
        state = ctx.states[tp]
        if tp[0] in ctx.topics_to_delete:
            state = replace(state, leader=LEADER_DURING_DELETE)
        replicas = ctx.replicas(tp)
        return UpdateMetadataPartition(tp[0], tp[1], state, replicas,
                                       tuple(r for r in replicas if not ctx.is_replica_online(r, tp=tp)))
