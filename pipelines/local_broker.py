"""A `samsa serve` of the pipeline's own, for a run without --bootstrap: on a free loopback port with
its log directory under the run's work directory, stopped (SIGTERM, a clean shutdown) at the end."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def local_broker(work_dir: Path, start_timeout: float = 30.0):
    """Yields the bootstrap address of a broker that runs until the block ends."""
    port = free_port()
    log_path = work_dir / "broker.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.server.main", "serve",
             "--override", f"listeners=PLAINTEXT://{HOST}:{port}",
             "--override", f"log.dirs={work_dir / 'broker-data'}"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + start_timeout
        while not accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"samsa serve did not start on port {port}; see {log_path}")
            time.sleep(0.1)  # polling a port that is not open yet
        yield f"{HOST}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
