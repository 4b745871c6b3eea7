"""`samsa serve` with a probe of the event loop, for bench/hostile.py --probe: what a request that
arrives finds ahead of it, in the broker's own CPU time (which the load of a shared machine does not
inflate as it does wall time).

    python bench/serve_probed.py serve --override ...    # as `python -m samsa.server.main serve ...`

A scheduler batch is what trio runs between two polls of the sockets; a request that arrives waits
for the rest of the batch under way and its turn in the next. On SIGUSR2 the probe starts over;
on SIGUSR1 it writes the batches' CPU time (p50, p99, p99.9, max, in us), the tasks per batch and
the broker's CPU use (seconds per second since the start over) as JSON to $SAMSA_PROBE_OUT.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import trio


class BatchProbe(trio.abc.Instrument):
    def __init__(self) -> None:
        self.reset()

    def reset(self, *_) -> None:
        self.batches: list[int] = []
        self.tasks: list[int] = []
        self.started_cpu, self.started = time.process_time(), time.monotonic()
        self.batch_start: int | None = None
        self.steps = 0

    def after_io_wait(self, timeout: float) -> None:
        self.batch_start, self.steps = time.thread_time_ns(), 0

    def before_task_step(self, task) -> None:
        self.steps += 1

    def before_io_wait(self, timeout: float) -> None:
        # Read once: reset() runs as a signal handler, between any two lines here (and trio drops
        # an instrument that raises).
        batch_start, steps = self.batch_start, self.steps
        if batch_start is not None:
            self.batches.append(time.thread_time_ns() - batch_start)
            self.tasks.append(steps)

    def report(self, *_) -> None:
        batches, tasks = sorted(self.batches), sorted(self.tasks)

        def at(values: list[int], q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))] if values else 0

        figures = {"cpu_per_second": (time.process_time() - self.started_cpu) / (time.monotonic() - self.started),
                   "batches": len(batches), "tasks_per_batch_p99": at(tasks, 0.99),
                   **{f"batch_cpu_{name}_us": at(batches, q) / 1000
                      for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))}}
        with open(os.environ["SAMSA_PROBE_OUT"], "w") as f:
            json.dump(figures, f)


def main() -> int:
    probe = BatchProbe()
    signal.signal(signal.SIGUSR2, probe.reset)
    signal.signal(signal.SIGUSR1, probe.report)
    run = trio.run

    def probed_run(*args, **kwargs):
        kwargs.setdefault("instruments", []).append(probe)
        return run(*args, **kwargs)

    trio.run = probed_run
    from samsa.server.main import main as samsa_main
    return samsa_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
