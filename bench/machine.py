"""What the machine does to a bench run's figures, reported with them and, on request, held still.

Free page reporting. A Linux guest whose virtio-balloon offers it (Firecracker's, these machines')
hands memory it frees back to its host, in blocks of 2 MiB and more, a moment after they are freed
(the page_reporting module; its `reported_kib` counts them). A write into such memory later makes
the host fault fresh memory in, and the guest sees the copy into it take several times as long:
the page cache's `copy_folio_from_iter_atomic` for a broker writing its log, the allocator's first
touch for one holding records in memory. A run that deletes its topic frees a gigabyte, which is
reported within seconds, and the next run writes into it: that is the "page-cache effect" that
made repetitions bimodal (bench/README.md, "Free page reporting"). Setting the module's
`page_reporting_order` above the largest free block's order reports nothing; the run then
measures the brokers, not the host's memory.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

PAGE_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
# Above MAX_PAGE_ORDER (10 on x86-64): no free block is ever that large, so none is reported.
NOTHING_REPORTED_ORDER = 11


def page_reporting_order() -> int | None:
    """The smallest order of free block handed back to the host, None without page reporting."""
    try:
        return int(PAGE_REPORTING_ORDER.read_text())
    except (OSError, ValueError):
        return None


def describe_page_reporting(order: int | None, held: bool = False) -> str:
    if order is None:
        return "free page reporting: not on this machine"
    if held:
        return "free page reporting: held for this run (--hold-freed-memory)"
    if order >= NOTHING_REPORTED_ORDER:
        return "free page reporting: held (page_reporting_order above every free block's)"
    return (f"free page reporting: on (freed blocks of {4 << order} KiB and more go back to the host; "
            "repetitions that write into them are slow: --hold-freed-memory)")


@contextlib.contextmanager
def freed_memory_held(hold: bool) -> Iterator[str]:
    """While inside, freed memory is not reported to the host (when `hold` and the machine reports
    it; needs root), and the order it had is put back after. Yields what the run had, in words."""
    order = page_reporting_order()
    if not hold or order is None or order >= NOTHING_REPORTED_ORDER:
        yield describe_page_reporting(order)
        return
    PAGE_REPORTING_ORDER.write_text(str(NOTHING_REPORTED_ORDER))
    # A run stopped by SIGTERM (kill) unwinds too, so the order is put back.
    terminated = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield describe_page_reporting(order, held=True)
    finally:
        signal.signal(signal.SIGTERM, terminated)
        PAGE_REPORTING_ORDER.write_text(str(order))


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)
