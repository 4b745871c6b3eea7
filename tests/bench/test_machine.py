"""bench/machine.py: free page reporting held for a run and put back after, on a file standing in for
the kernel's parameter."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import machine  # noqa: E402


@pytest.fixture
def order_file(tmp_path, monkeypatch):
    path = tmp_path / "page_reporting_order"
    monkeypatch.setattr(machine, "PAGE_REPORTING_ORDER", path)
    return path


def test_holding_reports_nothing_during_the_run_and_puts_the_order_back(order_file):
    order_file.write_text("9\n")
    with pytest.raises(RuntimeError), machine.freed_memory_held(True) as described:
        assert order_file.read_text() == str(machine.NOTHING_REPORTED_ORDER)
        assert "held for this run" in described
        raise RuntimeError("a run that failed")
    assert machine.page_reporting_order() == 9


def test_without_holding_the_order_stays_and_is_described(order_file):
    order_file.write_text("9\n")
    with machine.freed_memory_held(False) as described:
        assert machine.page_reporting_order() == 9
    assert "on (freed blocks of 2048 KiB" in described


def test_a_machine_without_page_reporting_is_left_alone(order_file):
    with machine.freed_memory_held(True) as described:
        assert not order_file.exists()
    assert described == "free page reporting: not on this machine"


def test_a_run_terminated_by_sigterm_puts_the_order_back(tmp_path):
    order_file = tmp_path / "page_reporting_order"
    order_file.write_text("9\n")
    script = (f"import sys, time; sys.path.insert(0, {str(Path(machine.__file__).parent)!r}); import machine; "
              f"from pathlib import Path; machine.PAGE_REPORTING_ORDER = Path({str(order_file)!r})\n"
              "with machine.freed_memory_held(True):\n    print('held', flush=True)\n    time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None and run.stdout.readline() == "held\n"
    assert order_file.read_text() == str(machine.NOTHING_REPORTED_ORDER)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=30) == 128 + signal.SIGTERM
    assert order_file.read_text() == "9"
