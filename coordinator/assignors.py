"""The server-side partition assignors of consumer groups (KIP-848): `uniform` and `range`; and
of share groups (KIP-932): `simple`.

Kafka's ConsumerGroupPartitionAssignor contract: given every member's subscription (topic ids) and
its current target assignment, and the number of partitions of each subscribed topic, return the
next target assignment of every member. An assignor never sees owned partitions or member epochs:
handing a partition over only after its previous owner revoked it is the group's job
(consumer_group.py), so an assignor only has to be balanced and sticky.

- `uniform` (Kafka's UniformAssignor, the default): partitions spread so that member sizes differ by
  at most one when all members subscribe to the same topics; when they do not, no partition can
  move to another of its topic's subscribers holding two fewer. Sticky: a member keeps what it has
  unless balance requires otherwise.
- `range` (Kafka's RangeAssignor of the group coordinator): per topic, each subscriber gets a
  contiguous range, and members sorted the same way get the same ranges of co-partitioned topics
  (same partition count), as a join of those topics needs. Sticky as Kafka's is: a member keeps
  the lowest of its partitions up to its quota.

- `simple` (Kafka's SimpleAssignor, share groups): a partition may go to several members at once.
  Each partition is shared by ceil(members / partitions) members and each member gets its share of
  the partitions (counts differing by at most one); members keep what they had where the balance
  allows. Only the partitions whose share state is initialized are assignable.

Assignments are `{topic_id: frozenset(partitions)}`; member ids are visited in sorted order so that
a result depends only on the input.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "MemberSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "SimpleAssignor",
    "UniformAssignor",
    "is_homogeneous",
]

Assignment = Mapping[UUID, frozenset[int]]


class PartitionAssignorError(Exception):
    """The group cannot be assigned (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of a member: its subscription and its current target assignment."""

    subscribed_topic_ids: frozenset[UUID]
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


def is_homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    """Kafka's SubscriptionType.HOMOGENEOUS: every member subscribes to the same topics."""
    subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
    return len(subscriptions) <= 1


class PartitionAssignor(ABC):
    name: str

    @abstractmethod
    def assign(self, members: Mapping[str, MemberSpec],
               partition_counts: Mapping[UUID, int]) -> dict[str, dict[UUID, frozenset[int]]]:
        """The next target assignment of every member (members without partitions map to {})."""


def _check_topics_exist(members: Mapping[str, MemberSpec], partition_counts: Mapping[UUID, int]) -> None:
    for spec in members.values():
        for topic_id in spec.subscribed_topic_ids:
            if topic_id not in partition_counts:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")


def _to_assignment(partitions: Iterable[tuple[UUID, int]]) -> dict[UUID, frozenset[int]]:
    by_topic: dict[UUID, set[int]] = {}
    for topic_id, partition in partitions:
        by_topic.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(parts) for topic_id, parts in by_topic.items()}


def _sticky_candidates(members: Mapping[str, MemberSpec], partition_counts: Mapping[UUID, int],
                       order: list[str]) -> dict[str, list[tuple[UUID, int]]]:
    """Per member, the partitions of its current assignment it may keep: still subscribed, still
    existing, and not claimed by a member earlier in `order` (a target assignment never gives a
    partition twice, but a stale input must not make us do so)."""
    claimed: set[tuple[UUID, int]] = set()
    kept: dict[str, list[tuple[UUID, int]]] = {}
    for member_id in order:
        spec = members[member_id]
        mine = []
        for topic_id in sorted(spec.assignment):
            if topic_id not in spec.subscribed_topic_ids:
                continue
            count = partition_counts.get(topic_id, 0)
            for partition in sorted(spec.assignment[topic_id]):
                tp = (topic_id, partition)
                if 0 <= partition < count and tp not in claimed:
                    claimed.add(tp)
                    mine.append(tp)
        kept[member_id] = mine
    return kept


class UniformAssignor(PartitionAssignor):
    name = "uniform"

    def assign(self, members, partition_counts):
        _check_topics_exist(members, partition_counts)
        if not members:
            return {}
        if is_homogeneous(members):
            return self._assign_homogeneous(members, partition_counts)
        return self._assign_heterogeneous(members, partition_counts)

    @staticmethod
    def _assign_homogeneous(members, partition_counts):
        order = sorted(members)
        topics = sorted(next(iter(members.values())).subscribed_topic_ids)
        total = sum(partition_counts[t] for t in topics)
        min_quota, extra = divmod(total, len(order))
        kept = _sticky_candidates(members, partition_counts, order)
        # The members that get one partition above the minimum: those already holding more than
        # the minimum first, so that they keep it (Kafka's builder hands them out in member order).
        by_size = sorted(order, key=lambda m: (-len(kept[m]), m))
        quota = {m: min_quota + (1 if i < extra else 0) for i, m in enumerate(by_size)}
        result: dict[str, list[tuple[UUID, int]]] = {}
        taken: set[tuple[UUID, int]] = set()
        for member_id in order:
            result[member_id] = kept[member_id][:quota[member_id]]
            taken.update(result[member_id])
        free = iter([(t, p) for t in topics for p in range(partition_counts[t]) if (t, p) not in taken])
        for member_id in order:
            missing = quota[member_id] - len(result[member_id])
            for _ in range(missing):
                tp = next(free, None)
                if tp is None:
                    break
                result[member_id].append(tp)
        if next(free, None) is not None:
            raise PartitionAssignorError("Partitions were left unassigned")
        return {m: _to_assignment(parts) for m, parts in result.items()}

    @staticmethod
    def _assign_heterogeneous(members, partition_counts):
        order = sorted(members)
        subscribers: dict[UUID, list[str]] = {}
        for member_id in order:
            for topic_id in members[member_id].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(member_id)
        # Topics with the most partitions per subscriber first: they are the hardest to balance.
        topics = sorted(subscribers, key=lambda t: (-partition_counts[t] / len(subscribers[t]),
                                                    len(subscribers[t]), t))
        owner: dict[tuple[UUID, int], str] = {}
        size = dict.fromkeys(order, 0)
        for member_id, partitions in _sticky_candidates(members, partition_counts, order).items():
            for tp in partitions:
                owner[tp] = member_id
                size[member_id] += 1
        for topic_id in topics:
            for partition in range(partition_counts[topic_id]):
                if (topic_id, partition) not in owner:
                    least = min(subscribers[topic_id], key=lambda m: (size[m], m))
                    owner[(topic_id, partition)] = least
                    size[least] += 1
        # Move partitions from a member to a subscriber of the same topic holding two fewer, until
        # none can move: each move lowers the sum of squared sizes, so this ends.
        moved = True
        while moved:
            moved = False
            for topic_id in topics:
                for partition in range(partition_counts[topic_id]):
                    current = owner[(topic_id, partition)]
                    least = min(subscribers[topic_id], key=lambda m: (size[m], m))
                    if size[current] - size[least] > 1:
                        owner[(topic_id, partition)] = least
                        size[current] -= 1
                        size[least] += 1
                        moved = True
        result: dict[str, list[tuple[UUID, int]]] = {m: [] for m in order}
        for tp, member_id in owner.items():
            result[member_id].append(tp)
        return {m: _to_assignment(parts) for m, parts in result.items()}


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign(self, members, partition_counts):
        _check_topics_exist(members, partition_counts)
        order = sorted(members)
        result: dict[str, set[tuple[UUID, int]]] = {m: set() for m in order}
        topics = sorted({t for spec in members.values() for t in spec.subscribed_topic_ids})
        for topic_id in topics:
            subscribers = [m for m in order if topic_id in members[m].subscribed_topic_ids]
            count = partition_counts[topic_id]
            min_quota, extra = divmod(count, len(subscribers))
            retained: set[int] = set()
            unfilled: list[tuple[str, int]] = []
            for member_id in subscribers:
                current = sorted(p for p in members[member_id].assignment.get(topic_id, ())
                                 if 0 <= p < count and p not in retained)
                if len(current) > min_quota and extra > 0:
                    # It holds more than the minimum and an extra partition is left: it keeps one.
                    extra -= 1
                    keep = current[:min_quota + 1]
                else:
                    keep = current[:min_quota]
                    unfilled.append((member_id, min_quota - len(keep)))
                retained.update(keep)
                result[member_id].update((topic_id, p) for p in keep)
            free = [p for p in range(count) if p not in retained]
            start = 0
            for member_id, remaining in unfilled:
                if extra > 0:
                    remaining += 1
                    extra -= 1
                if remaining > 0:
                    result[member_id].update((topic_id, p) for p in free[start:start + remaining])
                    start += remaining
        return {m: _to_assignment(parts) for m, parts in result.items()}


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


TopicPartitionId = tuple[UUID, int]


class SimpleAssignor:
    """Kafka's SimpleAssignor: homogeneous subscriptions share all their partitions among all
    members; otherwise each topic is shared among its own subscribers."""

    name = "simple"

    def assign(self, members: Mapping[str, MemberSpec], partition_counts: Mapping[UUID, int],
               assignable: Mapping[UUID, frozenset[int]]) -> dict[str, dict[UUID, frozenset[int]]]:
        """`assignable`: the partitions of each topic that may be assigned (their share state is
        initialized); the others go to nobody."""
        _check_topics_exist(members, partition_counts)
        order = sorted(members)
        result: dict[str, set[TopicPartitionId]] = {m: set() for m in order}

        def targets(topic_ids) -> list[TopicPartitionId]:
            return [(t, p) for t in sorted(topic_ids) for p in range(partition_counts[t])
                    if p in assignable.get(t, frozenset())]

        if is_homogeneous(members):
            topics = next(iter(members.values())).subscribed_topic_ids if members else frozenset()
            shares = [(order, targets(topics))]
        else:
            shares = []
            for topic_id in sorted({t for spec in members.values() for t in spec.subscribed_topic_ids}):
                subscribers = [m for m in order if topic_id in members[m].subscribed_topic_ids]
                shares.append((subscribers, targets([topic_id])))
        for subscribers, partitions in shares:
            previous = {m: {tp for t, ps in members[m].assignment.items() for tp in ((t, p) for p in ps)}
                        for m in subscribers}
            for member_id, assigned in _share(subscribers, partitions, previous).items():
                result[member_id] |= assigned
        return {m: _to_assignment(parts) for m, parts in result.items()}


def _share(member_ids: list[str], partitions: list[TopicPartitionId],
           previous: Mapping[str, set[TopicPartitionId]]) -> dict[str, set[TopicPartitionId]]:
    """One sharing (Kafka's Simple*AssignmentBuilder): the desired sharing of each partition and the
    desired count of each member, what members had kept up to both, the rest handed round."""
    if not partitions or not member_ids:
        return {m: set() for m in member_ids}
    sharing = -(-len(member_ids) // len(partitions))
    precise = sharing * len(partitions) / len(member_ids)
    desired = {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(member_ids)}
    by_partition: dict[TopicPartitionId, list[str]] = {tp: [] for tp in partitions}
    by_member: dict[str, list[TopicPartitionId]] = {m: [] for m in member_ids}
    for member_id in member_ids:
        for tp in sorted(previous.get(member_id, ())):
            holders = by_partition.get(tp)
            # Kept while the member is under its count and the partition under its sharing.
            if holders is not None and len(by_member[member_id]) < desired[member_id] and len(holders) < sharing:
                holders.append(member_id)
                by_member[member_id].append(tp)
    unfilled = [m for m in member_ids if len(by_member[m]) < desired[m]]
    cursor = 0
    for tp in partitions:
        holders = by_partition[tp]
        misses = 0
        while len(holders) < sharing and unfilled and misses < len(unfilled):
            cursor %= len(unfilled)
            member_id = unfilled[cursor]
            if member_id in holders:
                cursor += 1
                misses += 1
                continue
            misses = 0
            holders.append(member_id)
            by_member[member_id].append(tp)
            if len(by_member[member_id]) >= desired[member_id]:
                unfilled.pop(cursor)
            else:
                cursor += 1
    return {m: set(tps) for m, tps in by_member.items()}
