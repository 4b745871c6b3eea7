"""A server the compatibility tests run as a subprocess (Samsa, Apache Kafka, ZooKeeper): started in
its own directory on a free loopback port, ready when a line of its output says so and its port
accepts connections, stopped with SIGTERM (SIGKILL after a timeout) or killed with SIGKILL.

Subclasses say how to run it (`command()`), what to do before the first start (`prepare()`),
which line means ready (`started_re`) and how long to wait. Everything it prints goes to
`<base_dir>/broker.log` (also kept across restarts), which `output()` returns.

Plain Python, no pytest: conftest.py and `python -m kafka_oracle` both use it.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_open(port: int, timeout: float = 0.2, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class BrokerStartError(RuntimeError):
    pass


class ServerProcess:
    """A server subprocess. Not started by the constructor."""

    kind = "server"
    started_re = re.compile("started")
    start_timeout = 15.0
    stop_timeout = 10.0
    log_name = "broker.log"
    graceful_teardown = True  # a fixture's teardown stops it with stop(), else with kill()
    _seq = 0

    def __init__(self, base_dir: Path, overrides: dict[str, object] | None = None):
        ServerProcess._seq += 1
        self.name = f"{self.kind}{ServerProcess._seq}"
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.base_dir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.base_dir / self.log_name
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.port = free_port()
        # Where it listens (and what it advertises), and what its command line starts with: a test
        # may run it on another host, e.g. `ip netns exec NS` with the namespace's address (netns.py).
        self.host = HOST
        self.command_prefix: list[str] = []
        # Environment variables set for the server's process, e.g. KAFKA_OPTS (Kafka's system
        # properties, which both Samsa and kafka_oracle's JVMs read from it).
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.starts = 0
        self.last_returncode: int | None = None
        self.sigterm_timed_out = False

    # -- what subclasses define -------------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Runs before every start (write config files; format storage on the first)."""

    def ready(self) -> bool:
        """Called once the started line was seen: is the server serving?"""
        return port_open(self.port, host=self.host)

    # -- addresses ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float | None = None) -> ServerProcess:
        assert self.proc is None or self.proc.poll() is not None, f"{self.kind} already running"
        timeout = self.start_timeout if timeout is None else timeout
        self.starts += 1
        self.prepare()
        cmd = self.command_prefix + self.command()
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n===== start #{self.starts}: {shlex.join(cmd)}\n".encode())
        self._log.flush()
        offset = self._log.tell()
        env = {**os.environ, **self.env}
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=str(self.base_dir),
            env=env,
            start_new_session=True,  # a Ctrl-C of pytest must not reach the server first
        )
        deadline = time.monotonic() + timeout
        seen_started = False
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._reap()
                raise BrokerStartError(
                    f"{self.kind} exited with code {rc} before serving\n{self.output_tail()}"
                )
            if not seen_started:
                seen_started = bool(self.started_re.search(self._read_from(offset)))
            if seen_started and self.ready():
                return self
            if time.monotonic() > deadline:
                what = "port never accepted connections" if seen_started else (
                    f"no line matching {self.started_re.pattern!r}")
                self.kill()
                raise BrokerStartError(
                    f"{self.kind} not serving on {self.bootstrap} after {timeout:.0f}s ({what})\n"
                    f"{self.output_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code (None if it was not running)."""
        timeout = self.stop_timeout if timeout is None else timeout
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

    def restart(self, timeout: float | None = None) -> ServerProcess:
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
        return f"<{type(self).__name__} {self.name} {self.bootstrap} running={self.is_running()}>"


def write_properties(path: Path, settings: dict[str, object]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
