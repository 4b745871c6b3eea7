"""Fixtures for the compatibility suite: real clients against a real `samsa serve` process and,
with the same tests, against Apache Kafka 4.x (kafka_oracle.py).

The broker runs as a subprocess on a free loopback port with its own temporary log dir:

* ``broker`` (module scope): one broker shared by the tests of a module, default overrides.
* ``broker_factory`` (function scope): ``broker_factory(overrides={...})`` starts a fresh broker
  with extra settings (Kafka config names: ``--override key=value`` for Samsa, server.properties
  for Kafka); every broker it started is stopped afterwards.
* ``module_broker_factory`` (module scope): the same, its brokers stopped after the module's last
  test on that kind; a module fixture shares a broker with settings through it.
* A test that uses either runs once per broker kind, ids ``samsa`` and ``kafka`` (module-scoped:
  a module's tests run on one, then on the other). ``@pytest.mark.samsa_only("why")`` keeps a
  test (or a module, as ``pytestmark``) on Samsa only.
* ``zookeeper`` and ``kafka39_factory``: ZooKeeper and Kafka 3.9 in ZooKeeper mode.
* ``network``: test hosts in network namespaces, links the test cuts and heals (netns.py); a
  server placed on a host runs in its namespace, on its address (``host``, ``command_prefix``).

Each broker handle offers ``bootstrap`` ("127.0.0.1:PORT"), ``port``, ``data_dir``, ``stop()``
(SIGTERM, then SIGKILL after a timeout), ``kill()`` (SIGKILL, no flushing), ``start()`` and
``restart()`` (same port, same data dir), and ``output()`` (what the broker printed).

Environment:

* ``SAMSA_COMPAT_BROKERS``: the broker kinds to run, default ``samsa,kafka`` (``samsa`` alone
  where there is no Java; ``kafka`` alone to check a test against Kafka).

* ``SAMSA_COMPAT_BROKER_CMD``: run the suite against another broker. A shell-like command line
  with the placeholders ``{host}``, ``{port}`` and ``{data_dir}``, e.g. for tansu::

      tansu broker --listener-url tcp://{host}:{port} --advertised-listener-url tcp://{host}:{port}
                   --storage-engine memory://tansu/

  Such a broker cannot take overrides: tests that need any are skipped.
* ``SAMSA_COMPAT_STARTED_RE``: regex of the line that says the broker is serving (default
  ``started``, or ``started|ready`` for an external command).
"""

from __future__ import annotations

import atexit
import os
import re
import shlex
import signal
import sys
import threading
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # lets test modules `import compat_util` under any import mode
    sys.path.insert(0, str(HERE))

import class_sharing  # noqa: E402
from kafka_oracle import KafkaBroker, OracleUnavailable, ZkKafkaBroker, ZooKeeper, class_path  # noqa: E402
from server_process import (HOST, BrokerStartError, ServerProcess, free_port, port_open,  # noqa: E402,F401
                            write_properties)

START_TIMEOUT = float(os.environ.get("SAMSA_COMPAT_START_TIMEOUT", "15"))
STOP_TIMEOUT = 10.0
EXTERNAL_CMD = os.environ.get("SAMSA_COMPAT_BROKER_CMD", "").strip()
STARTED_RE = re.compile(
    os.environ.get("SAMSA_COMPAT_STARTED_RE") or ("started|ready" if EXTERNAL_CMD else "started")
)

# Every pool not yet closed, so a failing test's report can show its brokers' output.
_POOLS: set[BrokerPool] = set()


@atexit.register
def _kill_leftovers():  # pytest killed mid-test: still leave no broker behind
    for pool in list(_POOLS):
        for b in pool.brokers:
            b.kill()


def _on_sigterm(signum, frame):  # `timeout` or CI ending pytest: atexit alone would not run
    _kill_leftovers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def pytest_configure(config):
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "samsa_only(reason): runs on Samsa only (a Samsa-only config or tool)")
    config.addinivalue_line("markers", "watchdog_s(seconds): the test's brokers are killed after this long, "
                                       "not SAMSA_COMPAT_TEST_TIMEOUT's default (whichever is longer)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers (its hook runs last)
def pytest_sessionstart(session):
    """The class data sharing archives (class_sharing.py: Kafka's JVMs start about twice as fast)
    are made here, once per JDK and jars, so that no test's time and watchdog pay for it."""
    if hasattr(session.config, "workerinput") or "kafka" not in broker_kinds():
        return  # an xdist worker: the controller made them
    for profile in class_sharing.TRAININGS:
        try:
            class_path(profile)
        except OracleUnavailable:
            continue
        class_sharing.options(profile)


_LAST_RESORT: list[threading.Timer] = []
# Past this a test's brokers are killed, so that clients blocked on them fail (a test marked
# watchdog_s(seconds) gets that long if longer: one whose broker restarts alone can take minutes).
TEST_TIMEOUT = float(os.environ.get("SAMSA_COMPAT_TEST_TIMEOUT", "240"))


def _watchdog_fire(nodeid: str, timeout: float):
    import faulthandler

    sys.stderr.write(f"\n[compat-tests] {nodeid} still running after {timeout:.0f}s: "
                     "killing its brokers so blocked clients fail\n")
    faulthandler.dump_traceback(file=sys.stderr)
    for pool in list(_POOLS):
        for b in pool.brokers:
            b.kill()
    # Last resort if the test still does not end: leave no broker behind and exit.
    t = threading.Timer(60, lambda: (_kill_leftovers(), os._exit(3)))
    t.daemon = True
    t.start()
    _LAST_RESORT.append(t)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    marker = item.get_closest_marker("watchdog_s")
    timeout = max(TEST_TIMEOUT, marker.args[0]) if marker else TEST_TIMEOUT
    timer = threading.Timer(timeout, _watchdog_fire, args=(item.nodeid, timeout))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        while _LAST_RESORT:
            _LAST_RESORT.pop().cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for pool in list(_POOLS):
            for b in pool.brokers:
                report.sections.append((f"{b.name} {b.bootstrap} output (tail; all of it in {b.log_path})",
                                        b.output_tail()))


class SamsaBroker(ServerProcess):
    """`samsa serve` (or SAMSA_COMPAT_BROKER_CMD) as a subprocess."""

    kind = "samsa"
    started_re = STARTED_RE
    start_timeout = START_TIMEOUT
    stop_timeout = STOP_TIMEOUT

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None):
        super().__init__(base_dir, overrides)
        self.properties_file: Path | None = None
        if properties is not None:  # passed as `samsa serve FILE`, overrides still win
            self.properties_file = self.base_dir / "server.properties"
            write_properties(self.properties_file, properties)

    def command(self) -> list[str]:
        if EXTERNAL_CMD:
            return shlex.split(EXTERNAL_CMD.format(host=self.host, port=self.port, data_dir=self.data_dir))
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        settings.update(self.overrides)
        cmd = [sys.executable, "-m", "samsa.server.main", "serve"]
        if os.environ.get("SAMSA_COMPAT_LOG_LEVEL"):  # DEBUG logs every request and response
            cmd += ["--log-level", os.environ["SAMSA_COMPAT_LOG_LEVEL"]]
        if self.properties_file is not None:
            cmd.append(str(self.properties_file))
        for k, v in settings.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd


def broker_kinds() -> list[str]:
    kinds = [k.strip() for k in os.environ.get("SAMSA_COMPAT_BROKERS", "samsa,kafka").split(",") if k.strip()]
    unknown = set(kinds) - set(BROKER_CLASSES)
    if unknown:
        raise pytest.UsageError(f"SAMSA_COMPAT_BROKERS: unknown {sorted(unknown)}; known: {sorted(BROKER_CLASSES)}")
    return kinds


def pytest_generate_tests(metafunc):
    """Every test that uses `broker` or `broker_factory` runs once per broker kind (module-scoped,
    so a module's tests run on Samsa, then on Kafka); a test marked samsa_only runs on Samsa only."""
    if "broker_kind" not in metafunc.fixturenames:
        return
    kinds = broker_kinds()
    if metafunc.definition.get_closest_marker("samsa_only"):
        kinds = [k for k in kinds if k == "samsa"]
    metafunc.parametrize("broker_kind", kinds, indirect=True, scope="module", ids=kinds)


def pytest_collection_modifyitems(config, items):
    """A parameter marked samsa_only (pytest.param(..., marks=pytest.mark.samsa_only("why"))) is
    skipped on Kafka: pytest_generate_tests sees only the marks of the test function."""
    for item in items:
        marker = item.get_closest_marker("samsa_only")
        callspec = getattr(item, "callspec", None)
        if marker is not None and callspec is not None and callspec.params.get("broker_kind") == "kafka":
            item.add_marker(pytest.mark.skip(reason=f"Samsa only: {' '.join(map(str, marker.args))}"))


@pytest.fixture(scope="module")
def broker_kind(request) -> str:
    """'samsa' or 'kafka': which broker `broker` and `broker_factory` start."""
    return request.param


class BrokerPool:
    """Starts servers on request and stops every one of them on close()."""

    def __init__(self, tmp_factory, label: str, kind: str = "samsa"):
        self.tmp_factory = tmp_factory
        self.label = label
        self.kind = kind
        self.brokers: list[ServerProcess] = []
        _POOLS.add(self)

    def __call__(self, overrides: dict[str, object] | None = None, start: bool = True,
                 properties: dict[str, object] | None = None) -> ServerProcess:
        """A broker of the pool's kind; overrides and properties are Kafka config names."""
        if (overrides or properties) and EXTERNAL_CMD and self.kind == "samsa":
            pytest.skip(f"external broker command cannot take settings {overrides or properties}")
        cls = BROKER_CLASSES[self.kind]
        return self._start(lambda d: cls(d, overrides, properties), start)

    def zookeeper(self, overrides: dict[str, object] | None = None, start: bool = True) -> ZooKeeper:
        """overrides: zoo.cfg settings (tickTime bounds the session timeouts it grants)."""
        return self._start(lambda d: ZooKeeper(d, overrides), start)

    def kafka39(self, zookeeper_connect: str, overrides: dict[str, object] | None = None,
                start: bool = True) -> ZkKafkaBroker:
        return self._start(lambda d: ZkKafkaBroker(d, zookeeper_connect, overrides), start)

    def _start(self, make, start: bool):
        last_err = None
        for _ in range(3):  # the free port may be taken between probing and binding
            b = make(self.tmp_factory.mktemp(self.label))
            self.brokers.append(b)
            if not start:
                return b
            try:
                return b.start()
            except BrokerStartError as e:
                last_err = e
                if "in use" not in b.output().lower():
                    raise
        raise last_err

    def close(self) -> None:
        _POOLS.discard(self)
        for b in reversed(self.brokers):  # brokers before the ZooKeeper they use
            try:
                if b.graceful_teardown:
                    b.stop()
                else:
                    b.kill()
            except Exception:  # keep stopping the others
                b.kill()


BROKER_CLASSES = {"samsa": SamsaBroker, "kafka": KafkaBroker}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, broker_kind):
    """One broker per module (auto topic creation on, one partition by default)."""
    pool = BrokerPool(tmp_path_factory, broker_kind, broker_kind)
    try:
        yield pool()
    finally:
        pool.close()


@pytest.fixture
def broker_factory(tmp_path_factory, broker_kind):
    """broker_factory(overrides={...}, properties={...}, start=True): a fresh broker of this
    test's kind; every one is stopped at the end of the test."""
    pool = BrokerPool(tmp_path_factory, broker_kind, broker_kind)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory, broker_kind):
    """Like broker_factory, but what it starts lives until the module's tests on this broker kind
    are done: for a broker with settings that several tests share (a Kafka start costs 5-15 s)."""
    pool = BrokerPool(tmp_path_factory, broker_kind, broker_kind)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def zookeeper(tmp_path_factory) -> ZooKeeper:
    """A ZooKeeper server (Kafka 3.9's) on a free loopback port."""
    pool = BrokerPool(tmp_path_factory, "zookeeper")
    try:
        yield pool.zookeeper()
    finally:
        pool.close()


@pytest.fixture
def kafka39_factory(tmp_path_factory):
    """kafka39_factory.zookeeper(), kafka39_factory.kafka39(zookeeper_connect, overrides=...):
    Apache Kafka 3.9 in ZooKeeper mode; everything started is stopped at the end of the test."""
    pool = BrokerPool(tmp_path_factory, "kafka39")
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def network():
    """Test hosts in network namespaces whose links a test cuts (netns.py): `network.host(name)`,
    `network.place(server, host)` before the server starts, `cut`, `isolate`, `heal`. Skips where
    namespaces cannot be made. Request it before the factory of the servers it holds: they stop first."""
    import netns

    why = netns.unavailable()
    if why:
        pytest.skip(why)
    network = netns.Network()
    try:
        yield network
    finally:
        network.close()


@pytest.fixture
def topic_name(request):
    """A fresh topic name that no other test uses."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
