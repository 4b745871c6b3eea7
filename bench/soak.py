"""Issue 17's long forms: the fault scenarios of compat-tests run far longer than CI runs them,
each in a pytest process of its own, then one report of what was tried, what was found and the
figures (faults survived, records checked, records lost, the broker's peak resident memory).

    python bench/soak.py                      # every scenario available, long form
    python bench/soak.py --kills 20 --only crash-loop,cluster-crash-loop --seed 1234
    python bench/soak.py --only mixed-load --minutes 10
    python bench/soak.py --keep /tmp/soak            # each scenario's pytest output and broker logs kept

Scenarios:
- crash-loop: compat-tests/test_crash_loop.py's single broker with 50 kill -9s (`--kills`) and a
  budget to match;
- cluster-crash-loop: its three-broker form, the leader of a random partition killed as many
  times (`--kills`), each kill costing a ZooKeeper session timeout and a restart;
- network-partitions: compat-tests/test_network_partitions.py (brokers and ZooKeeper in network
  namespaces: leader, follower, ZooKeeper and controller cut off and healed) with every fault
  repeated `--partition-rounds` times (needs root or CAP_NET_ADMIN: skipped otherwise);
- mixed-load: compat-tests/test_mixed_load.py for `--minutes` (default 60): idempotent acks=all
  writers (history-checked) and an acks=1 writer, a consumer group whose members come and go, a
  transactional consume-transform-produce, on three brokers (RF=3, min.insync.replicas=2) while
  brokers are killed (kill -9), paused (SIGSTOP) and shut down in turn (SIGTERM) at random moments.

A scenario is a test path plus the environment of its long form, and the JSON file its test writes
its figures to.

Figures, never pass/fail for CI: nothing here runs there. The exit code is 1 when a scenario
found something (a test failed), so a soak can be scripted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Scenario:
    name: str
    tried: str  # what it does, for the report
    test: str  # a compat test path
    env: dict[str, str] = field(default_factory=dict)
    report_env: str | None = None  # the variable naming the JSON file the test writes its figures to


def scenarios(args) -> list[Scenario]:
    def crash_env(prefix: str) -> dict[str, str]:
        env = {f"SAMSA_{prefix}_KILLS": str(args.kills), f"SAMSA_{prefix}_BUDGET_S": str(args.kills * 60),
               # compat-tests' watchdog kills a test's brokers after 240 s: past the budget instead
               "SAMSA_COMPAT_TEST_TIMEOUT": str(args.kills * 60 + 600)}
        if args.seed is not None:
            env[f"SAMSA_{prefix}_SEED"] = str(args.seed)
        return env

    return [
        Scenario("crash-loop", f"kill -9 of the broker at random moments, {args.kills} times, under idempotent "
                               "acks=all writes to a flush.messages=1 topic and a default-flush topic; every "
                               "acknowledged record checked after each restart",
                 "compat-tests/test_crash_loop.py::test_kill9_at_random_moments_loses_and_duplicates_nothing",
                 crash_env("CRASH_LOOP"), "SAMSA_CRASH_LOOP_REPORT"),
        Scenario("cluster-crash-loop", f"kill -9 of a partition leader of a three-broker cluster (RF=3, "
                                       f"min.insync.replicas=2) at random moments, {args.kills} times, under "
                                       "idempotent acks=all writes to a flush.messages=1 topic and a default-flush "
                                       "topic and a reader; each killed broker restarted and back in every ISR; "
                                       "every acknowledged record and every read checked after each restart",
                 "compat-tests/test_crash_loop.py::"
                 "test_leaders_killed_at_random_moments_in_a_cluster_lose_and_duplicate_nothing",
                 crash_env("CLUSTER_CRASH_LOOP"), "SAMSA_CLUSTER_CRASH_LOOP_REPORT"),
        Scenario("network-partitions", f"leader, follower, ZooKeeper and controller cut off in network namespaces "
                                       f"and healed, {args.partition_rounds} times each, under idempotent acks=all "
                                       "writes and a reader; every acknowledged and every read record checked",
                 "compat-tests/test_network_partitions.py",
                 {"SAMSA_PARTITION_ROUNDS": str(args.partition_rounds),
                  "SAMSA_COMPAT_TEST_TIMEOUT": str(args.partition_rounds * 120 + 240)},
                 "SAMSA_PARTITION_REPORT"),
        Scenario("mixed-load", f"{args.minutes} minutes of idempotent acks=all writes (history-checked), acks=1 "
                               "writes, a consumer group whose members join, leave and are killed, and a "
                               "transactional consume-transform-produce, on three brokers (RF=3, "
                               "min.insync.replicas=2) while brokers are killed, paused and shut down in turn "
                               "at random moments; every acknowledged record, the group's consumption and "
                               "committed offsets and the transform's exactly-once output checked at the end",
                 "compat-tests/test_mixed_load.py",
                 {"SAMSA_MIXED_LOAD_BUDGET_S": str(args.minutes * 60), "SAMSA_MIXED_LOAD_KILLS": "1000000",
                  "SAMSA_COMPAT_TEST_TIMEOUT": str(args.minutes * 60 + 900),
                  **({"SAMSA_MIXED_LOAD_SEED": str(args.seed)} if args.seed is not None else {})},
                 "SAMSA_MIXED_LOAD_REPORT"),
    ]


def run(scenario: Scenario, timeout_s: float, keep: Path | None = None) -> dict:
    """Run the scenario's test; its figures, with what pytest said. `keep`: a directory where the
    scenario's whole pytest output (<name>.log) and its brokers' directories and logs (<name>/,
    pytest's basetemp) stay, to find out afterwards what happened in a run that found something."""
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        report = Path(scratch) / "figures.json"
        env = {**os.environ, **scenario.env}
        if scenario.report_env:
            env[scenario.report_env] = str(report)
        kept = [] if keep is None else [f"--basetemp={keep / scenario.name}"]
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", scenario.test, "-q", "-p", "no:cacheprovider",
                                   "-s", "-x", *kept], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout_s)
            if keep is not None:
                (keep / f"{scenario.name}.log").write_text(done.stdout + done.stderr)
            status = "passed" if done.returncode == 0 else "FOUND SOMETHING (test failed)"
            lines = done.stdout.strip().splitlines()
            tail = [line for line in lines if line.startswith("E ")][:10] + lines[-15:]  # the assertion, then the end
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            if keep is not None:
                (keep / f"{scenario.name}.log").write_text(output)
            status, tail = f"timed out after {timeout_s:.0f} s", output.splitlines()[-15:]
        figures = json.loads(report.read_text()) if report.exists() else {}
    return {"status": status, "seconds": round(time.monotonic() - started), "figures": figures,
            "pytest": [line for line in tail if "rdkafka" not in line]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50, help="kill -9s of each crash loop")
    parser.add_argument("--partition-rounds", type=int, default=30,
                        help="rounds of each network fault (30: about half an hour on two cores)")
    parser.add_argument("--minutes", type=int, default=60, help="of mixed load with faults")
    parser.add_argument("--seed", type=int, help="the crash loops' kill moments and the mixed load's faults, to "
                                                 "repeat a run")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per scenario")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", type=Path, help="keep each scenario's pytest output and broker logs in this "
                                                  "directory")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    chosen = scenarios(args)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [s for s in chosen if s.name in wanted]
    results = {}
    for scenario in chosen:
        print(f"== {scenario.name}: {scenario.tried}", flush=True)
        results[scenario.name] = result = run(scenario, args.timeout, args.keep)
        print(f"   {result['status']}" + (f" in {result['seconds']} s" if "seconds" in result else ""), flush=True)
    print()
    print(f"{'scenario':<20} {'result':<32} {'faults survived':>15} {'records checked':>15} {'records lost':>12} "
          f"{'peak broker RSS':>15}")
    for name, result in results.items():
        figures = result.get("figures", {})
        peak = figures.get("peak_broker_memory_kb")
        faults = figures.get("kills", figures.get("faults", "-"))
        print(f"{name:<20} {result['status']:<32} {faults:>15} "
              f"{figures.get('records_checked', '-'):>15} {figures.get('records_lost', '-'):>12} "
              f"{f'{peak / 1024:.0f} MB' if peak else '-':>15}")
    for name, result in results.items():
        figures = result.get("figures", {})
        if figures.get("restart_s"):
            restarts = sorted(figures["restart_s"])
            print(f"{name}: seed {figures.get('seed')}, restart seconds median {restarts[len(restarts) // 2]}, "
                  f"max {restarts[-1]}")
        if figures.get("faults_by_kind"):
            print(f"{name}: seed {figures.get('seed')}, {figures.get('load_s')} s of load; faults "
                  f"{figures['faults_by_kind']} (kill -9 of {figures.get('kill_targets')}, pauses past "
                  f"replica.lag.time.max.ms {figures.get('pauses_past_lag_time')}, past the ZooKeeper session "
                  f"{figures.get('pauses_past_session_timeout')}); duplicates {figures.get('duplicates')}, "
                  f"reordered {figures.get('reordered')}, phantom reads {figures.get('phantom_reads')}; acks=1 "
                  f"{figures.get('bulk_records')} records ({figures.get('bulk_records_per_s')}/s); transactions "
                  f"committed {figures.get('transactions_committed')}, aborted {figures.get('transactions_aborted')}"
                  f"; group: members {figures.get('group_members')}, rebalances {figures.get('group_rebalances')}, "
                  f"consumed again {figures.get('group_consumed_again')}, committed offsets gone backwards "
                  f"{figures.get('committed_offsets_backwards')} in {figures.get('committed_offset_samples')} "
                  f"samples; peak RSS by broker (kB) {figures.get('peak_memory_kb_by_broker')}")
        if result["status"] != "passed":
            print(f"{name}: what pytest said:\n  " + "\n  ".join(result["pytest"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if any(r["status"].startswith(("FOUND", "timed out")) for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
