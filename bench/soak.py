"""Issue 17's long forms: the fault scenarios of compat-tests run far longer than CI runs them,
each in a pytest process of its own, then one report of what was tried, what was found and the
figures (faults survived, records checked, records lost, the broker's peak resident memory).

    python bench/soak.py                      # every scenario available, long form
    python bench/soak.py --kills 20 --only crash-loop,cluster-crash-loop --seed 1234

Scenarios:
- crash-loop: compat-tests/test_crash_loop.py's single broker with 50 kill -9s (`--kills`) and a
  budget to match;
- cluster-crash-loop: its three-broker form, the leader of a random partition killed as many
  times (`--kills`), each kill costing a ZooKeeper session timeout and a restart;
- network-partitions: compat-tests/test_network_partitions.py (brokers and ZooKeeper in network
  namespaces: leader, follower, ZooKeeper and controller cut off and healed) with every fault
  repeated `--partition-rounds` times (needs root or CAP_NET_ADMIN: skipped otherwise);
- mixed-load: a hook for the mixed-load work of issue 17 (a scenario is a test path plus the
  environment of its long form, and the JSON file its test writes its figures to); listed as not
  available until it exists.

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
    test: str | None  # a compat test path; None while the scenario is only a hook
    env: dict[str, str] = field(default_factory=dict)
    report_env: str | None = None  # the variable naming the JSON file the test writes its figures to


def scenarios(args) -> list[Scenario]:
    def crash_env(prefix: str) -> dict[str, str]:
        env = {f"SAMSA_{prefix}_KILLS": str(args.kills), f"SAMSA_{prefix}_BUDGET_S": str(args.kills * 60)}
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
        Scenario("mixed-load", "an hour of mixed produce, consume, group and transaction load with faults", None),
    ]


def run(scenario: Scenario, timeout_s: float) -> dict:
    """Run the scenario's test; its figures, with what pytest said."""
    if scenario.test is None:
        return {"status": "not available yet"}
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        report = Path(scratch) / "figures.json"
        env = {**os.environ, **scenario.env}
        if scenario.report_env:
            env[scenario.report_env] = str(report)
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", scenario.test, "-q", "-p", "no:cacheprovider",
                                   "-s", "-x"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
            status = "passed" if done.returncode == 0 else "FOUND SOMETHING (test failed)"
            lines = done.stdout.strip().splitlines()
            tail = [line for line in lines if line.startswith("E ")][:10] + lines[-15:]  # the assertion, then the end
        except subprocess.TimeoutExpired as e:
            status, tail = f"timed out after {timeout_s:.0f} s", (e.stdout or b"").decode(errors="replace").splitlines()[-15:]
        figures = json.loads(report.read_text()) if report.exists() else {}
    return {"status": status, "seconds": round(time.monotonic() - started), "figures": figures,
            "pytest": [line for line in tail if "rdkafka" not in line]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50, help="kill -9s of each crash loop")
    parser.add_argument("--partition-rounds", type=int, default=20, help="rounds of each network fault")
    parser.add_argument("--seed", type=int, help="the crash loops' kill moments, to repeat a run")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per scenario")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    chosen = scenarios(args)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [s for s in chosen if s.name in wanted]
    results = {}
    for scenario in chosen:
        print(f"== {scenario.name}: {scenario.tried}", flush=True)
        results[scenario.name] = result = run(scenario, args.timeout)
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
        if result["status"] not in ("passed", "not available yet"):
            print(f"{name}: what pytest said:\n  " + "\n  ".join(result["pytest"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if any(r["status"].startswith(("FOUND", "timed out")) for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
