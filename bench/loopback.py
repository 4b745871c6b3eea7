"""What moving a log's bytes from one process to another over 127.0.0.1 costs each side, with no
broker in the way: the floor under what replication adds to a cluster's CPU on one machine.

A leader answers a follower's Fetch by `sendfile` from its log segment; on loopback the sending
thread also runs the receiving socket's TCP input (the packet never leaves the kernel), so the
leader pays for part of each follower's receive. Here a sender process sends a file (in the page
cache, as a just-appended segment is) to a receiver process that reads it into one reused buffer
and appends it to a file of its own, as a follower appends what it fetched; each side's CPU per MB
comes from getrusage, as `bench/replicated.py` counts a broker's. The sender's socket buffers are
Kafka's (the leader's `socket.send.buffer.bytes` 102400, the follower's
`replica.socket.receive.buffer.bytes` 65536) or the OS's, and it sends blocking or non-blocking,
waiting on poll for room, as a broker waits on epoll.

    python bench/loopback.py                 # 256 MB a round, 5 rounds: medians and ranges
    python bench/loopback.py --mb 512 --rounds 9

What the figures showed: bench/README.md, "What replication costs on one machine".
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import socket
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20  # what a follower's fetch carries per partition (replica.fetch.max.bytes)
KAFKA_SNDBUF = 102_400  # socket.send.buffer.bytes
KAFKA_REPLICA_RCVBUF = 65_536  # replica.socket.receive.buffer.bytes


@dataclass(frozen=True)
class Setting:
    name: str
    sndbuf: int | None  # None: the OS's (autotuned)
    rcvbuf: int | None
    blocking: bool


SETTINGS = [
    Setting("Kafka's buffers, sender non-blocking (a broker)", KAFKA_SNDBUF, KAFKA_REPLICA_RCVBUF, False),
    Setting("Kafka's buffers, sender blocking", KAFKA_SNDBUF, KAFKA_REPLICA_RCVBUF, True),
    Setting("the OS's buffers, sender non-blocking", None, None, False),
]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def receive(port: int, rcvbuf: int | None, total: int, sink: Path, report: int) -> None:
    """The follower's side, in a child process: read `total` bytes, appending each read to `sink`."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    started, got = cpu_seconds(), 0
    while got < total:
        n = sock.recv_into(buffer)
        if not n:
            break
        os.write(fd, view[:n])
        got += n
    os.write(report, f"{cpu_seconds() - started}".encode())
    os.close(fd)


def send(conn: socket.socket, source: int, size: int, total: int, blocking: bool) -> None:
    """The leader's side: `total` bytes of the file, CHUNK at a time, by sendfile."""
    conn.setblocking(blocking)
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLOUT)
    sent = 0
    while sent < total:
        offset = sent % size
        try:
            sent += os.sendfile(conn.fileno(), source, offset, min(CHUNK, size - offset))
        except BlockingIOError:
            poller.poll()


def one_round(setting: Setting, source: Path, total: int, scratch: Path) -> tuple[float, float]:
    """Sender's and receiver's CPU ms per MB for `total` bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    report_r, report_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            receive(port, setting.rcvbuf, total, scratch / "sink", report_w)
        finally:
            os._exit(0)
    conn, _ = listener.accept()
    if setting.sndbuf is not None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, setting.sndbuf)
    fd = os.open(source, os.O_RDONLY)
    started = cpu_seconds()
    send(conn, fd, os.path.getsize(source), total, setting.blocking)
    sender = cpu_seconds() - started
    os.close(fd)
    os.waitpid(child, 0)
    receiver = float(os.read(report_r, 64))
    for closing in (conn, listener):
        closing.close()
    os.close(report_r)
    os.close(report_w)
    mb = total / 1e6
    return sender * 1000 / mb, receiver * 1000 / mb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="MB a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    total = args.mb << 20
    with tempfile.TemporaryDirectory(prefix="bench-loopback-") as scratch_dir:
        scratch = Path(scratch_dir)
        source = scratch / "segment"
        source.write_bytes(os.urandom(min(total, 64 << 20)))  # in the page cache, as a segment just appended
        figures: dict[str, list[tuple[float, float]]] = {s.name: [] for s in SETTINGS}
        for _ in range(args.rounds):  # settings alternate, so that the VM's moods fall on each
            for setting in SETTINGS:
                figures[setting.name].append(one_round(setting, source, total, scratch))
    print(f"CPU ms per MB, {args.rounds} rounds of {args.mb} MB: median (range)")
    print(f"{'':52s} {'sender':>22s} {'receiver (recv + write)':>26s}")
    for name, rounds in figures.items():
        cells = []
        for side in (0, 1):
            values = [r[side] for r in rounds]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
        print(f"{name:52s} {cells[0]:>22s} {cells[1]:>26s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
