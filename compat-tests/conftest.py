"""Fixtures for the compatibility suite: real clients against a real `samsa serve` process.

The broker runs as a subprocess on a free loopback port with its own temporary log dir:

* ``broker`` (module scope): one broker shared by the tests of a module, default overrides.
* ``broker_factory`` (function scope): ``broker_factory(overrides={...})`` starts a fresh broker
  with extra ``--override key=value`` settings; every broker it started is stopped afterwards.

Each broker handle offers ``bootstrap`` ("127.0.0.1:PORT"), ``port``, ``data_dir``, ``stop()``
(SIGTERM, then SIGKILL after a timeout), ``kill()`` (SIGKILL, no flushing), ``start()`` and
``restart()`` (same port, same data dir), and ``output()`` (what the broker printed).

Environment:

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
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # lets test modules `import compat_util` under any import mode
    sys.path.insert(0, str(HERE))

HOST = "127.0.0.1"
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


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


_LAST_RESORT: list[threading.Timer] = []
TEST_TIMEOUT = float(os.environ.get("SAMSA_COMPAT_TEST_TIMEOUT", "240"))


def _watchdog_fire(nodeid: str):
    import faulthandler

    sys.stderr.write(f"\n[compat-tests] {nodeid} still running after {TEST_TIMEOUT:.0f}s: "
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
    timer = threading.Timer(TEST_TIMEOUT, _watchdog_fire, args=(item.nodeid,))
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
                report.sections.append((f"broker {b.name} {b.bootstrap} output (tail)", b.output_tail()))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


class BrokerStartError(RuntimeError):
    pass


class Broker:
    """A broker subprocess. Not started by the constructor."""

    _seq = 0

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None,
                 properties: dict[str, object] | None = None):
        Broker._seq += 1
        self.name = f"b{Broker._seq}"
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.base_dir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.base_dir / "broker.log"
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.properties_file: Path | None = None
        if properties is not None:  # passed as `samsa serve FILE`, overrides still win
            self.properties_file = self.base_dir / "server.properties"
            self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.starts = 0
        self.last_returncode: int | None = None
        self.sigterm_timed_out = False

    # -- addresses ---------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    # -- command line -----------------------------------------------------------------------
    def command(self) -> list[str]:
        if EXTERNAL_CMD:
            return shlex.split(EXTERNAL_CMD.format(host=HOST, port=self.port, data_dir=self.data_dir))
        settings = {
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        settings.update(self.overrides)
        cmd = [sys.executable, "-m", "samsa.server.cli", "serve"]
        if os.environ.get("SAMSA_COMPAT_LOG_LEVEL"):  # DEBUG logs every request and response
            cmd += ["--log-level", os.environ["SAMSA_COMPAT_LOG_LEVEL"]]
        if self.properties_file is not None:
            cmd.append(str(self.properties_file))
        for k, v in settings.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> Broker:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.starts += 1
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n===== start #{self.starts}: {shlex.join(self.command())}\n".encode())
        self._log.flush()
        offset = self._log.tell()
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=str(self.base_dir),
            env=env,
            start_new_session=True,  # a Ctrl-C of pytest must not reach the broker first
        )
        deadline = time.monotonic() + timeout
        seen_started = False
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._reap()
                raise BrokerStartError(
                    f"broker exited with code {rc} before serving\n{self.output_tail()}"
                )
            if not seen_started:
                seen_started = bool(STARTED_RE.search(self._read_from(offset)))
            if seen_started and port_open(self.port):
                return self
            if time.monotonic() > deadline:
                what = "port never accepted connections" if seen_started else (
                    f"no line matching {STARTED_RE.pattern!r}")
                self.kill()
                raise BrokerStartError(
                    f"broker not serving on {self.bootstrap} after {timeout:.0f}s ({what})\n"
                    f"{self.output_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code (None if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._log_note(f"did not exit {timeout}s after SIGTERM: SIGKILL")
                self.proc.kill()
                self.proc.wait(10)
                self.sigterm_timed_out = True
                self._reap()
                return None
        return self._reap()

    def kill(self) -> None:
        """kill -9: no chance to flush anything."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._reap()

    def restart(self, timeout: float = START_TIMEOUT) -> Broker:
        self.stop()
        return self.start(timeout)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _reap(self) -> int | None:
        rc = self.proc.returncode if self.proc is not None else None
        if self.proc is not None and rc is not None:
            self.last_returncode = rc
            self._log_note(f"exited with code {rc}")
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return rc

    def _log_note(self, msg: str) -> None:
        with open(self.log_path, "ab") as f:
            f.write(f"===== [compat-tests] {msg}\n".encode())

    # -- output -----------------------------------------------------------------------------
    def _read_from(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def output(self) -> str:
        return self._read_from(0)

    def output_tail(self, chars: int = 6000) -> str:
        out = self.output()
        return out if len(out) <= chars else "...\n" + out[-chars:]

    def __repr__(self):
        return f"<Broker {self.name} {self.bootstrap} running={self.is_running()}>"


class BrokerPool:
    """Starts brokers on request and stops every one of them on close()."""

    def __init__(self, tmp_factory, label: str):
        self.tmp_factory = tmp_factory
        self.label = label
        self.brokers: list[Broker] = []
        _POOLS.add(self)

    def __call__(self, overrides: dict[str, object] | None = None, start: bool = True,
                 properties: dict[str, object] | None = None) -> Broker:
        if (overrides or properties) and EXTERNAL_CMD:
            pytest.skip(f"external broker command cannot take settings {overrides or properties}")
        last_err = None
        for _ in range(3):  # the free port may be taken between probing and binding
            b = Broker(self.tmp_factory.mktemp(self.label), overrides, properties)
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
        for b in self.brokers:
            try:
                b.stop()
            except Exception:  # keep stopping the others
                b.kill()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request):
    """One broker per module (auto topic creation on, one partition by default)."""
    pool = BrokerPool(tmp_path_factory, "broker")
    try:
        yield pool()
    finally:
        pool.close()


@pytest.fixture
def broker_factory(tmp_path_factory, request):
    pool = BrokerPool(tmp_path_factory, "broker")
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def topic_name(request):
    """A fresh topic name that no other test uses."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
