"""One module per Kafka API; each registers its handler here with the versions it serves.

A handler is `async def handle(ctx: RequestContext, request) -> response | None` (None: no
response, as for acks=0 produce). The broker advertises exactly what is registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Awaitable, Callable

from ...wire.protocol import request_class


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable[..., Awaitable[object]]


HANDLERS: dict[int, Handler] = {}

MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets", "create_topics", "delete_topics",
    "create_partitions", "describe_configs", "alter_configs", "incremental_alter_configs",
    "delete_records", "describe_cluster", "describe_log_dirs", "describe_topic_partitions", "init_producer_id",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit", "offset_fetch",
    "describe_groups", "list_groups", "delete_groups", "offset_delete",
    "consumer_group_heartbeat", "consumer_group_describe",
    "describe_acls", "create_acls", "delete_acls",
    "sasl_handshake", "sasl_authenticate", "describe_user_scram_credentials", "alter_user_scram_credentials",
    "describe_client_quotas", "alter_client_quotas",
    "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "write_txn_markers", "txn_offset_commit",
    "describe_transactions", "list_transactions", "describe_producers",
)


def handler(api_key: int, min_version: int | None = None, max_version: int | None = None):
    """Register a handler; versions default to every stable version the schema defines."""
    cls = request_class(api_key)
    lo, hi = cls.VALID_VERSIONS
    if cls.LATEST_VERSION_UNSTABLE:
        hi -= 1

    def register(fn):
        HANDLERS[api_key] = Handler(api_key, lo if min_version is None else min_version,
                                    hi if max_version is None else max_version, fn)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    for name in MODULES:
        try:
            import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    return HANDLERS
