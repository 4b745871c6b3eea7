"""bench/perf_tools.run_tool on stand-in tools (Python subprocesses): a tool silent past `stall` or
running past `timeout` is stopped with the reason, a failing one reports its stderr."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import perf_tools  # noqa: E402


def tool(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_tool_that_stops_printing_is_stopped_after_the_stall():
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="no output in 1 s: progress"):
        perf_tools.run_tool(os.getpid(), tool("import time; print('progress', flush=True); time.sleep(60)"),
                            timeout=60, stall=1)
    assert time.monotonic() - started < 30


def test_a_tool_past_its_timeout_is_stopped():
    with pytest.raises(RuntimeError, match="not done in 1 s"):
        perf_tools.run_tool(os.getpid(), tool("import time; time.sleep(60)"), timeout=1)


def test_output_comes_back_whole_and_a_full_stderr_does_not_block_the_tool():
    out, cpu = perf_tools.run_tool(os.getpid(), tool(
        "import sys; print('one'); sys.stderr.write('e' * 1_000_000); print('two')"), timeout=60, stall=30)
    assert out == "one\ntwo\n" and cpu >= 0


def test_a_failing_tool_reports_its_exit_and_stderr():
    with pytest.raises(RuntimeError, match="exit 3: boom"):
        perf_tools.run_tool(os.getpid(), tool("import sys; sys.stderr.write('boom'); sys.exit(3)"), timeout=60)
