"""bench/startup.py must not crash: ten partitions, one restart.

Figures are printed, never asserted (the suite is no place for timed assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

STARTUP = Path(__file__).resolve().parents[2] / "bench" / "startup.py"


def test_a_small_restart_is_timed():
    result = subprocess.run([sys.executable, str(STARTUP), "--partitions", "10", "--bytes", "0",
                             "--restarts", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "startup with 10 partitions: median" in result.stdout, result.stdout
