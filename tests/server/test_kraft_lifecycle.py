"""server/kraft/lifecycle.py: the registration's log dirs in the order Kafka's BrokerLifecycleManager
sends them (Uuid.compareTo: two signed longs)."""

from __future__ import annotations

import uuid

from samsa.server.kraft.lifecycle import _uuid_order


def test_log_dirs_sort_as_kafkas_uuid_compare_to():
    high = uuid.UUID("80000000-0000-0000-0000-000000000000")  # a negative most significant long
    low = uuid.UUID("00000000-0000-0000-0000-000000000001")
    low_negative_lsb = uuid.UUID("00000000-0000-0000-8000-000000000000")
    assert sorted([low, high, low_negative_lsb], key=_uuid_order) == [high, low_negative_lsb, low]
