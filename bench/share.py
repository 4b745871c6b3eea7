"""Share groups (KIP-932) against a classic consumer group: the same records consumed by each, on
Samsa and Kafka 4.4, side by side in one run (issue 28).

    python bench/share.py                   # 3 rounds of 500,000 records of 1 KiB in 4 partitions
    python bench/share.py --quick           # 1 round of 65,536 records
    python bench/share.py --systems samsa --modes share --reps 1 --json out.json

One topic per broker, filled once (bench/load.py's produce, 1 KiB text records), then consumed
whole, from the earliest offset, by a new group per run in each mode:

- classic: Kafka's KafkaConsumer, group.protocol=classic (Fetch, offsets committed);
- share: KafkaShareConsumer, implicit acknowledgement (every poll accepts the last, piggybacked on
  the next ShareFetch), the group given share.auto.offset.reset=earliest first;
- share-explicit: KafkaShareConsumer acknowledging every record ACCEPT and calling commitSync()
  after every poll (a ShareAcknowledge round trip per batch).

The client is Kafka's Java client, the bench's other consumer (its perf tools) and share groups'
reference client, in one JVM for the whole run (bench/java/ConsumeBench.java, compiled into the jar
cache): its JIT warms once and serves every broker alike. Each run is timed from its first poll
that returned records to the last commit or acknowledgement (the join is not timed); the broker's
CPU is its process CPU clock over the same moments (bench/systems.py), the client's beside it.

One broker runs at a time: in each round the systems take turns (the order reversed every other
round), each started (a broker on a two-core machine must not share it with another one idle),
warmed up with half the records in every mode (untimed: Kafka's JIT takes about a million records
to settle, its share path's CPU per MB falling by half), then measured in every mode (the order
rotating by round) and stopped, its data kept for the next round. What the
figures showed: bench/README.md, "Share groups".
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import load  # noqa: E402
import machine  # noqa: E402
from perf_tools import TOOL_JVM_OPTS  # noqa: E402
from systems import ALL, BENCH_DIR, Unavailable, cpu_seconds, oracle  # noqa: E402

MODES = ("classic", "share", "share-explicit")
MODE_LABELS = {"classic": "classic group",
               "share": "share group, implicit acknowledgement",
               "share-explicit": "share group, explicit ACCEPT, commitSync per poll"}
# A consumer's close() that takes longer is noted: it left something unanswered.
SLOW_CLOSE_S = 5.0
JAVA_SOURCE = BENCH_DIR / "java" / "ConsumeBench.java"
# The client's log4j2 (on Kafka's class path) to stderr at WARN: stdout carries only the JSON lines.
LOG4J2 = ("status = warn\nappender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\n"
          "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %d %p %m (%c)%n\n"
          "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = err\n")


def client_command() -> list[str]:
    """The command that runs ConsumeBench, compiled into the jar cache's java-build/<hash of the
    source> unless already there (as compat-tests/test_java_client.py compiles its client)."""
    kafka_oracle = oracle()
    try:
        jars, java = kafka_oracle.class_path("kafka4"), kafka_oracle.java()
    except kafka_oracle.OracleUnavailable as e:
        raise Unavailable(str(e)) from None
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes()).hexdigest()[:16]
    build = kafka_oracle.CACHE / "java-build" / f"bench-{digest}"
    if not (build / "ConsumeBench.class").is_file():
        tmp = build.with_name(f"{build.name}.tmp-{uuid.uuid4().hex[:6]}")
        tmp.mkdir(parents=True)
        javac = os.environ.get("JAVAC") or str(Path(java).resolve().with_name("javac"))
        done = subprocess.run([javac, "-d", str(tmp), "-cp", jars, str(JAVA_SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise Unavailable(f"javac failed: {done.stderr.strip()[-1000:]}")
        (tmp / "log4j2.properties").write_text(LOG4J2)
        try:
            tmp.rename(build)  # atomic: another run compiling the same source loses nothing
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return [java, *TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={build / 'log4j2.properties'}",
            "-cp", f"{jars}:{build}", "ConsumeBench"]


@dataclass(frozen=True)
class Measure:
    """One run: what arrived after the first poll's records, in `seconds`, and the CPU the broker
    and the client spent meanwhile."""
    records: int
    bytes: int
    seconds: float
    broker_cpu: float
    client_cpu: float
    redelivered: int = 0  # records that came with a delivery count above 1 (share groups)
    failed_acks: int = 0  # partitions whose acknowledgement a commitSync reported failed
    close_seconds: float = 0.0  # what the consumer's close() took (untimed)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def broker_cpu_ms_per_mb(self) -> float:
        return self.broker_cpu * 1e3 / (self.bytes / 1e6)

    @property
    def client_cpu_ms_per_mb(self) -> float:
        return self.client_cpu * 1e3 / (self.bytes / 1e6)


class ClientError(RuntimeError):
    """The client fell silent, exited or answered out of turn: the conversation is out of step,
    and the process must be replaced before the next run."""


class Client:
    """The one client process of a run (ConsumeBench), spoken to line by line."""

    def __init__(self, command: list[str]) -> None:
        self.errors = tempfile.TemporaryFile("w+")  # its logs: a pipe nobody reads could fill and stall it
        self.command = command
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                     text=True)
        # Lines through a thread: a select() on the pipe would not see a line that the previous
        # readline() already took into the stream's buffer ("done" and "closed" often come together).
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._event(60.0, "ready")

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")  # the end

    def _event(self, timeout: float, *expected: str) -> dict:
        """The next JSON line, which must be one of the `expected` events."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise ClientError(f"the client said nothing in {timeout:.0f} s{self._stderr_tail()}") from None
        if not line:
            raise ClientError(f"the client exited with {self.proc.wait()}{self._stderr_tail()}")
        event = json.loads(line)
        if event["event"] not in expected:
            raise ClientError(f"the client said {event} where {'/'.join(expected)} was due{self._stderr_tail()}")
        return event

    def _stderr_tail(self) -> str:
        self.errors.seek(0)
        tail = self.errors.read()[-600:].strip()
        self.errors.seek(0, os.SEEK_END)
        return f": {tail}" if tail else ""

    def consume(self, mode: str, bootstrap: str, broker_pid: int, topic: str, group: str, records: int,
                timeout: float = 600.0) -> Measure:
        """`records` consumed in `mode` by a new group; the broker's and the client's CPU from the
        first poll's records to the end (ConsumeBench's "first" and "done")."""
        self.proc.stdin.write(f"consume {mode} {bootstrap} {topic} {group} {records}\n")
        self.proc.stdin.flush()
        event = self._event(120.0, "first", "done", "failed")  # the join, then the first fetch
        if event["event"] != "first":
            if event["event"] == "done":  # stalled before any record: the consumer closes still
                self._event(120.0, "closed", "failed")
            raise RuntimeError(event["error"] or "done before any record arrived")
        broker0, client0 = cpu_seconds(broker_pid), cpu_seconds(self.proc.pid)
        done = self._event(timeout, "done", "failed")
        broker1, client1 = cpu_seconds(broker_pid), cpu_seconds(self.proc.pid)
        if done["event"] == "failed":
            raise RuntimeError(done["error"])
        closed = self._event(120.0, "closed", "failed")
        if done["error"]:
            raise RuntimeError(done["error"])
        if closed["event"] == "failed":
            raise RuntimeError(f"closing the consumer: {closed['error']}")
        if done["records"] < records or not done["timed_bytes"]:
            raise RuntimeError(f"{done['records']} of {records} records, {done['timed_bytes']} bytes timed")
        return Measure(done["timed_records"], done["timed_bytes"], done["seconds"], broker1 - broker0,
                       client1 - client0, done["redelivered"], done["failed_acks"], closed["seconds"])

    def close(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            try:
                if kill:
                    raise OSError
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.errors.close()


# -- the table: every repetition kept, shown as median (min-max)
Figures = dict[str, dict[str, list[float]]]  # row -> system -> repetitions


def add(figures: Figures, row: str, system: str, value: float | None) -> None:
    cells = figures.setdefault(row, {})
    cells.setdefault(system, [])
    if value is not None:
        cells[system].append(value)


def fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(values: list[float], base: list[float] | None) -> str:
    """Median (min-max) of the repetitions, and its ratio to the base system's median."""
    if not values:
        return "n/a"
    median = statistics.median(values)
    text = fmt(median) if len(values) == 1 else f"{fmt(median)} ({fmt(min(values))}-{fmt(max(values))})"
    if base:
        text += f" {median / statistics.median(base):.2f}x"
    return text


def render(figures: Figures, names: list[str]) -> str:
    """One row per measure, a column per system: the first system's cells plain, the others' with
    their ratio to it."""
    width = max((len(row) for row in figures), default=20)
    cells = {row: [cell(by[name] if name in by else [], by.get(names[0]) if i else None)
                   for i, name in enumerate(names)] for row, by in figures.items()}
    widths = [max([len(name)] + [len(c[i]) for c in cells.values()]) for i, name in enumerate(names)]
    lines = [f"{'measure':<{width}}" + "".join(f"  {name:>{w}}" for name, w in zip(names, widths))]
    for row, row_cells in cells.items():
        lines.append(f"{row:<{width}}" + "".join(f"  {c:>{w}}" for c, w in zip(row_cells, widths)))
    return "\n".join(lines)


def record(figures: Figures, mode: str, system: str, measure: Measure | None) -> None:
    label = MODE_LABELS[mode]
    add(figures, f"{label} (records/s)", system, measure.records_per_s if measure else None)
    add(figures, f"{label} (broker CPU ms/MB)", system, measure.broker_cpu_ms_per_mb if measure else None)
    add(figures, f"{label} (client CPU ms/MB)", system, measure.client_cpu_ms_per_mb if measure else None)


def record_against_classic(figures: Figures, system: str, measures: dict[str, Measure | None]) -> None:
    """Each share mode's records/s and broker CPU per MB over the classic group's, in the same
    round on the same broker start."""
    classic = measures.get("classic")
    for mode, measure in measures.items():
        if mode == "classic" or classic is None or measure is None:
            continue
        label = MODE_LABELS[mode]
        add(figures, f"{label} / classic (records/s)", system, measure.records_per_s / classic.records_per_s)
        add(figures, f"{label} / classic (broker CPU ms/MB)", system,
            measure.broker_cpu_ms_per_mb / classic.broker_cpu_ms_per_mb)


class Bench:
    def __init__(self, names: list[str], modes: list[str], records: int, partitions: int, record_size: int,
                 warm_up_records: int) -> None:
        self.modes, self.partitions, self.record_size = modes, partitions, record_size
        self.records, self.warm_up_records = records, warm_up_records
        self.figures: Figures = {}
        self.notes: list[str] = []
        self.systems = []
        for cls in ALL:
            if cls.name not in names:
                continue
            try:
                system = cls()
            except Unavailable as e:
                self.notes.append(f"{cls.name} skipped: {e}")
                continue
            self.systems.append(system)
        self.topic = f"share-bench-{uuid.uuid4().hex[:8]}"
        self.filled: dict[str, int] = {}  # system -> records in its topic
        self.client: Client | None = None

    def log(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr, flush=True)

    def attempt(self, what: str, system, fn):
        """One step; a failure is a note and an empty cell, never the end of the run."""
        try:
            return fn()
        except Exception as e:
            self.notes.append(f"{system.name}: {what}: {type(e).__name__}: {e}")
            if os.environ.get("BENCH_DEBUG"):
                traceback.print_exc()
            return None

    def fill(self, system) -> int:
        """The topic, produced once per broker: `records` (whole produce_batch calls) and
        load.produce's one warm-up record per partition."""
        system.create_topic(self.topic, self.partitions)
        run = load.produce(system.bootstrap, system.pid, self.topic, self.partitions, self.record_size,
                           self.records * self.record_size)
        if run.errors:
            raise RuntimeError(f"{run.errors} records not acknowledged while filling")
        self.log(f"{system.name}: filled with {run.records:,} records at {run.mb_per_s:.0f} MB/s")
        return run.records + self.partitions

    def round(self, rep: int) -> None:
        order = self.systems if rep % 2 == 0 else self.systems[::-1]
        shift = rep % len(self.modes)
        modes = self.modes[shift:] + self.modes[:shift]
        for system in order:
            self.log(f"round {rep + 1}: {system.name} starting")
            if self.attempt("start", system, system.start) is None:
                for mode in modes:
                    record(self.figures, mode, system.name, None)
                continue
            try:
                self.measure(system, rep, modes)
            finally:
                system.stop()

    def measure(self, system, rep: int, modes: list[str]) -> None:
        if system.name not in self.filled:
            filled = self.attempt("fill", system, lambda: self.fill(system))
            if filled is None:
                return
            self.filled[system.name] = filled
        total = self.filled[system.name]
        for mode in modes if self.warm_up_records > 0 else ():  # warm-up: untimed
            self.attempt(f"{MODE_LABELS[mode]}, warm-up #{rep + 1}", system, functools.partial(
                self.consume, system, mode, f"warm-up-{mode}-{rep}", min(self.warm_up_records, total)))
        measures = {}
        for mode in modes:
            self.log(f"round {rep + 1}: {system.name} {MODE_LABELS[mode]}")
            measure = self.attempt(f"{MODE_LABELS[mode]} #{rep + 1}", system, functools.partial(
                self.consume, system, mode, f"bench-{mode}-{rep}", total))
            record(self.figures, mode, system.name, measure)
            measures[mode] = measure
        record_against_classic(self.figures, system.name, measures)

    def consume(self, system, mode: str, group: str, records: int) -> Measure:
        """One run through the client, which is replaced if it fell out of step; what a run saw
        beyond its figures goes to the notes."""
        assert self.client is not None
        try:
            measure = self.client.consume(mode, system.bootstrap, system.pid, self.topic, group, records)
        except ClientError:
            self.client.close(kill=True)
            self.client = Client(self.client.command)
            raise
        seen = [f"{measure.redelivered} records redelivered" if measure.redelivered else "",
                f"{measure.failed_acks} failed acknowledgements" if measure.failed_acks else "",
                f"close() took {measure.close_seconds:.1f} s" if measure.close_seconds > SLOW_CLOSE_S else ""]
        if any(seen):
            self.notes.append(f"{system.name}: {MODE_LABELS[mode]}, group {group}: {', '.join(x for x in seen if x)}")
        return measure

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        for system in self.systems:
            system.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of 65,536 records")
    parser.add_argument("--systems", default="samsa,kafka",
                        help="comma-separated, any of: " + ", ".join(cls.name for cls in ALL) + " (default samsa,kafka)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, any of: " + ", ".join(MODES))
    parser.add_argument("--reps", type=int, help="rounds (default 3, --quick 1)")
    parser.add_argument("--records", type=int, help="records in the topic (default 500,000, --quick 65,536), "
                                                     "rounded down to whole batches of 4,096")
    parser.add_argument("--warm-up-records", type=int,
                        help="records each mode consumes untimed after each broker start (default half the topic)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--hold-freed-memory", action="store_true",
                        help="report no freed memory to the VM's host during the run (needs root; bench/machine.py)")
    parser.add_argument("--json", help="also write every repetition's figures to this file")
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    records = args.records or (65_536 if args.quick else 500_000)
    if records < load.BATCH:
        parser.error(f"--records: at least {load.BATCH}")
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"--modes: no {', '.join(sorted(unknown))}")
    names = [n for n in args.systems.split(",") if n]
    warm_up = records // 2 if args.warm_up_records is None else args.warm_up_records
    bench = Bench(names, modes, records, args.partitions, args.record_size, warm_up)
    load_start, started = os.getloadavg(), time.time()
    with machine.freed_memory_held(args.hold_freed_memory) as page_reporting:
        try:
            bench.client = Client(client_command())
            for rep in range(reps):
                bench.round(rep)
        except Unavailable as e:
            bench.notes.append(f"no client: {e}")
        finally:
            bench.close()
    load_end = os.getloadavg()
    shown = [s.name for s in bench.systems]
    print(f"bench/share.py: {reps} round(s), {records:,} records of {args.record_size} B in {args.partitions} "
          f"partitions; {os.cpu_count()} cores; {time.time() - started:.0f} s; load average at start "
          f"{' '.join(f'{x:.2f}' for x in load_start)}, at end {' '.join(f'{x:.2f}' for x in load_end)}")
    print(page_reporting)
    print("each cell: median (min-max) of the rounds; beside other systems' cells, their median over the first "
          "system's (Nx)")
    if shown:
        print(render(bench.figures, shown))
    if bench.notes:
        print()
        print("notes:")
        for note in bench.notes:
            print("  " + note)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average": [load_start, load_end], "rows": bench.figures, "notes": bench.notes}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
