"""bench/run.py must not crash: a few seconds of it, against Samsa, the ceiling and the trio floor only
(Samsa and the ceiling also with the OS's receive buffers).

Figures are printed, never asserted (the suite is no place for timed assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"


def test_quick_per_request_section_runs_against_samsa_the_ceiling_and_the_trio_floor():
    result = subprocess.run([sys.executable, str(RUN), "--quick", "--systems",
                             "samsa,samsa-os-rcvbuf,ceiling,ceiling-os-rcvbuf,trio-floor",
                             "--sections", "requests"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split("  ")[0]: line for line in result.stdout.splitlines()}
    for row in ("produce request of one 1 KB record, broker CPU (us)", "fetch request of one 1 KB record, round trip (us)",
                "produce requests of 1 MB, broker cpu ms/MB"):
        assert row in rows and "n/a" not in rows[row], result.stdout
    assert "notes:" not in result.stdout, result.stdout


def test_the_produce_section_runs_with_two_producers_at_once():
    result = subprocess.run([sys.executable, str(RUN), "--quick", "--systems", "samsa,ceiling", "--sections", "produce",
                             "--cases", "100/1/1/lz4", "--shapes", "record", "--producers", "2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split("  ")[0]: line for line in result.stdout.splitlines()}
    for measure in ("MB/s", "broker CPU s/GB"):
        row = f"produce() per record 100 B, 1 part, acks=1, lz4, 2 producers ({measure})"
        assert row in rows and "n/a" not in rows[row], result.stdout
    assert "notes:" not in result.stdout, result.stdout
