"""Fetch from the closest replica (KIP-392): which replica a consumer should read a partition from.

`replica.selector.class` names Kafka's ReplicaSelector; unset (Kafka's default) consumers read from
the leader only. With `org.apache.kafka.common.replica.RackAwareReplicaSelector` the leader answers a
consumer's fetch (v11+, which carries the client's `rack_id`) with a `preferred_read_replica` in the
client's rack (Kafka's ReplicaManager.findPreferredReadReplica), and the consumer fetches from it.
Candidates are the in-sync followers holding the fetch offset and the leader; a selection of the
leader is no preference (the leader serves the fetch itself).
Deviation: Kafka also requires a follower's log start offset (which it reports in its fetches) to be
at most the fetch offset; Samsa's leader does not track it, so that check is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...coordinator.partition_leader import FollowerState

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True)
class ReplicaView:
    """A candidate replica (Kafka's ReplicaView): where it is and how far it got."""
    node_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def _sort_key(replica: ReplicaView) -> tuple[int, int, int]:
    """Kafka's ReplicaView.comparator: the larger log end offset, then the more recent catch-up,
    then the larger id is the better."""
    return replica.log_end_offset, -replica.time_since_last_caught_up_ms, replica.node_id


def rack_aware_select(client_rack: str | None, replicas: Iterable[ReplicaView], leader: ReplicaView) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector.select: the leader when the client names no rack, when no
    replica is in the client's rack, or when the leader is; else the best replica in that rack."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=_sort_key)


ReplicaSelector = Callable[[str | None, Iterable[ReplicaView], ReplicaView], ReplicaView]
REPLICA_SELECTORS: dict[str, ReplicaSelector] = {RACK_AWARE_REPLICA_SELECTOR: rack_aware_select}


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector `replica.selector.class` names, None when unset. An unknown name raises
    ValueError: Kafka's broker cannot load the class and does not start."""
    if not class_name:
        return None
    selector = REPLICA_SELECTORS.get(class_name)
    if selector is None:
        raise ValueError(f"Invalid value {class_name} for configuration replica.selector.class: "
                         f"java.lang.ClassNotFoundException: {class_name} (Samsa knows "
                         f"{', '.join(REPLICA_SELECTORS)})")
    return selector


def preferred_read_replica(selector: ReplicaSelector, client_rack: str | None, fetch_offset: int, now_ms: int,
                           leader_id: int, leader_log_end_offset: int, isr: Iterable[int],
                           followers: Iterable[FollowerState], rack_of: Callable[[int], str | None]) -> int | None:
    """Kafka's findPreferredReadReplica on the leader (`followers`: what it knows of them from their
    fetches): the followers of the ISR holding `fetch_offset` and the leader are the candidates;
    `rack_of(id)`: the broker's rack, None also when the client cannot reach it on its listener
    (Kafka's Node.noNode, whose rack matches no client's). The leader chosen is no preference
    (None): it serves the fetch itself."""
    in_sync = set(isr)
    candidates = [ReplicaView(f.broker_id, rack_of(f.broker_id), f.log_end_offset, now_ms - f.last_caught_up_time_ms)
                  for f in followers if f.broker_id in in_sync and f.log_end_offset >= fetch_offset]
    leader = ReplicaView(leader_id, rack_of(leader_id), leader_log_end_offset, 0)
    selected = selector(client_rack, [*candidates, leader], leader)
    return None if selected == leader else selected.node_id
