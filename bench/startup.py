"""Samsa's startup time and memory with many partitions after a clean shutdown (issue 7's target:
10,000 partitions in under 10 s), without the rest of `bench/run.py`.

    python bench/startup.py                          # 10,000 partitions, 50 MB, 3 restarts
    python bench/startup.py --keep /tmp/s10k         # keep the data; later runs reuse it
    python bench/startup.py --data-dir /tmp/s10k     # restarts only, on that data

It creates one topic with the partitions, produces 1 KB records across them (as the growth
series of `bench/run.py` does), stops the broker with SIGTERM and times each restart until it
answers ApiVersions (and the broker's CPU seconds until then, which a busy machine does not
inflate), then the resident memory a second after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import load  # noqa: E402
from systems import Samsa, cpu_seconds, rss_bytes  # noqa: E402

TOPIC = "startup"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--bytes", type=int, default=50_000_000, help="produced across the partitions")
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, help="reuse the data a previous --keep left")
    parser.add_argument("--keep", type=Path, help="keep the data here for later runs")
    args = parser.parse_args()

    system = Samsa()
    if args.data_dir:
        shutil.rmtree(system.data_dir)
        system.data_dir = args.data_dir
    try:
        print(f"load average {os.getloadavg()[0]:.1f}")
        first = system.start(timeout=300)
        print(f"first start: {first:.2f} s")
        if not args.data_dir:
            started = time.monotonic()
            system.create_topic(TOPIC, args.partitions, timeout=600)
            print(f"created {args.partitions} partitions in {time.monotonic() - started:.1f} s")
            if args.bytes:
                run = load.produce(system.bootstrap, system.pid, TOPIC, args.partitions, 1024, args.bytes)
                print(f"produced {run.bytes / 1e6:.0f} MB in {run.seconds:.1f} s")
        time.sleep(1)
        print(f"RSS before restart: {rss_bytes(system.pid) / 1e6:.1f} MB")
        seconds = []
        for attempt in range(args.restarts):
            system.stop()
            seconds.append(system.start(timeout=300))
            cpu = cpu_seconds(system.pid)
            time.sleep(1)
            print(f"restart {attempt + 1}: {seconds[-1]:.2f} s ({cpu:.2f} CPU s), RSS {rss_bytes(system.pid) / 1e6:.1f} MB, "
                  f"load average {os.getloadavg()[0]:.1f}")
        print(f"startup with {args.partitions} partitions: median {statistics.median(seconds):.2f} s")
    finally:
        system.stop()
        if args.keep and not args.data_dir:
            shutil.copytree(system.data_dir, args.keep, dirs_exist_ok=True)
        if not args.data_dir:
            system.close()


if __name__ == "__main__":
    main()
