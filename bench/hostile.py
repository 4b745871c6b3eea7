"""A well-behaved client's latency while hostile and careless clients load the same broker (issue 17),
side by side with the same client on the idle broker, in one run.

    python bench/hostile.py                 # 5 s per case
    python bench/hostile.py --seconds 20

The well-behaved client sends small Produce requests (acks=1, one 100-byte record) one at a time and
times each round trip. The cases, each started, measured and stopped in turn on one `samsa serve`:

- idle: nothing else;
- idle-1000: a thousand connections that did one ApiVersions exchange and stay idle;
- slowloris-300: three hundred connections that announce a 100 MB frame and send a byte a second;
- never-reads: a client that pipelines Metadata requests and never reads the answers;
- flood: a client that pipelines ApiVersions requests as fast as it can and reads the answers;
- churn: connections opened and closed in a loop, half of them after one request.

Printed per case: p50, p99 and p99.9 of the round trip, p99 over the idle broker's, requests measured,
and the broker's peak resident memory. The issue's target: p99 within 2x of the idle broker's.

The hostile load runs in a process of its own (`--load-in-client-process`: in the timed client's,
where its threads share that client's GIL, as the first version of this bench had it). With
SAMSA_BENCH_BASE=DIR (another checkout, as bench/run.py's samsa-base), that checkout's broker runs
too; with --override KEY=VALUE, one more broker of this checkout with those configs. Each case is
measured on every broker in turn, `--reps` times, and the medians are printed side by side.
With --probe, each broker runs under bench/serve_probed.py, and its CPU use and the CPU time of its
scheduler batches (what an arriving request may find ahead of it) are printed too.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import signal
import statistics
import socket
import struct
import sys
import threading
import time

from confluent_kafka.admin import NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from load import open_idle_connections, percentile  # noqa: E402
from per_request import _frame, one_record_batch, produce_request  # noqa: E402
from systems import Samsa, SamsaBase, rss_bytes  # noqa: E402

API_VERSIONS_V0 = _frame(18, 0, 1, b"")
METADATA_V0_ALL = _frame(3, 0, 1, struct.pack(">i", 0))


def well_behaved_latencies(port: int, topic: str, seconds: float) -> list[float]:
    batch = one_record_batch(b"x" * 100)
    latencies = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.monotonic() + seconds
        correlation_id = 0
        while time.monotonic() < deadline:
            correlation_id += 1
            started = time.perf_counter()
            sock.sendall(produce_request(topic, batch, correlation_id))
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            sock.recv(size, socket.MSG_WAITALL)
            latencies.append((time.perf_counter() - started) * 1e6)
    return sorted(latencies)


class Load:
    """A hostile load in background threads until stop()."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stopping = threading.Event()
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []

    def start(self) -> Load:
        return self

    def thread(self, target) -> None:
        t = threading.Thread(target=target, daemon=True)
        t.start()
        self.threads.append(t)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return sock

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(30)
        for sock in self.sockets:
            sock.close()


class Idle1000(Load):
    def start(self) -> Load:
        self.sockets = open_idle_connections(self.port, 1000)
        return self


class Slowloris(Load):
    def start(self) -> Load:
        self.sockets = [self.connect() for _ in range(300)]
        for sock in self.sockets:
            sock.sendall(struct.pack(">i", 100_000_000))
        self.thread(self._trickle)
        return self

    def _trickle(self) -> None:
        while not self.stopping.wait(1.0):
            for sock in self.sockets:
                sock.sendall(b"\x00")


class NeverReads(Load):
    def start(self) -> Load:
        sock = self.connect()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(0.2)
        self.sockets = [sock]
        self.thread(lambda: self._pipeline(sock))
        return self

    def _pipeline(self, sock: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                sock.sendall(METADATA_V0_ALL * 16)
            except (TimeoutError, OSError):
                pass  # the broker stopped reading: what is being measured


class Flood(Load):
    def start(self) -> Load:
        sock = self.connect()
        self.sockets = [sock]
        self.thread(lambda: self._send(sock))
        self.thread(lambda: self._read(sock))
        return self

    def _send(self, sock: socket.socket) -> None:
        burst = API_VERSIONS_V0 * 64
        while not self.stopping.is_set():
            try:
                sock.sendall(burst)
            except (TimeoutError, OSError):
                return  # stopping: the reader no longer takes the answers

    def _read(self, sock: socket.socket) -> None:
        sock.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                if not sock.recv(1 << 20):
                    return
            except (TimeoutError, OSError):
                continue


class Churn(Load):
    def start(self) -> Load:
        self.thread(self._churn)
        return self

    def _churn(self) -> None:
        n = 0
        while not self.stopping.is_set():
            sock = self.connect()
            if n % 2:
                sock.sendall(API_VERSIONS_V0)
            sock.close()
            n += 1


CASES = {"idle": Load, "idle-1000": Idle1000, "slowloris-300": Slowloris, "never-reads": NeverReads,
         "flood": Flood, "churn": Churn}


def _load_process(case: str, port: int, ready, stop) -> None:
    load = CASES[case](port).start()
    ready.set()
    stop.wait()
    load.stop()


class LoadProcess:
    """A case's load in a process of its own: its threads take no GIL from the timed client."""

    def __init__(self, case: str, port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.ready, self.stopping = context.Event(), context.Event()
        self.process = context.Process(target=_load_process, args=(case, port, self.ready, self.stopping),
                                       daemon=True)

    def start(self) -> LoadProcess:
        self.process.start()
        if not self.ready.wait(120):
            raise RuntimeError("the load process did not start")
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.process.join(60)


PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_probed.py")


def probed(broker: Samsa) -> Samsa:
    """The broker run under bench/serve_probed.py, which measures its scheduler batches."""
    command = broker._command
    broker._command = lambda: [sys.executable, PROBE] + command()[3:]  # in place of `-m samsa`
    broker.probe_out = f"{broker.data_dir}.probe.json"
    env = broker._env
    broker._env = lambda: {**env(), "SAMSA_PROBE_OUT": broker.probe_out}
    return broker


def probe_figures(broker: Samsa, signum: int) -> dict:
    if not hasattr(broker, "probe_out"):
        return {}
    if signum == signal.SIGUSR2:
        os.kill(broker.pid, signum)
        return {}
    if os.path.exists(broker.probe_out):
        os.remove(broker.probe_out)
    os.kill(broker.pid, signum)
    deadline = time.monotonic() + 10
    while not os.path.exists(broker.probe_out) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # written whole by then: one small json.dump
    with open(broker.probe_out) as f:
        return json.load(f)


def measure(broker: Samsa, topic: str, case: str, seconds: float, in_client_process: bool) -> tuple:
    load = (CASES[case](broker.port) if in_client_process else LoadProcess(case, broker.port)).start()
    try:
        peak = rss_bytes(broker.pid)
        probe_figures(broker, signal.SIGUSR2)
        latencies = well_behaved_latencies(broker.port, topic, seconds)
        probe = probe_figures(broker, signal.SIGUSR1)
        peak = max(peak, rss_bytes(broker.pid))
    finally:
        load.stop()
    return (percentile(latencies, 0.5), percentile(latencies, 0.99), percentile(latencies, 0.999),
            len(latencies), peak / 2**20, probe.get("cpu_per_second", math.nan), probe.get("batch_cpu_p99_us", math.nan))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds the client is timed per case")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, from: " + ", ".join(CASES))
    parser.add_argument("--reps", type=int, default=1, help="repetitions of every case; medians are printed")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for one more broker of this checkout, measured alongside")
    parser.add_argument("--probe", action="store_true",
                        help="run the brokers under bench/serve_probed.py: their CPU use and scheduler batches' CPU")
    parser.add_argument("--load-in-client-process", action="store_true",
                        help="run the hostile load in the timed client's process (threads sharing its GIL)")
    args = parser.parse_args()
    cases = ["idle"] + [c for c in args.cases.split(",") if c and c != "idle"]
    brokers = ([SamsaBase()] if os.environ.get("SAMSA_BENCH_BASE") else []) + [Samsa()]
    if args.override:
        configured = Samsa()
        configured.name, configured.overrides = "samsa-configured", tuple(args.override)
        brokers.append(configured)
    topic = "hostile-bench"
    if args.probe:
        brokers = [probed(broker) for broker in brokers]
    runs: dict[tuple[str, str], list[tuple]] = {}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    try:
        for broker in brokers:
            broker.start()
            broker.admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            well_behaved_latencies(broker.port, topic, 1.0)  # warm-up
        for _ in range(args.reps):
            for case in cases:
                for broker in brokers:
                    runs.setdefault((broker.name, case), []).append(
                        measure(broker, topic, case, args.seconds, args.load_in_client_process))
    finally:
        for broker in brokers:
            broker.close()
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for broker in brokers:
        idle_p99 = statistics.median(r[1] for r in runs[(broker.name, "idle")])
        configs = f", {' '.join(broker.overrides)}" if broker.overrides else ""
        print(f"\n{broker.name} ({broker.checkout}{configs}), medians of {args.reps}")
        probe_columns = f"{'CPU s/s':>9}{'batch CPU p99 us':>18}" if args.probe else ""
        print(f"{'case':<15}{'p50 us':>10}{'p99 us':>10}{'p99.9 us':>10}{'p99/idle':>10}{'requests':>10}{'RSS MB':>9}"
              + probe_columns)
        for case in cases:
            rows = runs[(broker.name, case)]
            p50, p99, p999, count, _, cpu, batch_p99 = (statistics.median(r[i] for r in rows) for i in range(7))
            rss = max(r[4] for r in rows)
            probe = f"{cpu:>9.2f}{batch_p99:>18.0f}" if args.probe else ""
            print(f"{case:<15}{p50:>10.0f}{p99:>10.0f}{p999:>10.0f}{p99 / idle_p99:>10.2f}{count:>10.0f}{rss:>9.0f}"
                  + probe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
