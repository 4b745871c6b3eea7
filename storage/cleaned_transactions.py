"""What the log cleaner knows of transactions as it goes through a log (Kafka's
CleanedTransactionMetadata): which producers' batches belong to aborted transactions (their records
go), and when a marker may go.

The aborted transactions of the range being cleaned come from the transaction indexes, by first
offset; one becomes current for its producer once the cleaner reaches its first offset, until its
ABORT marker. A COMMIT marker may go once no batch of its transaction is left, an ABORT marker once
the cleaner has removed every batch of its transaction; a marker that may go is first stamped with
a delete horizon and only removed once that has passed (delete.retention.ms, as tombstones), so
that a consumer part way through still sees it. An ABORT marker kept goes to the cleaned segment's
transaction index.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from ..wire.records import BatchHeader, ControlRecord, ControlRecordType
from .transaction_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTransactionMetadata"]


class CleanedTransactionMetadata:
    def __init__(self, cleaned_index: TransactionIndex | None = None) -> None:
        self.cleaned_index = cleaned_index
        self._ongoing_committed: set[int] = set()  # producers with a committed batch seen, marker not yet
        # Producer id -> [its aborted transaction, last offset of one of its batches seen or None].
        self._ongoing_aborted: dict[int, list] = {}
        self._aborted: list[tuple[int, AbortedTxn]] = []  # min-heap by first offset

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._aborted, (txn.first_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, header: BatchHeader, marker: ControlRecord | None) -> bool:
        """Whether the control batch may be discarded (once its delete horizon passes). `marker`:
        its record, None for a marker already emptied (its transaction is gone)."""
        self._consume_aborted_up_to(header.last_offset)
        if marker is None:
            return True
        producer_id = header.producer_id
        if marker.type is ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted[1] is not None:
                # Batches of the transaction are still being removed: keep the marker (and index it).
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted[0])
                return False
            return True
        if marker.type is ControlRecordType.COMMIT:
            # Kept while batches of its transaction are: they stay committed only through it.
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """Whether a data batch belongs to an aborted transaction (its records may all go)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted[1] = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False
