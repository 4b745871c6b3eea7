"""Produce with acks=all to a replicated topic: Samsa with replication factor 3 against Samsa with
replication factor 1 and Kafka 3.9 with replication factor 3, side by side in one run (issue 13).

    python bench/replicated.py              # one repetition of each case, a few seconds each
    python bench/replicated.py --reps 3     # medians of three

The clusters, all running at once on 127.0.0.1, the cases taking turns over them:

- samsa-rf3: one ZooKeeper (Kafka 3.9's jars), three Samsa brokers with `zookeeper.connect` (one of
  them wins the controller), a topic with replication factor 3 and min.insync.replicas=2;
- samsa-rf1: one Samsa broker on its own, replication factor 1;
- kafka39-rf3: three Kafka 3.9 brokers in ZooKeeper mode (kafka-server-start.sh's JVM settings) under
  another chroot of the same ZooKeeper, replication factor 3, min.insync.replicas=2;
- kafka39-rf1 (only when named in --clusters): one Kafka 3.9 broker under a third chroot, replication
  factor 1: what replication costs Kafka itself on the same machine.

The load is bench/load.py's produce (confluent-kafka, 1 MB batches, linger.ms 5), acks=all, round
1 and 16 partitions; then end to end at 5,000 records/s of 1 KB, acks=all, round 1 and 16 partitions
(load.end_to_end: produce() to a consumer's receipt; issue 31's latency cases). Broker CPU is read from /proc for each broker process and summed over the cluster
(ZooKeeper not counted); with one partition the per-broker shares show the leader's cost apart from
the followers' (with 16 every broker leads some: the shares are by broker id).
What the figures showed: bench/README.md, "Replication".
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import load  # noqa: E402
from systems import Samsa, Unavailable, cpu_seconds, oracle, with_server_jvm  # noqa: E402

MIN_INSYNC = 2
BROKER_IDS = (1, 2, 3)
CASES = [(1024, "none"), (1024, "lz4"), (100, "none"), (100, "lz4")]
PRODUCE_PARTITIONS = (1, 16)  # issue 31's CPU target names both
# End to end (issue 31): 1 KB records at a fixed rate, acks=all, round 1 and 16 partitions.
E2E_RATE = 5000
E2E_SECONDS = 5.0
E2E_PARTITIONS = (1, 16)
BYTES = {1024: 60_000_000, 100: 16_000_000}  # a few seconds a case at tens of MB/s
WARM_UP_BYTES = 30_000_000  # untimed, before the first case: Kafka's JIT compiles its produce path


class ClusterSamsa(Samsa):
    """bench's Samsa broker given a broker id and zookeeper.connect, on a port picked in advance
    (the port it registers in ZooKeeper is the one in `listeners`)."""

    port_announcement = None

    def __init__(self, broker_id: int, zookeeper_connect: str) -> None:
        self.name = f"samsa-{broker_id}"
        super().__init__()
        self.broker_id = broker_id
        self.zookeeper_connect = zookeeper_connect

    def _command(self) -> list[str]:
        return [*super()._command(), "--override", f"zookeeper.connect={self.zookeeper_connect}",
                "--override", f"broker.id={self.broker_id}"]


@dataclass
class Cluster:
    """Brokers by id: their pids (for CPU), one bootstrap, and the replication factor its topics get."""
    name: str
    replication_factor: int
    pids: dict[int, int]
    bootstrap: str
    stop: list = field(default_factory=list)  # callables, in order
    admin: AdminClient | None = None

    def create_topic(self, topic: str, timeout: float = 120.0, partitions: int = 1) -> int:
        """Create a topic once every broker is registered; return partition 0's leader's broker id
        once every replica of every partition is in sync."""
        self.admin = self.admin or AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while len(self.admin.list_topics(timeout=timeout).brokers) < len(self.pids):
            if time.monotonic() > deadline:
                raise Unavailable(f"{self.name}: not every broker registered after {timeout:.0f} s")
            time.sleep(0.05)
        config = {"min.insync.replicas": str(MIN_INSYNC)} if self.replication_factor > 1 else {}
        self.admin.create_topics([NewTopic(topic, partitions, self.replication_factor, config=config)],
                                 operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = self.admin.list_topics(topic, timeout=timeout).topics.get(topic)
            found = meta.partitions if meta is not None and meta.error is None else {}
            if len(found) == partitions and all(p.leader >= 0 and len(p.isrs) == self.replication_factor
                                                for p in found.values()):
                return found[0].leader
            time.sleep(0.05)
        raise Unavailable(f"{self.name}: {topic} has no leader with a full ISR after {timeout:.0f} s")

    def delete_topic(self, topic: str) -> None:
        try:
            self.admin.delete_topics([topic], operation_timeout=60)[topic].result(60)
        except Exception:
            pass

    def close(self) -> None:
        for stop in self.stop:
            try:
                stop()
            except Exception:
                traceback.print_exc()


def start_samsa_cluster(zookeeper_connect: str) -> Cluster:
    brokers = []
    cluster = Cluster("samsa-rf3", 3, {}, "", stop=[lambda: [b.close() for b in brokers]])
    try:
        for broker_id in BROKER_IDS:
            broker = ClusterSamsa(broker_id, zookeeper_connect)
            brokers.append(broker)
            broker.start()
            cluster.pids[broker_id] = broker.pid
    except BaseException:
        cluster.close()
        raise
    cluster.bootstrap = ",".join(b.bootstrap for b in brokers)
    return cluster


def start_samsa_single() -> Cluster:
    broker = Samsa()
    broker.start()
    return Cluster("samsa-rf1", 1, {0: broker.pid}, broker.bootstrap, stop=[broker.close])


def start_kafka_cluster(zookeeper_connect: str, base_dir: Path, broker_ids: tuple[int, ...] = BROKER_IDS) -> Cluster:
    kafka_class = with_server_jvm(oracle().ZkKafkaBroker)
    brokers = [kafka_class(base_dir / f"kafka-{i}", zookeeper_connect, overrides={"broker.id": i})
               for i in broker_ids]
    name = f"kafka39-rf{len(broker_ids)}"
    cluster = Cluster(name, len(broker_ids), {}, "", stop=[lambda: [b.kill() for b in brokers]])
    try:
        for broker in brokers:
            broker.start()
            cluster.pids[int(broker.overrides["broker.id"])] = broker.proc.pid
    except BaseException:
        cluster.close()
        raise
    cluster.bootstrap = ",".join(b.bootstrap for b in brokers)
    return cluster


# -- the table: pure, so tested without brokers -----------------------------------------------

@dataclass
class Result:
    """One case on one cluster: throughput, the cluster's CPU per MB, and each broker's."""
    mb_per_s: float
    cpu_ms_per_mb: float
    cpu_ms_per_mb_by_broker: dict[str, float]  # "leader", "follower 1", "follower 2"
    kb_per_request: float | None = None  # what a produce request carried, on average


def result_of(run: load.Run, pids: dict[int, int], leader: int | None) -> Result:
    """The run's figures, brokers named by role: the leader, then the followers by broker id; with
    no single leader (several partitions), by broker id."""
    mb = run.bytes / 1e6
    by_id = {broker_id: run.cpu_by_pid.get(pid, 0.0) for broker_id, pid in pids.items()}
    if leader is None:
        roles = {f"broker {broker_id}": cpu for broker_id, cpu in sorted(by_id.items())} if len(by_id) > 1 else {}
    else:
        roles = {"leader": by_id.pop(leader)} if leader in by_id else {}
        roles.update({f"follower {n}": cpu for n, (_, cpu) in enumerate(sorted(by_id.items()), 1)})
    return Result(mb / run.seconds, run.cpu * 1000 / mb, {role: cpu * 1000 / mb for role, cpu in roles.items()},
                  run.bytes / 1e3 / run.requests if run.requests else None)


def render(results: dict[str, dict[str, list[Result]]], clusters: list[str]) -> str:
    """A text table: a row per case and measure, a column per cluster (medians of repetitions),
    with each other cluster's ratio to the first one's."""
    rows: list[list[str]] = [["case", *clusters]]
    for case, by_cluster in results.items():
        measures = ["MB/s", "KB per produce request", "broker CPU ms/MB, all brokers"]
        roles = sorted({role for runs in by_cluster.values() for r in runs for role in r.cpu_ms_per_mb_by_broker},
                       key=lambda role: (role != "leader", role))
        measures += [f"broker CPU ms/MB, {role}" for role in roles]
        for measure in measures:
            values = {}
            for cluster in clusters:
                runs = by_cluster.get(cluster, [])
                picked = [pick(r, measure) for r in runs]
                picked = [v for v in picked if v is not None]
                values[cluster] = statistics.median(picked) if picked else None
            base = values.get(clusters[0])
            cells = []
            for i, cluster in enumerate(clusters):
                v = values[cluster]
                cell = "n/a" if v is None else f"{v:,.1f}"
                if i and v is not None and base:
                    cell += f" ({v / base:.2f}x)"
                cells.append(cell)
            rows.append([f"{case} ({measure})", *cells])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in rows)


def pick(result: Result, measure: str) -> float | None:
    if measure == "MB/s":
        return result.mb_per_s
    if measure == "KB per produce request":
        return result.kb_per_request
    if measure == "broker CPU ms/MB, all brokers":
        return result.cpu_ms_per_mb
    return result.cpu_ms_per_mb_by_broker.get(measure.removeprefix("broker CPU ms/MB, "))


@dataclass
class Latency:
    p50_ms: float | None
    p99_ms: float | None
    cpu_s: float


def render_latencies(latencies: dict[str, dict[str, list[Latency]]], clusters: list[str]) -> str:
    """A text table of the end-to-end cases: p50, p99 and the cluster's CPU, medians of repetitions."""
    rows: list[list[str]] = [["case", *clusters]]
    for case, by_cluster in latencies.items():
        for measure, field_name in (("p50 ms", "p50_ms"), ("p99 ms", "p99_ms"), ("broker CPU s", "cpu_s")):
            cells = []
            for cluster in clusters:
                values = [getattr(r, field_name) for r in by_cluster.get(cluster, [])]
                values = [v for v in values if v is not None]
                cells.append(f"{statistics.median(values):,.1f}" if values else "n/a")
            rows.append([f"{case} ({measure})", *cells])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in rows)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--clusters", default="samsa-rf3,samsa-rf1,kafka39-rf3")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's volume")
    parser.add_argument("--sections", default="produce,e2e", help="comma-separated subset of: produce, e2e")
    parser.add_argument("--e2e-rates", default=str(E2E_RATE), help="records/s of the end-to-end cases, comma-separated")
    parser.add_argument("--e2e-partitions", default=",".join(map(str, E2E_PARTITIONS)),
                        help="partition counts of the end-to-end cases, comma-separated")
    args = parser.parse_args(argv)
    wanted = args.clusters.split(",")
    sections = args.sections.split(",")
    base_dir = Path(tempfile.mkdtemp(prefix="bench-replicated-"))
    load_start = os.getloadavg()
    started = time.time()
    clusters: list[Cluster] = []
    notes: list[str] = []
    results: dict[str, dict[str, list[Result]]] = {}
    latencies: dict[str, dict[str, list[Latency]]] = {}
    zookeeper = None
    try:
        if any(name in wanted for name in ("samsa-rf3", "kafka39-rf3", "kafka39-rf1")):
            zookeeper = oracle().ZooKeeper(base_dir / "zookeeper").start()
        for name, start in (("samsa-rf3", lambda: start_samsa_cluster(zookeeper.connect + "/samsa")),
                            ("samsa-rf1", start_samsa_single),
                            ("kafka39-rf3", lambda: start_kafka_cluster(zookeeper.connect + "/kafka", base_dir)),
                            ("kafka39-rf1", lambda: start_kafka_cluster(zookeeper.connect + "/kafka-single", base_dir,
                                                                        broker_ids=(4,)))):
            if name in wanted:
                log(f"starting {name}")
                try:
                    clusters.append(start())
                except Exception as e:
                    notes.append(f"{name} did not start: {type(e).__name__}: {e}")
        counter = 0
        for cluster in clusters:  # untimed: connections, metadata, the JVMs' first compilations
            log(f"warm-up {cluster.name}")
            counter += 1
            topic = f"warm-up-{counter}"
            try:
                cluster.create_topic(topic)
                load.produce(cluster.bootstrap, list(cluster.pids.values()), topic, 1, 1024,
                             int(WARM_UP_BYTES * args.scale), "all")
            except Exception as e:
                notes.append(f"{cluster.name}: warm-up: {type(e).__name__}: {e}")
            cluster.delete_topic(topic)
        produce_cases = [(size, compression, partitions) for partitions in PRODUCE_PARTITIONS
                         for size, compression in CASES] if "produce" in sections else []
        for size, compression, partitions in produce_cases:
            case = f"produce {size} B, {partitions} part, acks=all, {compression}"
            for rep in range(args.reps):
                for cluster in clusters:
                    log(f"{case} #{rep + 1} {cluster.name}")
                    counter += 1
                    topic = f"replicated-{counter}"
                    try:
                        leader = cluster.create_topic(topic, partitions=partitions)
                        run = load.produce(cluster.bootstrap, list(cluster.pids.values()), topic, partitions, size,
                                           int(BYTES[size] * args.scale), "all", compression, count_requests=True)
                        if run.errors:
                            notes.append(f"{cluster.name}: {case}: {run.errors} records not acknowledged")
                        results.setdefault(case, {}).setdefault(cluster.name, []).append(
                            result_of(run, cluster.pids, leader if partitions == 1 else None))
                    except Exception as e:
                        notes.append(f"{cluster.name}: {case}: {type(e).__name__}: {e}")
                    cluster.delete_topic(topic)
        e2e_cases = [(int(rate), int(partitions)) for partitions in args.e2e_partitions.split(",")
                     for rate in args.e2e_rates.split(",")] if "e2e" in sections else []
        for rate, partitions in e2e_cases:
            case = f"e2e at {rate}/s of 1 KB, acks=all, {partitions} part"
            for rep in range(args.reps):
                for cluster in clusters:
                    log(f"{case} #{rep + 1} {cluster.name}")
                    counter += 1
                    topic = f"replicated-e2e-{counter}"
                    try:
                        cluster.create_topic(topic, partitions=partitions)
                        cpu_before = sum(cpu_seconds(pid) for pid in cluster.pids.values())
                        latency = load.end_to_end(cluster.bootstrap, topic, rate, E2E_SECONDS * args.scale,
                                                  acks="all", partitions=partitions)
                        cpu = sum(cpu_seconds(pid) for pid in cluster.pids.values()) - cpu_before
                        if latency["received"] < latency["sent"]:
                            notes.append(f"{cluster.name}: {case}: {latency['received']} of {latency['sent']} received")
                        latencies.setdefault(case, {}).setdefault(cluster.name, []).append(
                            Latency(latency["p50"], latency["p99"], cpu))
                    except Exception as e:
                        notes.append(f"{cluster.name}: {case}: {type(e).__name__}: {e}")
                    cluster.delete_topic(topic)
    finally:
        for cluster in clusters:
            cluster.close()
        if zookeeper is not None:
            zookeeper.kill()
        shutil.rmtree(base_dir, ignore_errors=True)
    load_end = os.getloadavg()
    print(f"bench/replicated.py: {args.reps} repetition(s), medians; {os.cpu_count()} cores; "
          f"{time.time() - started:.0f} s; load average at start {' '.join(f'{x:.2f}' for x in load_start)}, "
          f"at end {' '.join(f'{x:.2f}' for x in load_end)}")
    print("ratio in brackets: cluster / samsa-rf3 (for MB/s higher is better; for CPU lower is)")
    print(render(results, [c.name for c in clusters]))
    if latencies:
        print("\nend to end (ms; broker CPU: seconds summed over the cluster for the run)")
        print(render_latencies(latencies, [c.name for c in clusters]))
    if notes:
        print("\nnotes:")
        for note in notes:
            print("  " + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
