"""Reads the journals of group members (group_member.py, node/kafkajs_member.js) and checks what a
consumer group promises, per partition:

* ownership: a member owns a partition from the start of its assignment callback to the end of
  its revocation (or the moment the test killed it); two members never own a partition at the same
  moment, and a member consumes a partition only while it owns it;
* exactly once while stable: within one ownership the offsets consumed follow each other without
  gap or repeat; the next owner starts at the committed offset, which the member before committed
  synchronously: after a clean hand-over it is exactly the next offset, after a crash (or a failed
  commit) anything between the last acknowledged commit and the last one sent; nothing else
  repeats;
* nothing lost: every offset below the high watermark was consumed.

Timestamps are wall-clock seconds written by the members themselves (one machine, one clock).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

CLEAN_ENDS = {"revoke", "close", "JoinGroup", "LeaveGroup"}


@dataclass
class Ownership:
    member: str
    partition: int
    start: float
    gen: int | None
    end: float | None = None
    why: str | None = None  # revoke, lost, close, killed, JoinGroup, LeaveGroup, crash (kafkajs)
    consumed: list[tuple[float, int]] = field(default_factory=list)
    last_confirmed: int | None = None  # offset of the last acknowledged commit
    last_attempted: int | None = None  # offset of the last commit sent
    failed_commits: int = 0

    def covers(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t <= self.end)

    def describe(self) -> str:
        offsets = [o for _, o in self.consumed]
        span = f"{offsets[0]}..{offsets[-1]}" if offsets else "nothing"
        end = f"{self.end:.3f} ({self.why})" if self.end is not None else "open"
        return (f"{self.member} gen={self.gen} [{self.start:.3f}, {end}] consumed {span}, committed "
                f"{self.last_confirmed} (sent {self.last_attempted}, {self.failed_commits} failed)")


@dataclass
class Analysis:
    ownerships: dict[int, list[Ownership]]  # partition -> in order of start
    events: dict[str, list[dict]]  # member -> its journal
    problems: list[str]

    def owners(self) -> dict[str, set[int]]:
        """Who owns what now (members still running)."""
        out: dict[str, set[int]] = {}
        for p, owns in self.ownerships.items():
            for o in owns:
                if o.end is None:
                    out.setdefault(o.member, set()).add(p)
        return out

    def consumed(self, partition: int) -> list[int]:
        return [off for o in self.ownerships.get(partition, []) for _, off in o.consumed]

    def timeline(self, partition: int) -> str:
        return "\n".join(f"  p{partition}: {o.describe()}" for o in self.ownerships.get(partition, []))


def read_journal(path: Path) -> list[dict]:
    events = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return events
    lines = text.splitlines()
    for i, line in enumerate(lines):
        try:
            events.append(json.loads(line))
        except ValueError:
            if i < len(lines) - 1:
                raise
            # the line being written: left for the next read
    return events


def analyse(journals: dict[str, Path]) -> Analysis:
    ownerships: dict[int, list[Ownership]] = {}
    problems: list[str] = []
    events = {name: read_journal(path) for name, path in journals.items()}
    for member, evs in events.items():
        current: dict[int, Ownership] = {}
        for ev in evs:
            kind, t = ev["ev"], ev["t"]
            if kind == "assigned":
                for p in ev["parts"]:
                    if p in current:
                        problems.append(f"{member} was assigned p{p} at {t:.3f} while it owned it already")
                        continue
                    current[p] = Ownership(member, p, t, ev.get("gen"))
                    ownerships.setdefault(p, []).append(current[p])
            elif kind == "consumed":
                own = current.get(ev["p"])
                if own is None:
                    problems.append(f"{member} consumed p{ev['p']} offsets {ev['o'][0]}..{ev['o'][-1]} at {t:.3f} "
                                    "without owning it")
                    continue
                own.consumed += [(t, o) for o in ev["o"]]
            elif kind in ("committing", "committed", "commit_failed"):
                for p, offset in ev["offsets"].items():
                    own = current.get(int(p))
                    if own is None:
                        problems.append(f"{member} committed p{p} at {t:.3f} without owning it")
                    elif kind == "committing":
                        own.last_attempted = offset
                    elif kind == "committed":
                        own.last_confirmed = offset
                    else:
                        own.failed_commits += 1
            elif kind in ("revoked", "killed"):
                for p in (ev["parts"] if kind == "revoked" else list(current)):
                    own = current.pop(p, None)
                    if own is not None:
                        own.end, own.why = t, ev.get("why", kind)
            elif kind in ("error", "client_error"):  # not "retried": the client recovered
                problems.append(f"{member}: {kind} {ev['error']}")
    for owns in ownerships.values():
        owns.sort(key=lambda o: o.start)
    return Analysis(ownerships, events, problems)


def check(analysis: Analysis, high_watermarks: dict[int, int]) -> list[str]:
    """Every violation of the promises above, in words (empty when all hold)."""
    problems = list(analysis.problems)
    for p, hw in sorted(high_watermarks.items()):
        owns = analysis.ownerships.get(p, [])
        bad: list[str] = []
        for a, b in pairwise(owns):
            if a.end is None or a.end > b.start:
                bad.append(f"p{p} owned by {a.member} and {b.member} at the same time")
        lo = hi = 0  # nothing committed yet: the group starts at the earliest offset
        for own in owns:
            outside = [(t, o) for t, o in own.consumed if not own.covers(t)]
            if outside:
                bad.append(f"p{p}: {own.member} consumed offset {outside[0][1]} at {outside[0][0]:.3f}, outside "
                           "its ownership")
            offsets = [o for _, o in own.consumed]
            if offsets:
                if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                    bad.append(f"p{p}: {own.member} consumed a gap or a repeat within one ownership")
                if not lo <= offsets[0] <= hi:
                    window = f"{lo}" if lo == hi else f"{lo}..{hi}"
                    bad.append(f"p{p}: {own.member} started at offset {offsets[0]}, the committed offset was {window}")
            if own.last_confirmed is not None:
                lo = own.last_confirmed
            hi = max(lo, own.last_attempted if own.last_attempted is not None else lo)
            if (offsets and own.why in CLEAN_ENDS and not own.failed_commits
                    and own.last_confirmed != offsets[-1] + 1):
                bad.append(f"p{p}: {own.member} gave it up ({own.why}) without committing what it consumed")
        consumed = set(analysis.consumed(p))
        missing = sorted(set(range(hw)) - consumed)
        if missing:
            bad.append(f"p{p}: {len(missing)} offsets never consumed, first {missing[0]} (high watermark {hw})")
        if bad:
            problems += bad + [analysis.timeline(p)]
    return problems


def duplicates(analysis: Analysis) -> int:
    """Messages consumed more than once."""
    return sum(len(analysis.consumed(p)) - len(set(analysis.consumed(p))) for p in analysis.ownerships)


def uncommitted_at_crash(analysis: Analysis) -> int:
    """Messages killed members consumed after their last acknowledged commit."""
    return sum(_unconfirmed(own) for owns in analysis.ownerships.values() for own in owns if own.why == "killed")


def uncommitted_after_failed_commits(analysis: Analysis) -> int:
    """Messages members consumed after their last acknowledged commit of a partition they then gave
    up (not killed) with a commit refused: the broker answered ILLEGAL_GENERATION (the group had
    moved to a newer generation while the member committed) or NOT_COORDINATOR (it was shutting
    down). The next owner may consume them again; how many of them depends on whether the refused
    commit was written after all, so this is the most that may repeat."""
    return sum(_unconfirmed(own) for owns in analysis.ownerships.values() for own in owns
               if own.why != "killed" and own.failed_commits)


def _unconfirmed(own: Ownership) -> int:
    if not own.consumed:
        return 0
    first, last = own.consumed[0][1], own.consumed[-1][1]
    return last + 1 - (own.last_confirmed if own.last_confirmed is not None else first)
