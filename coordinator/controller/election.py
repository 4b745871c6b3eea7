"""Leader election, as Kafka 3.9's PartitionLeaderElectionAlgorithms and Election: each strategy
takes a partition's assignment, its ISR and who is alive, and gives the new leader and ISR (None:
no leader can be elected)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from ...wire.zk_data import LEADER_RECOVERY_RECOVERING, PartitionState


def offline_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                   unclean: bool) -> int | None:
    """The first live replica of the assignment in the ISR; with unclean election enabled, else the
    first live replica."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is None and unclean:
        leader = next((r for r in assignment if r in live), None)
    return leader


def elect_offline(state: PartitionState, assignment: Sequence[int], live: Collection[int],
                  unclean: bool) -> PartitionState | None:
    """Election.leaderForOffline: the leader from the ISR keeps the live part of it; a leader from
    outside the ISR (unclean) is the ISR alone, its log RECOVERING (KIP-704)."""
    leader = offline_leader(assignment, state.isr, live, unclean)
    if leader is None:
        return None
    if leader in state.isr:
        return new_leader_and_isr(state, leader, tuple(r for r in state.isr if r in live))
    return replace(new_leader_and_isr(state, leader, (leader,)), leader_recovery_state=LEADER_RECOVERY_RECOVERING)


def elect_preferred(state: PartitionState, assignment: Sequence[int], live: Collection[int]) -> PartitionState | None:
    """The first replica of the assignment, if alive and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in state.isr:
        return new_leader_and_isr(state, preferred, state.isr)
    return None


def elect_controlled_shutdown(state: PartitionState, assignment: Sequence[int], live_or_shutting_down: Collection[int],
                              shutting_down: Collection[int]) -> PartitionState | None:
    """The first replica alive, not shutting down and in the ISR; the ISR loses the brokers
    shutting down."""
    leader = next((r for r in assignment if r in live_or_shutting_down and r in state.isr
                   and r not in shutting_down), None)
    if leader is None:
        return None
    return new_leader_and_isr(state, leader, tuple(r for r in state.isr if r not in shutting_down))


def new_leader_and_isr(state: PartitionState, leader: int, isr: tuple[int, ...]) -> PartitionState:
    """LeaderAndIsr.newLeaderAndIsr: the leader epoch bumped; the partition epoch (zk_version) moves
    when the znode is written."""
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr)
