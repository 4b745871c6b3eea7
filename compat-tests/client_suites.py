"""The clients' own test suites, run against a broker: librdkafka v2.15.0's broker suite (its
share-consumer tests, or all of it) and mock share tests, and franz-go v1.22.3's kgo package tests,
as built by `scripts/fetch-suites.sh` into $SAMSA_CACHE/suites (nothing downloads here; the few Java
helper classes of librdkafka's tests compile on first use).

* librdkafka: `TESTS=0171 test-runner -L -p1` (full mode: no -Q) with a test.conf naming
  bootstrap.servers and test.topic.random=true, TEST_KAFKA_VERSION=4.4.0, and CI=true as
  librdkafka's CI runs them (test.c then triples every test's timeout and gives its clients
  request.timeout.ms=10000: 0170 alone runs about 280 s on Kafka 4.4 here, more than its 200 s
  budget without it). The mock tests (0155-0158, 0182, 0183) run with -l against librdkafka's mock
  cluster, no broker. The broker is configured as librdkafka's trivup configures Kafka
  (LIBRDKAFKA_BROKER), but one broker, not three; the runner gets what trivup gives it: KAFKA_PATH
  (Kafka 4.4's kafka-topics.sh, kafka-acls.sh and kafka-run-class.sh, from the jars) and BROKERS.
  `librdkafka all` runs every test number of tests/test.c with a broker entry, `--jobs N` runners
  at a time, each number in a runner of its own, then once more each that failed, and prints every
  entry's state; `--scenario noautocreate` the entries of trivup's scenario of that name (a broker
  with LIBRDKAFKA_SCENARIOS's settings too).
* franz-go: its kgo package's test binary (one test, `-test.run '^TestX$'`, or the whole package),
  run in the package's source directory as `go test` runs it, with the environment of franz-go's
  CI job for Apache Kafka (KGO_SEEDS, KGO_TEST_RF=1, KGO_TEST_STABLE_FETCH=true) against a broker
  configured as that job's (FRANZ_GO_BROKER). That job also gives SCRAM seeds on a SASL_PLAINTEXT
  listener (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM): test_franz_go.py adds that listener. A test that
  skips itself (for the share tests: the broker does not advertise ShareFetch and ShareAcknowledge
  v2) has not passed.

Plain Python: test_share_librdkafka.py, test_share_librdkafka_mock.py and test_librdkafka_suite.py run
each test number as a pytest
test, test_franz_go.py the kgo package; by hand, against a broker
already running (e.g. `samsa serve` with LIBRDKAFKA_BROKER's settings as --override):

    python compat-tests/client_suites.py librdkafka 0171 --bootstrap 127.0.0.1:9092
    python compat-tests/client_suites.py librdkafka all --jobs 3 --bootstrap 127.0.0.1:9092
    python compat-tests/client_suites.py franz-go TestShareGroup --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CACHE = Path(os.environ.get("SAMSA_CACHE") or Path.home() / ".cache" / "samsa") / "suites"
LIBRDKAFKA_VERSION = "2.15.0"
FRANZ_GO_VERSION = "v1.22.3"
KAFKA_VERSION = "4.4.0"  # what librdkafka's tests are told the broker is (TEST_KAFKA_VERSION)

# The share-consumer tests that need a broker (tests/test.c: TEST_BRKVER(4, 2, 0, 0)), and those
# against librdkafka's mock cluster (TEST_F_LOCAL). 0186 (mock too) is not in issue 28's list.
LIBRDKAFKA_TESTS = ["0170", "0171", "0172", "0173", "0174", "0175", "0176", "0177", "0178", "0179",
                    "0180", "0181", "0184", "0185"]
LIBRDKAFKA_MOCK_TESTS = ["0155", "0156", "0157", "0158", "0182", "0183"]
FRANZ_GO_TESTS = ["TestShareGroup", "TestShareGroupAckOnClose", "TestShareGroupETL",
                  "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"]

# Kafka's config for librdkafka's tests as trivup's KafkaBrokerApp writes it (librdkafka
# tests/trivup/trivup-0.15.0: server.properties.template, _add_simple_authorizer; tests/
# cluster_testing.py's share-consumer lines for 4.2+; tests/scenarios/default.json;
# interactive_broker_version.py's two `conf` lines), for one broker in KRaft mode. Left out: its
# SASL_PLAINTEXT and DOCKER listeners and JMX (no test here uses them), broker.rack and
# RackAwareReplicaSelector (fetch-from-follower, not share groups).
LIBRDKAFKA_BROKER = {
    "num.partitions": "4",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:admin",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.share.min.record.lock.duration.ms": "1000",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.bytes": "1000000000",
    "connections.max.reauth.ms": "10000",
}

# trivup's scenarios (librdkafka tests/scenarios/*.json) beyond the default: a test.c entry names
# those it runs in (`.scenario = "noautocreate"`), and the runner, told TEST_SCENARIO, runs those.
LIBRDKAFKA_SCENARIOS = {"default": {}, "noautocreate": {"auto.create.topics.enable": "false"}}

# franz-go's CI job for Apache Kafka (.github/workflows/lint-and-test.yml, integration-test-kafka:
# the apache/kafka image's KAFKA_* environment), less its SASL listener (see above).
FRANZ_GO_BROKER = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "5",
    # "The share ETL test releases, bails, and kills enough that a record can hit the default
    # limit of 5 and be archived."
    "group.share.delivery.count.limit": "10",
}
FRANZ_GO_ENV = {"KGO_TEST_RF": "1", "KGO_TEST_STABLE_FETCH": "true"}

LIBRDKAFKA_TIMEOUT = 1500.0  # s: 0170 takes about 280 s on Kafka here; CI=true allows 600 s
FRANZ_GO_TIMEOUT_S = 300  # franz-go's CI: go test -timeout 5m ./...
# The whole kgo package: about 2.5 min on either broker here, beside other modules on two cores.
FRANZ_GO_PACKAGE_TIMEOUT_S = 600


# librdkafka's share tests take about 40 min a broker on two cores (and its mock tests 8 min), its
# whole broker suite about 100 min, more than CI's budget: the share tests run only when this is 1
# or `all`, the whole suite only when it is `all` (figures in compat-tests/README.md).
LIBRDKAFKA_SWITCH = "SAMSA_COMPAT_LIBRDKAFKA_SUITE"


def librdkafka_gate(whole: bool = False) -> None:
    value = os.environ.get(LIBRDKAFKA_SWITCH)
    if value != "all" and (whole or value != "1"):
        import pytest

        pytest.skip(f"librdkafka's whole broker suite takes about 100 min a broker: set {LIBRDKAFKA_SWITCH}=all"
                    if whole else
                    f"librdkafka's share suite takes about 40 min a broker: set {LIBRDKAFKA_SWITCH}=1 (or all)")


class SuiteUnavailable(RuntimeError):
    pass


def librdkafka_dir() -> Path:
    d = CACHE / f"librdkafka-{LIBRDKAFKA_VERSION}"
    if not (d / "tests" / "test-runner").is_file() or not (d / ".stamp").is_file():
        raise SuiteUnavailable(f"no librdkafka test-runner in {d}: run `bash scripts/fetch-suites.sh librdkafka`")
    return d


def franz_go_binary() -> Path:
    b = CACHE / f"franz-go-{FRANZ_GO_VERSION}" / "kgo.test"
    if not b.is_file():
        raise SuiteUnavailable(f"no franz-go kgo test binary {b}: run `bash scripts/fetch-suites.sh franz-go`")
    return b


def franz_go_package_dir() -> Path:
    """The kgo package's source, where `go test` would run its binary (TestOptValuesCoversEveryOption
    reads config.go from there)."""
    d = CACHE / "gomod" / "github.com" / "twmb" / f"franz-go@{FRANZ_GO_VERSION}" / "pkg" / "kgo"
    if not (d / "config.go").is_file():
        raise SuiteUnavailable(f"no franz-go source in {d}: run `bash scripts/fetch-suites.sh franz-go`")
    return d


@dataclass
class Outcome:
    test: str
    passed: bool
    seconds: float
    summary: str  # the suite's own verdict lines
    log: Path
    states: dict[str, str] = field(default_factory=dict)  # librdkafka: entry -> PASSED, FAILED, SKIPPED..
    reasons: dict[str, str] = field(default_factory=dict)  # librdkafka: entry -> why it failed or skipped

    def describe(self) -> str:
        return f"{self.test}: {'passed' if self.passed else 'FAILED'} in {self.seconds:.1f} s\n{self.summary}\n(log: {self.log})"


# A row of test-runner's summary table, with the reason of a skip:
# | 0173_share_consumer_commit_async_local   |    SKIPPED |   0.000s | Filtered due to negative test flags
SUMMARY_ROW = re.compile(r"^\| (\S+)\s+\|\s+(\w+) \|\s+[\d.]+s \|(.*)$", re.MULTILINE)
# A test of the other kind (-L leaves out the mock ones of a test number, -l the others).
FILTERED = "Filtered due to negative test flags"
# ================= Test 0112_assign_unknown_part PASSED =================
VERDICT_LINE = re.compile(r"^\S.*?={17} Test (\S+) (PASSED|FAILED|SKIPPED) ={17}", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# Kafka's command-line tools some tests run through $KAFKA_PATH/bin (test.c test_kafka_topics and
# test_kafka_cmd: 0045 and 0052 alter and delete topics with kafka-topics.sh, 0077 creates a
# compacted one, 0109, 0115 and 0119 add ACLs with kafka-acls.sh), as in trivup's Kafka install:
# Kafka 4.4's tool classes from the jars fetch-jars.sh caches, whichever broker the tests run on.
KAFKA_TOOLS = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
               "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
               "kafka-configs.sh": "org.apache.kafka.tools.ConfigCommand"}


def kafka_path(work_dir: Path) -> Path:
    """A KAFKA_PATH with bin/kafka-run-class.sh and the tools of KAFKA_TOOLS, run with Kafka 4.4's
    jars."""
    from kafka_oracle import class_path, java  # the jars' cache (OracleUnavailable without them)

    top = work_dir / "kafka"
    (top / "bin").mkdir(parents=True, exist_ok=True)
    run_class = top / "bin" / "kafka-run-class.sh"
    run_class.write_text("#!/bin/sh\n# as Kafka's: CLASSPATH first, then Kafka's jars\n"
                         f'exec {java()} -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC '
                         f'-cp "${{CLASSPATH:+$CLASSPATH:}}{class_path("kafka4")}" "$@"\n')
    for script, cls in KAFKA_TOOLS.items():
        (top / "bin" / script).write_text(f'#!/bin/sh\nexec "$(dirname "$0")/kafka-run-class.sh" {cls} "$@"\n')
    for f in (top / "bin").iterdir():
        f.chmod(0o755)
    return top


def java_helpers(work_dir: Path, tree: Path) -> None:
    """What test.c's test_run_java needs in the runner's directory (0098's TransactionProducerCli,
    0113's IncrementalRebalanceCli): a Makefile whose `java` target compiles tests/java's classes
    (with Kafka 4.4's kafka-clients jar, as tests/java/Makefile does from $KAFKA_PATH/libs) and
    java/run-class.sh, which runs them through $KAFKA_PATH/bin/kafka-run-class.sh."""
    from kafka_oracle import class_path

    jars = class_path("kafka4").removesuffix("/*")
    (work_dir / "Makefile").write_text(f".PHONY: java\njava:\n\t@$(MAKE) -s -C {tree}/tests/java KAFKA_JARS={jars}\n")
    link = work_dir / "java"
    if not link.exists():
        link.symlink_to(tree / "tests" / "java")


def run_librdkafka(test: str, bootstrap: str | None, work_dir: Path, timeout: float = LIBRDKAFKA_TIMEOUT,
                   scenario: str = "default") -> Outcome:
    """One librdkafka test number (all its broker tests; with bootstrap None its mock tests) in
    its own process; passed when the run exits 0 and its summary lists the test's entries, every
    one PASSED (a SKIPPED one has not passed, but for the entries of the other kind, which -L or
    -l filters out)."""
    tree = librdkafka_dir()
    # The runner runs in a tests/ of its own beside a link to the tree's src/, as it would in the
    # tree (0053_stats reads ../src/statistics_schema.json).
    run_dir = work_dir / "tests"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (work_dir / "src").exists():
        (work_dir / "src").symlink_to(tree / "src")
    conf = run_dir / "test.conf"
    conf.write_text((f"bootstrap.servers={bootstrap}\n" if bootstrap else "") + "test.topic.random=true\n")
    env = {**os.environ, "TESTS": test, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": KAFKA_VERSION,
           "CI": "true", "LD_LIBRARY_PATH": f"{tree}/src:{tree}/src-cpp"}
    if bootstrap:  # as trivup sets them
        env.update(KAFKA_PATH=str(kafka_path(work_dir)), BROKERS=bootstrap, TEST_SCENARIO=scenario)
        java_helpers(run_dir, tree)
    for leftover in ("TESTS_SKIP", "TESTS_SKIP_BEFORE", "SUBTESTS", "TEST_DEBUG"):
        env.pop(leftover, None)
    log = work_dir / f"librdkafka-{test}.log"
    start = time.monotonic()
    with open(log, "wb") as out:
        try:
            rc = subprocess.run([str(tree / "tests" / "test-runner"), "-L" if bootstrap else "-l", "-p1"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=run_dir,
                                env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = None
    seconds = time.monotonic() - start
    passed, summary, states, reasons = parse_librdkafka_log(test, log.read_text(errors="replace"), rc, timeout,
                                                          scenario if bootstrap else None)
    return Outcome(test, passed, seconds, summary, log, states, reasons)


@dataclass
class Entry:
    """An entry of tests/test.c's tests[], e.g. _TEST(0045_subscribe_update_topic_remove, 0,
    TEST_BRKVER(0, 9, 0, 0), .scenario = "noautocreate")."""

    name: str  # 0045_subscribe_update_topic_remove
    flags: str  # as test.c spells them: 0, TEST_F_LOCAL, TEST_F_LOCAL | TEST_F_KNOWN_ISSUE_WIN32
    scenarios: tuple[str, ...]  # the trivup scenarios it runs in ("default" unless it names others)

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def needs_broker(self) -> bool:  # -L filters out TEST_F_LOCAL; TEST_F_MANUAL runs only by name
        return "TEST_F_LOCAL" not in self.flags and "TEST_F_MANUAL" not in self.flags


def librdkafka_entries() -> list[Entry]:
    text = (librdkafka_dir() / "tests" / "test.c").read_text()
    table = text[text.index("struct test tests[] = {"):text.index("{NULL}}")]
    entries = []
    for chunk in table.split("_TEST(")[1:]:
        m = re.match(r"(\d{4}_\w+),\s*([^,)]+)", chunk)
        scenario = re.search(r'\.scenario\s*=\s*"([^"]+)"', chunk)
        if m:
            entries.append(Entry(m.group(1), " ".join(m.group(2).split()),
                                 tuple(scenario.group(1).split(",")) if scenario else ("default",)))
    return entries


def librdkafka_broker_tests(scenario: str = "default") -> list[str]:
    """Every test number of tests/test.c with an entry that needs a broker and runs in `scenario`
    (trivup's: "default", or "noautocreate", a cluster that creates no topic on its own). The
    runner itself skips, and says why, the entries of a known issue (TEST_F_KNOWN_ISSUE), of a
    broker version other than TEST_KAFKA_VERSION's, or that need what the cluster lacks (SSL,
    SASL, a second broker's JMX)."""
    return sorted({e.number for e in librdkafka_entries() if e.needs_broker and scenario in e.scenarios})


def entries_not_run(scenario: str | None) -> set[str]:
    """What a run with -L in `scenario` (or -l, scenario None) leaves out: the other kind's entries
    (test-runner's summary lists them, "Filtered due to negative test flags") and, with -L, those of
    other scenarios (listed SKIPPED, no reason given)."""
    entries = librdkafka_entries()
    if scenario is None:
        return {e.name for e in entries if e.needs_broker}
    return {e.name for e in entries if not e.needs_broker or scenario not in e.scenarios}


def run_librdkafka_many(tests: list[str], bootstrap: str, work_dir: Path, jobs: int = 1, rerun_failed: bool = True,
                        scenario: str = "default") -> tuple[list[Outcome], list[Outcome]]:
    """Each test number in its own test-runner (-p1), `jobs` of them at a time; then those that
    did not pass once more, one at a time, to tell a flaky test from a failing one. Returns the
    first runs and the reruns."""
    from concurrent.futures import ThreadPoolExecutor

    def one(t: str, sub: str) -> Outcome:
        outcome = run_librdkafka(t, bootstrap, work_dir / sub / t, scenario=scenario)
        states = ", ".join(f"{n} {state}" for n, state in outcome.states.items())
        print(f"[{time.strftime('%H:%M:%S')}] {t} in {outcome.seconds:.0f} s: {states}", flush=True)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        first = list(pool.map(lambda t: one(t, "first"), tests))
    again = [one(o.test, "rerun") for o in first if rerun_failed and not o.passed
             and any(state not in ("PASSED", "SKIPPED") for state in o.states.values())]
    return first, again


def librdkafka_report(first: list[Outcome], again: list[Outcome]) -> str:
    """A line for every entry of the tests run (its state, its rerun's when there was one, and why
    it failed or skipped), then the counts per state of the entries (by their first run)."""
    reruns = {o.test: o for o in again}
    lines, counts = [], {}
    for o in first:
        for name, state in o.states.items():
            counts[state] = counts.get(state, 0) + 1
            r = reruns.get(o.test)
            shown = state if r is None else f"{state}, rerun {r.states.get(name, '?')}"
            reason = o.reasons.get(name) or o.reasons.get(o.test) or ""
            lines.append(f"{name:<50} {shown:<22} {o.seconds:6.0f} s  {reason}".rstrip())
    flaky = sum(1 for o in again if o.passed)
    lines.append(", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
                 + f" (entries of {len(first)} test numbers; {len(again)} rerun, {flaky} of them passed)")
    return "\n".join(lines)


def parse_librdkafka_log(test: str, output: str, rc: int | None, timeout: float,
                         scenario: str | None = "default") -> tuple[bool, str, dict[str, str], dict[str, str]]:
    """What a test-runner's output says of test number `test`: whether it passed (exit 0, every
    entry of the summary table PASSED), the verdict lines, each entry's state and why it failed or
    skipped."""
    text = ANSI.sub("", output)
    found = [(name, state, reason.strip()) for name, state, reason in SUMMARY_ROW.findall(text) if name != "<MAIN>"]
    rows = [(name, state) for name, state, reason in found if not (state == "SKIPPED" and reason == FILTERED)]
    # test.c's failures: "### Test "NAME (SUBTEST)" failed at FILE:LINE..." and the reason below it.
    lines = text.splitlines()
    failures = [f"{line}\n{lines[i + 1] if i + 1 < len(lines) else ''}"
                for i, line in enumerate(lines) if line.startswith("### Test ")]
    summary = "\n".join([*(f"{name}: {state}" for name, state in rows), *failures]) or "\n".join(lines[-15:])
    if rc is None:
        summary += f"\n(killed after {timeout:.0f} s)"
    passed = rc == 0 and bool(rows) and all(state == "PASSED" for _, state in rows)
    # Every entry's state: the summary table's; without it (the runner aborts on a failure of
    # <MAIN>, e.g. "N thread(s) still active in librdkafka" after a failed test), each entry's
    # "=== Test NAME PASSED|FAILED|SKIPPED ===" line, then FAILED for each "### Test "NAME..." failed".
    states = {name: state for name, state in VERDICT_LINE.findall(text)}
    reasons = {}
    for f in failures:  # ### Test "0081_admin (subtest)" failed at ...: the first one of each entry
        m = re.match(r'### Test "([^" ]+)', f)
        if m and m.group(1) != "<MAIN>":
            states[m.group(1)] = "FAILED"
            reasons.setdefault(m.group(1), f.replace("\n", " ")[:400])
    states.update((name, state) for name, state, _ in found)
    # (Filtered out here and not left out by entries_not_run: a known issue, TEST_F_KNOWN_ISSUE.)
    reasons.update({name: "TEST_F_KNOWN_ISSUE, not run" if reason == FILTERED else reason
                    for name, state, reason in found if state != "PASSED" and reason})
    left_out = entries_not_run(scenario)
    states = {name: state for name, state in states.items() if name.startswith(test) and name not in left_out}
    if rc is None or (rc != 0 and not any(state == "FAILED" for state in states.values())):
        # killed, or it failed without saying which test did: crashed, or <MAIN> failed
        states[test] = "TIMEOUT" if rc is None else "CRASHED"
        said = " | ".join(f for f in failures if '"<MAIN>"' in f).replace("\n", " ") or " | ".join(lines[-3:])
        reasons[test] = (f"killed after {timeout:.0f} s: " if rc is None else f"exit {rc}: ") + said[:300]
    return passed, summary, states, reasons


# go test -v's verdict lines: --- PASS: TestShareGroup (1.23s)
GO_VERDICT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)", re.MULTILINE)


def _kgo_test(run: str, bootstrap: str, log: Path, env: dict[str, str] | None,
              timeout_s: int = FRANZ_GO_TIMEOUT_S, skip: str | None = None) -> tuple[int, float, str]:
    """The kgo test binary with `-test.run RUN` (less `-test.skip SKIP`): its exit code, seconds and
    output (also in `log`)."""
    env = {**os.environ, **FRANZ_GO_ENV, "KGO_SEEDS": bootstrap, **(env or {})}
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "wb") as out:
        rc = subprocess.run([str(franz_go_binary()), "-test.run", run, "-test.v", "-test.count", "1",
                             "-test.timeout", f"{timeout_s}s", *(("-test.skip", skip) if skip else ())],
                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            cwd=franz_go_package_dir(), env=env).returncode
    return rc, time.monotonic() - start, log.read_text(errors="replace")


def run_franz_go(test: str, bootstrap: str, work_dir: Path, env: dict[str, str] | None = None) -> Outcome:
    """One kgo test, `-test.run '^TEST$'`; passed only on its own --- PASS line (a SKIP is not)."""
    log = work_dir / f"franz-go-{test}.log"
    rc, seconds, text = _kgo_test(f"^{test}$", bootstrap, log, env)
    mine = [v for v, name, _ in GO_VERDICT.findall(text) if name == test]
    summary = "\n".join(line for line in text.splitlines()
                        if GO_VERDICT.match(line) or "skip" in line.lower() or "_test.go:" in line)[-4000:]
    return Outcome(test, rc == 0 and mine == ["PASS"], seconds, summary, log)


@dataclass
class PackageRun:
    verdicts: dict[str, str]  # top-level test -> PASS, FAIL or SKIP
    reasons: dict[str, str]  # a failed or skipped test -> what it logged
    seconds: float
    log_dir: Path
    flaky: dict[str, str] = field(default_factory=dict)  # failed beside the others, passed alone -> why it failed


# Run alone after the rest of the package, not beside its other tests: 500,000 records through two
# share groups within 4 minutes, which two shared cores under the rest of CI do not always give.
FRANZ_GO_ALONE = ("TestShareGroupETL",)


def run_franz_go_package(bootstrap: str, work_dir: Path, env: dict[str, str] | None = None) -> PackageRun:
    """Every test of the kgo package, as `go test ./pkg/kgo/` runs them (in parallel where they
    say so), then those of FRANZ_GO_ALONE one at a time; then each test that failed once more,
    alone, as run_librdkafka_many does, to tell a flaky test from a failing one: some of the
    package's own tests time their client's internals (two seconds, say) with no broker involved,
    which two cores shared with the whole package do not always give."""
    alone = "|".join(FRANZ_GO_ALONE)
    _, seconds, text = _kgo_test(".", bootstrap, work_dir / "franz-go-kgo.log", env, FRANZ_GO_PACKAGE_TIMEOUT_S,
                                 skip=f"^({alone})$")
    for test in FRANZ_GO_ALONE:
        _, more_seconds, more = _kgo_test(f"^{test}$", bootstrap, work_dir / f"franz-go-{test}.log", env)
        seconds, text = seconds + more_seconds, text + more
    verdicts = {name: verdict for verdict, name, _ in GO_VERDICT.findall(text) if "/" not in name}
    reasons = {name: _said(text, name) for name, v in verdicts.items() if v != "PASS"}
    flaky = {}
    for test in [name for name, v in verdicts.items() if v == "FAIL"]:
        _, more_seconds, again = _kgo_test(f"^{test}$", bootstrap, work_dir / f"franz-go-again-{test}.log", env)
        seconds += more_seconds
        verdict = next((v for v, name, _ in GO_VERDICT.findall(again) if name == test), "FAIL")
        if verdict == "PASS":
            flaky[test] = reasons.pop(test)
            verdicts[test] = "PASS"
        else:
            reasons[test] = _said(again, test)
    return PackageRun(verdicts, reasons, seconds, work_dir, flaky)


def _said(text: str, test: str) -> str:
    """What a test logged: the indented lines after each `=== RUN|CONT|NAME  TEST` line (go test -v
    names the test again whenever another one printed in between)."""
    said, mine = [], False
    for line in text.splitlines():
        if line.startswith(("=== ", "--- ")):
            mine = line.split()[-1] == test and line.startswith("=== ")
        elif mine and line.startswith("    "):
            said.append(line)
    return "\n".join(said)[-2000:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", choices=["librdkafka", "franz-go"])
    ap.add_argument("tests", nargs="*", help="test numbers or names (default: all of issue 28's); "
                    "for librdkafka `all`: every broker test of test.c")
    ap.add_argument("--jobs", type=int, default=1, help="librdkafka: test-runners at a time (each -p1)")
    ap.add_argument("--scenario", default="default", choices=sorted(LIBRDKAFKA_SCENARIOS),
                    help="librdkafka `all`: trivup's scenario; the broker must be configured as "
                    "LIBRDKAFKA_BROKER plus LIBRDKAFKA_SCENARIOS[scenario]")
    ap.add_argument("--bootstrap", help="the broker (librdkafka's mock tests need none)")
    ap.add_argument("--mock", action="store_true", help="librdkafka's mock tests (-l), no broker")
    ap.add_argument("--work-dir", type=Path, help="where logs go (default: a new temporary dir)")
    args = ap.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix=f"share-{args.suite}-"))
    if args.suite == "librdkafka" and args.tests == ["all"]:
        if not args.bootstrap:
            ap.error("--bootstrap is needed for the broker suite")
        start = time.monotonic()
        first, again = run_librdkafka_many(librdkafka_broker_tests(args.scenario), args.bootstrap, work, args.jobs,
                                           scenario=args.scenario)
        print(librdkafka_report(first, again))
        print(f"{time.monotonic() - start:.0f} s with {args.jobs} runner(s) at a time; logs in {work}")
        return 0 if all(o.passed for o in again) else 1
    if args.suite == "librdkafka":
        tests = args.tests or (LIBRDKAFKA_MOCK_TESTS if args.mock else LIBRDKAFKA_TESTS)
        run = lambda t: run_librdkafka(t, None if args.mock else args.bootstrap, work)  # noqa: E731
    else:
        tests = args.tests or FRANZ_GO_TESTS
        run = lambda t: run_franz_go(t, args.bootstrap, work)  # noqa: E731
    if not args.mock and not args.bootstrap:
        ap.error("--bootstrap is needed (or --mock for librdkafka's mock tests)")
    failed = 0
    for test in tests:
        outcome = run(test)
        failed += not outcome.passed
        print(outcome.describe(), flush=True)
    print(f"{len(tests) - failed} of {len(tests)} passed; logs in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
