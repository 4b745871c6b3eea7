"""bench/loopback.py must not crash: one round of 1 MB in each setting, a figure for each side.

Figures are printed, never asserted (the suite is no place for timed assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LOOPBACK = Path(__file__).resolve().parents[2] / "bench" / "loopback.py"


def test_one_round_measures_both_sides_of_every_setting():
    result = subprocess.run([sys.executable, str(LOOPBACK), "--mb", "1", "--rounds", "1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if "buffers" in line]
    assert len(rows) == 3, result.stdout
    for row in rows:
        assert len([cell for cell in row.split() if cell[0].isdigit()]) == 2, row
