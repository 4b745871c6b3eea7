"""The task assignor of streams groups (KIP-1071): Kafka 4.4's default, `sticky`
(group-coordinator's StickyTaskAssignor), written for Samsa.

A task is (subtopology id, partition): one per partition of a subtopology's widest source topic.
Every task is assigned active to exactly one member; a stateful subtopology's tasks also get
`num_standby_replicas` standbys, never on a process (a Streams instance, several members sharing
its state directory) that already has that task. Balance is by process load (tasks per member of
the process), then by member within the process. In order:

1. active tasks stay with their previous active owner while it is under its quota (the tasks per
   member, rounded up, recomputed as members fill up);
2. then they go to a previous standby owner (the least loaded one) under its quota;
3. the rest go to the least loaded process, to its least loaded member;
4. standbys go first to the previous active owner (if its process does not hold the task yet), then
   to previous standby owners (those that had it as standby first, then by the task offsets they
   reported, highest first), then to the least loaded process that does not hold the task.

Kafka breaks ties by HashMap and PriorityQueue order; here ties are broken by process id, member id
and task id, so that an assignment is deterministic (the same input gives the same answer).
Warm-up tasks: Kafka 4.4 assigns none (its AssignmentRefiner returns the target unchanged).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["AssignorMember", "StickyTaskAssignor", "Subtopology", "TaskAssignorError", "Tasks", "TasksTuple"]

log = logging.getLogger("samsa.coordinator.streams")

# Tasks of one kind: {subtopology id: partitions}.
Tasks = Mapping[str, frozenset[int]]
TaskId = tuple[str, int]


class TaskAssignorError(Exception):
    """Kafka's TaskAssignorException: no member can take a task."""


@dataclass(frozen=True)
class TasksTuple:
    """A member's tasks by kind (Kafka's TasksTuple)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


@dataclass(frozen=True)
class Subtopology:
    """What the assignor needs of a configured subtopology."""

    num_tasks: int
    stateful: bool


@dataclass(frozen=True)
class AssignorMember:
    """A member as the assignor sees it: its process, its current target, the offsets of the tasks
    whose state it holds (Kafka's MemberAssignmentState)."""

    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    task_offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)


def _tasks_per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Process:
    """Kafka's ProcessState: the members of one process and the tasks given to them so far."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.capacity = 0
        self.task_count = 0
        self.member_counts: dict[str, int] = {}
        self.active: dict[str, set[TaskId]] = {}
        self.standby: dict[str, set[TaskId]] = {}
        self.tasks: set[TaskId] = set()

    @property
    def load(self) -> float:
        return -1.0 if self.capacity <= 0 else self.task_count / self.capacity

    def add_member(self, member_id: str) -> None:
        self.member_counts[member_id] = 0
        self.capacity += 1

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.member_counts[member_id] += 1
        return self.member_counts[member_id]

    def add_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        if not self.member_counts:
            return -1
        member_id = min(self.member_counts, key=lambda m: (self.member_counts[m], m))
        return self.add_task(member_id, task, active)


@dataclass
class _State:
    processes: dict[str, _Process]
    num_standby_replicas: int
    total_active_tasks: int
    total_tasks: int
    members_with_active_capacity: int
    members_with_capacity: int
    prev_active: dict[TaskId, tuple[str, str]]  # task -> (process id, member id)
    prev_standby: dict[TaskId, list[tuple[str, str]]]
    active_per_member: int = 0
    tasks_per_member: int = 0

    def filled_active(self, count: int) -> None:
        """Kafka's maybeUpdateActiveTasksPerMember: a member reached the quota, which is recomputed
        over the members and tasks left."""
        if count == self.active_per_member:
            self.members_with_active_capacity -= 1
            self.total_active_tasks -= count
            self.active_per_member = _tasks_per_member(self.total_active_tasks, self.members_with_active_capacity)

    def filled(self, count: int) -> None:
        if count == self.tasks_per_member:
            self.members_with_capacity -= 1
            self.total_tasks -= count
            self.tasks_per_member = _tasks_per_member(self.total_tasks, self.members_with_capacity)

    def count(self, member: tuple[str, str]) -> int:
        return self.processes[member[0]].member_counts[member[1]]


class StickyTaskAssignor:
    name = "sticky"

    def assign(self, members: Mapping[str, AssignorMember], subtopologies: Mapping[str, Subtopology],
               num_standby_replicas: int) -> dict[str, TasksTuple]:
        """The target assignment of every member (each member named, with empty tasks if none)."""
        state = self._initialize(members, subtopologies, num_standby_replicas)
        self._assign_active(state, [(s, p) for s, sub in subtopologies.items() for p in range(sub.num_tasks)])
        if num_standby_replicas > 0:
            self._assign_standby(state, [(s, p) for s, sub in subtopologies.items() if sub.stateful
                                         for p in range(sub.num_tasks)])
        active: dict[str, dict[str, set[int]]] = {}
        standby: dict[str, dict[str, set[int]]] = {}
        for process in state.processes.values():
            for member_id, tasks in process.active.items():
                for s, p in tasks:
                    active.setdefault(member_id, {}).setdefault(s, set()).add(p)
            for member_id, tasks in process.standby.items():
                for s, p in tasks:
                    standby.setdefault(member_id, {}).setdefault(s, set()).add(p)
        return {m: TasksTuple(active={s: frozenset(ps) for s, ps in active.get(m, {}).items()},
                              standby={s: frozenset(ps) for s, ps in standby.get(m, {}).items()})
                for m in members}

    @staticmethod
    def _initialize(members: Mapping[str, AssignorMember], subtopologies: Mapping[str, Subtopology],
                    num_standby_replicas: int) -> _State:
        total_active = sum(sub.num_tasks for sub in subtopologies.values())
        total = total_active + sum(sub.num_tasks * num_standby_replicas for sub in subtopologies.values()
                                   if sub.stateful)
        processes: dict[str, _Process] = {}
        prev_active: dict[TaskId, tuple[str, str]] = {}
        candidates: dict[TaskId, list[tuple[int, int, str, str]]] = {}
        for member_id in sorted(members):
            member = members[member_id]
            processes.setdefault(member.process_id, _Process(member.process_id)).add_member(member_id)
            who = (member.process_id, member_id)
            for s, ps in member.active.items():
                for p in ps:
                    prev_active[(s, p)] = who
            # Kafka's STANDBY_CANDIDATE_ORDER: previous standbys first, then the highest offset sum.
            for s, ps in member.standby.items():
                for p in ps:
                    offset = member.task_offsets.get(s, {}).get(p, 0)
                    candidates.setdefault((s, p), []).append((0, -offset, member.process_id, member_id))
            for s, offsets in member.task_offsets.items():
                for p, offset in offsets.items():
                    if p not in member.standby.get(s, ()):
                        candidates.setdefault((s, p), []).append((1, -offset, member.process_id, member_id))
        n = len(members)
        return _State(processes=processes, num_standby_replicas=num_standby_replicas, total_active_tasks=total_active,
                      total_tasks=total, members_with_active_capacity=n, members_with_capacity=n,
                      prev_active=prev_active,
                      prev_standby={t: [(c[2], c[3]) for c in sorted(cs)] for t, cs in candidates.items()},
                      active_per_member=_tasks_per_member(total_active, n), tasks_per_member=_tasks_per_member(total, n))

    @staticmethod
    def _least_loaded_previous(state: _State, members: list[tuple[str, str]] | None,
                               standby_task: TaskId | None = None) -> tuple[str, str] | None:
        """Kafka's findPrevMemberWithLeastLoad: the first candidate, replaced by one whose process and
        member are both less loaded."""
        candidate = None
        process_load = member_load = 0.0
        for member in members or ():
            process = state.processes[member[0]]
            if standby_task is not None and standby_task in process.tasks:
                continue
            load, count = process.load, process.member_counts[member[1]]
            if candidate is None or (load < process_load and count < member_load):
                candidate, process_load, member_load = member, load, count
        return candidate

    def _assign_active(self, state: _State, tasks: list[TaskId]) -> None:
        tasks.sort(key=lambda t: (t[1], t[0]))
        left = []
        for task in tasks:  # to the previous active owner
            prev = state.prev_active.get(task)
            if prev is not None and state.count(prev) < state.active_per_member:
                self._add(state, prev, task)
            else:
                left.append(task)
        tasks, left = left, []
        for task in tasks:  # to a previous standby owner
            prev = self._least_loaded_previous(state, state.prev_standby.get(task))
            if prev is not None and state.count(prev) < state.active_per_member:
                self._add(state, prev, task)
            else:
                left.append(task)
        left.sort()
        heap = [(p.load, p.process_id) for p in state.processes.values()]
        heapq.heapify(heap)
        for task in left:
            if not heap:
                raise TaskAssignorError(f"No process available to assign active task {task[0]}_{task[1]}.")
            _, process_id = heapq.heappop(heap)
            process = state.processes[process_id]
            count = process.add_to_least_loaded_member(task, True)
            if count == -1:
                raise TaskAssignorError(f"No member available to assign active task {task[0]}_{task[1]}.")
            state.filled_active(count)
            state.filled(count)
            heapq.heappush(heap, (process.load, process_id))

    @staticmethod
    def _add(state: _State, member: tuple[str, str], task: TaskId) -> None:
        count = state.processes[member[0]].add_task(member[1], task, True)
        state.filled_active(count)
        state.filled(count)

    def _assign_standby(self, state: _State, tasks: list[TaskId]) -> None:
        tasks.sort(key=lambda t: (t[1], t[0]), reverse=True)
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in tasks:
            placed = 0
            while placed < state.num_standby_replicas:
                prev = state.prev_active.get(task)
                if prev is not None:
                    process = state.processes[prev[0]]
                    if task not in process.tasks and state.count(prev) < state.tasks_per_member:
                        state.filled(process.add_task(prev[1], task, False))
                        placed += 1
                        continue
                standby = self._least_loaded_previous(state, state.prev_standby.get(task), task)
                if standby is None or state.count(standby) >= state.tasks_per_member:
                    break
                state.filled(state.processes[standby[0]].add_task(standby[1], task, False))
                placed += 1
            to_least_loaded.append((task, state.num_standby_replicas - placed))
        to_least_loaded.sort(reverse=True)
        for task, remaining in to_least_loaded:
            for i in range(remaining):
                if not self._standby_to_least_loaded(state, task):
                    log.warning("Unable to assign %d of %d standby tasks for task [%s_%d]. There is not enough "
                                "available capacity. You should increase the number of threads and/or application "
                                "instances to maintain the requested number of standby replicas.",
                                state.num_standby_replicas - i, state.num_standby_replicas, task[0], task[1])
                    break

    @staticmethod
    def _standby_to_least_loaded(state: _State, task: TaskId) -> bool:
        """Kafka's assignStandbyToMemberWithLeastLoad: the least loaded process not holding the task."""
        for process in sorted(state.processes.values(), key=lambda p: (p.load, p.process_id)):
            if task in process.tasks:
                continue
            count = process.add_to_least_loaded_member(task, False)
            if count == -1:
                return False
            state.filled(count)
            return True
        return False


def tasks_union(*tasks: Iterable[Tasks]) -> dict[str, frozenset[int]]:
    result: dict[str, frozenset[int]] = {}
    for kind in tasks:
        for t in kind:
            for s, ps in t.items():
                result[s] = result.get(s, frozenset()) | ps
    return result
