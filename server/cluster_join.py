"""Why a broker cannot take its place in its cluster (ZooKeeper or KRaft): it does not start, and
`samsa serve` exits 1 with the message (server/main.py). Apart from both modes' packages so that a
single broker need not import either to name it."""

from __future__ import annotations


class ClusterJoinError(Exception):
    """The broker cannot take its place in its cluster: it does not start."""
