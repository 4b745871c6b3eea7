"""One module per Kafka API; each registers its handler here with the versions it serves.

A handler is `async def handle(ctx: RequestContext, request) -> response | None` (None: no
response, as for acks=0 produce). Which versions it serves is a decision each handler states,
both bounds, as `@handler(ApiKey.PRODUCE, 0, 11)` (franz-go's kfake: `regKey(0, 3, 13)`); the
broker advertises exactly what is registered, never what the generated codec happens to decode,
so regenerating wire/messages/ from newer schemas does not widen it. tests/server/api_versions.tsv
holds the ranges, and tools/gen_compat_doc.py writes them into docs/compatibility.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from importlib import import_module
from typing import TYPE_CHECKING, Awaitable, Callable

from ...wire.protocol import ApiKey

if TYPE_CHECKING:
    from ...wire.codec import Message


class ListenerType(Enum):
    """Which listeners an API is served on, as Kafka's schemas list them (ApiMessageType.ListenerType):
    a ZooKeeper-mode broker's or a KRaft-mode (or single) broker's."""

    ZK_BROKER = "zkBroker"
    BROKER = "broker"


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable[..., Awaitable[Message | None]]  # None: no response (an acks=0 produce)
    # Served (and advertised) only by a broker in a ZooKeeper cluster: the inter-broker APIs a
    # controller sends, as a ZooKeeper-mode Kafka broker lists them.
    cluster_only: bool = False
    # Served (and advertised) only outside a ZooKeeper cluster: the APIs whose schemas list only
    # the KRaft "broker" listener, which a ZooKeeper-mode Kafka 3.9 broker neither lists nor serves.
    kraft_only: bool = False
    # Answered UNSUPPORTED_VERSION while this (feature, level) is not finalized, though advertised
    # (server/features.py: disabled_feature_response).
    feature: tuple[str, int] | None = None
    # The highest version served in a ZooKeeper cluster, where it is lower: Kafka 3.9's (a version
    # Kafka 4 added for something a ZooKeeper-mode broker does not do, e.g. transaction version 2).
    zk_max_version: int | None = None
    # Forwarded to the active controller where one makes the broker's metadata changes (a KRaft
    # cluster's broker: AdminManager.forward, Kafka's KafkaApis.forwardToController); `handle`
    # answers it elsewhere.
    forwarded: bool = False
    # Answered only by a controller: served (forwarded) only by a broker that forwards to one.
    controller_only: bool = False

    def max_version_for(self, listener_type: ListenerType) -> int:
        if listener_type == ListenerType.ZK_BROKER and self.zk_max_version is not None:
            return self.zk_max_version
        return self.max_version

    def served(self, listener_type: ListenerType, forwards: bool = False) -> bool:
        """Whether a broker of this listener type serves and advertises this API; `forwards`: it
        forwards requests to a controller."""
        zk_broker = listener_type == ListenerType.ZK_BROKER
        return not (self.cluster_only and not zk_broker or self.kraft_only and zk_broker
                    or self.controller_only and not forwards)


HANDLERS: dict[int, Handler] = {}

MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets", "create_topics", "delete_topics",
    "create_partitions", "describe_configs", "alter_configs", "incremental_alter_configs",
    "delete_records", "describe_cluster", "describe_log_dirs", "alter_replica_log_dirs", "describe_topic_partitions", "init_producer_id",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit", "offset_fetch",
    "describe_groups", "list_groups", "delete_groups", "offset_delete",
    "consumer_group_heartbeat", "consumer_group_describe", "share_group_heartbeat", "share_group_describe",
    "streams_group_heartbeat", "streams_group_describe", "streams_group_topology_description_update",
    "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets",
    "describe_acls", "create_acls", "delete_acls",
    "sasl_handshake", "sasl_authenticate", "describe_user_scram_credentials", "alter_user_scram_credentials",
    "describe_client_quotas", "alter_client_quotas", "update_features",
    "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "write_txn_markers", "txn_offset_commit",
    "describe_transactions", "list_transactions", "describe_producers", "offset_for_leader_epoch",
    "update_metadata", "leader_and_isr", "stop_replica", "alter_partition", "controlled_shutdown",
    "elect_leaders", "alter_partition_reassignments", "list_partition_reassignments",
    "allocate_producer_ids",
    "get_telemetry_subscriptions", "push_telemetry", "list_config_resources",
    "share_fetch", "share_acknowledge",
    "initialize_share_group_state", "read_share_group_state", "write_share_group_state", "delete_share_group_state",
    "read_share_group_state_summary",
    "create_delegation_token", "renew_delegation_token", "expire_delegation_token", "describe_delegation_token",
    "controller_apis",
)


def handler(api_key: ApiKey, min_version: int, max_version: int, *, cluster_only: bool = False,
            kraft_only: bool = False, feature: tuple[str, int] | None = None, zk_max_version: int | None = None,
            forwarded: bool = False, controller_only: bool = False):
    """Register a handler for versions min_version..max_version (inclusive) of api_key;
    `cluster_only`: served only in a ZooKeeper cluster; `kraft_only`: never there; `feature`: served
    only while that (feature, level) is finalized; `zk_max_version`: the highest version in a
    ZooKeeper cluster, when lower; `forwarded`: the controller answers it where the broker forwards
    to one; `controller_only`: only a controller answers it (forwarded, never handled here)."""
    if not 0 <= min_version <= max_version:
        raise ValueError(f"{api_key!r}: bad version range {min_version}..{max_version}")
    if zk_max_version is not None and not min_version <= zk_max_version < max_version:
        raise ValueError(f"{api_key!r}: bad ZooKeeper-mode maximum {zk_max_version}")

    def register(fn):
        if api_key in HANDLERS:
            raise RuntimeError(f"{api_key!r} has two handlers: {HANDLERS[api_key].handle.__module__} "
                               f"and {fn.__module__}")
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, fn, cluster_only, kraft_only, feature,
                                    zk_max_version, forwarded or controller_only, controller_only)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    """Import every handler module (a missing one is an ImportError, never skipped)."""
    for name in MODULES:
        import_module(f"{__name__}.{name}")
    return HANDLERS
