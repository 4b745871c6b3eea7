"""Generate docs/compatibility.md: every Kafka API the codec knows, what Samsa serves, and why not.

Usage: python tools/gen_compat_doc.py

The served versions are the handlers' own declarations (server/handlers/, the same registry
ApiVersions answers from); Kafka's versions are those of the schemas wire/messages/ was generated
from. It reads only the repository; tests/server/test_api_versions_table.py fails when the
committed page differs from what this writes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from samsa.server.features import CONSUMER_GROUPS
from samsa.server.features import SHARE_GROUPS as SHARE_VERSION
from samsa.server.handlers import load_handlers
from samsa.wire.messages import APIS
from samsa.wire.protocol import ApiKey, request_class

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path("docs") / "compatibility.md"

KRAFT = "KRaft controller quorum: Samsa has no Raft metadata log"
SHARE_GROUP_STATE = "the share coordinator's, between brokers (the persister's calls)"
SHARE_GROUP_ADMIN = ("share group offsets through the group coordinator and the share coordinator's state (kafka-"
                     "share-groups.sh)")
CLIENT_TELEMETRY = ("client telemetry (KIP-714), as a KRaft-mode broker serves it: not in cluster mode "
                    "(zookeeper.connect; Kafka 3.9's ZooKeeper mode has none)")

# Why an API key is not served, one short reason each.
NOT_SERVED: dict[ApiKey, str] = {
    ApiKey.VOTE: KRAFT,
    ApiKey.BEGIN_QUORUM_EPOCH: KRAFT,
    ApiKey.END_QUORUM_EPOCH: KRAFT,
    ApiKey.ENVELOPE: "what a KRaft broker sends its controller (KIP-590): Samsa's KRaft brokers send it, "
                     "Samsa is no controller to receive it",
    ApiKey.FETCH_SNAPSHOT: KRAFT,
    ApiKey.BROKER_REGISTRATION: KRAFT,
    ApiKey.BROKER_HEARTBEAT: KRAFT,
    ApiKey.CONTROLLER_REGISTRATION: KRAFT,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: KRAFT,
    ApiKey.UPDATE_RAFT_VOTER: KRAFT,
}

FORWARDED_ONLY = ("forwarded to the active controller, by a broker of a KRaft cluster (process.roles=broker) "
                  "only")

# Served versions that need a word.
SERVED_NOTES: dict[ApiKey, str] = {
    ApiKey.DESCRIBE_QUORUM: FORWARDED_ONLY,
    ApiKey.UNREGISTER_BROKER: FORWARDED_ONLY,
    ApiKey.ADD_RAFT_VOTER: FORWARDED_ONLY,
    ApiKey.REMOVE_RAFT_VOTER: FORWARDED_ONLY,
    ApiKey.UNREGISTER_CONTROLLER: FORWARDED_ONLY,
    ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: ("UNSUPPORTED_VERSION, as Kafka answers without a topology "
                                                       "description plugin (its default; Samsa loads none)"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: "v0 (removed in Kafka 4.0) not served; the copy throttled by "
                                   "replica.alter.log.dirs.io.max.bytes.per.second",
    ApiKey.LEADER_AND_ISR: "from the controller (Kafka 3.9's or Samsa's), in cluster mode only (zookeeper.connect)",
    ApiKey.STOP_REPLICA: "from the controller (Kafka 3.9's or Samsa's), in cluster mode only (zookeeper.connect)",
    ApiKey.UPDATE_METADATA: "from the controller (Kafka 3.9's or Samsa's), in cluster mode only (zookeeper.connect)",
    ApiKey.CONTROLLED_SHUTDOWN: "to the controller, in cluster mode only (zookeeper.connect); NOT_CONTROLLER elsewhere",
    ApiKey.ALTER_PARTITION: "to the controller, in cluster mode only (zookeeper.connect); NOT_CONTROLLER elsewhere",
    ApiKey.ELECT_LEADERS: "to the controller (NOT_CONTROLLER elsewhere in a cluster); a single broker, its own "
                          "controller, leads every partition with its preferred replica: no election needed",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "to the controller (NOT_CONTROLLER elsewhere in a cluster); a single broker, "
                                          "its own controller, has one replica per partition: nothing to reassign; "
                                          "v1 (Kafka 4's, KIP-860) too",
    ApiKey.ALLOCATE_PRODUCER_IDS: "to the controller (Kafka 3.9's brokers ask it), in cluster mode only "
                                  "(zookeeper.connect); NOT_CONTROLLER elsewhere",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "to the controller (NOT_CONTROLLER elsewhere in a cluster); a single broker "
                                         "has none under way",
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: CLIENT_TELEMETRY,
    ApiKey.PUSH_TELEMETRY: CLIENT_TELEMETRY + "; pushed metrics are exported to Prometheus",
    ApiKey.LIST_CONFIG_RESOURCES: "v0 is Kafka 3.x's ListClientMetricsResources, v1 KIP-1142's; "
                                  "not in cluster mode (Kafka 3.9's ZooKeeper mode has no client metrics)",
    ApiKey.UPDATE_FEATURES: "finalized feature levels (KIP-584) kept in the metadata image, checked as Kafka 4.4's "
                            "controller checks them; in cluster mode (zookeeper.connect) refused as Kafka 3.9 "
                            "refuses them (a ZooKeeper-mode broker supports no feature)",
    ApiKey.SHARE_GROUP_HEARTBEAT: "share groups (KIP-932), the `simple` assignor",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: SHARE_GROUP_ADMIN + "; v1's lag as KIP-1226 measures it",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: SHARE_GROUP_ADMIN,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: SHARE_GROUP_ADMIN,
    ApiKey.SHARE_FETCH: "records by sendfile with their AcquiredRecords; share sessions as Kafka's",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE: SHARE_GROUP_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE: SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE: SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: SHARE_GROUP_STATE,
}


def versions(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def feature_apis(served, feature) -> list[int]:
    """The API keys answered UNSUPPORTED_VERSION while `feature` is not finalized."""
    return sorted(key for key, handler in served.items() if handler.feature == feature)


def names_of(api_keys: list[int]) -> list[str]:
    return [APIS[key][1].removesuffix("Request") for key in api_keys]


def render() -> str:
    served = load_handlers()
    both = sorted(set(served) & set(NOT_SERVED))
    missing = sorted(set(APIS) - set(served) - set(NOT_SERVED))
    if both or missing:
        raise ValueError(f"NOT_SERVED is out of date: served {both}, no reason given for {missing}")
    lines = [
        "<!-- Generated by tools/gen_compat_doc.py; do not edit. -->",
        "# Kafka APIs: what Samsa serves",
        "",
        "Every API key of the schemas `wire/messages/` was generated from (Kafka 4.4.0's kafka-clients jar,",
        "with the versions Kafka 3.9 still defined: tools/gen_messages.py), with the versions each handler in",
        "`server/handlers/` declares it serves: what ApiVersions advertises. \"Kafka defines\" is the",
        "newest schema's range; a version marked unstable there is not part of Kafka's protocol yet; versions",
        "\"until Kafka 3.9\" were removed since (KIP-896) and are still served as Kafka 3.9 served them.",
        "",
        *textwrap.wrap(
            "A broker of a KRaft cluster (process.roles=broker) forwards the metadata changes to the active "
            "controller in an Envelope, as Kafka 4.4's brokers do (" + ", ".join(names_of(sorted(
                key for key, handler in served.items() if handler.forwarded and not handler.controller_only)))
            + "; the delegation token changes and the config changes after the broker's own checks), serves "
            "the APIs marked \"forwarded\" below only by forwarding them, and advertises the forwarded APIs no "
            "wider than the active controller serves them (docs/cluster.md).", 100),
        "",
        *textwrap.wrap(
            "Share groups (KIP-932) are served, `share.version` finalized at level 1 by default (Kafka 4.4 finalizes "
            "level 2, which adds their dead-letter queues: not implemented); UpdateFeatures can set it to 0, and then, "
            "as in Kafka 4.4, these are still advertised but answered UNSUPPORTED_VERSION: "
            + ", ".join(names_of(feature_apis(served, SHARE_VERSION))) + ". Likewise "
            + ", ".join(names_of(feature_apis(served, CONSUMER_GROUPS))) + " at `group.version` 0. "
            "Share groups' configs, and the group configs "
            "of the GROUP config resource, are in docs/configuration.md. In a ZooKeeper cluster (Samsa brokers only: "
            "Kafka 3.9 has no share groups) share partitions live with their partition's leader and resume from "
            "`__share_group_state` after its failover; group configs are kept in /config/groups/<id> and announced "
            "under /samsa/group_config_changes, which Kafka 3.9 brokers never read "
            "(compat-tests/test_share_cluster_failover.py).", 100),
        "",
        "| key | API | Samsa serves | Kafka defines | why not served, notes |",
        "| ---: | --- | --- | --- | --- |",
    ]
    for api_key in sorted(APIS):
        cls = request_class(api_key)
        lo, hi = cls.VALID_VERSIONS
        removed = cls.REMOVED_VERSIONS
        current = lo if removed is None else removed[1] + 1
        defined = "none" if current > hi else versions(current, hi) + (f" ({hi} unstable)" if cls.LATEST_VERSION_UNSTABLE else "")
        if removed is not None:
            defined += f"; {versions(*removed)} until Kafka 3.9"
        name = APIS[api_key][1].removesuffix("Request")
        if api_key in served:
            ours = versions(served[api_key].min_version, served[api_key].max_version)
            lines.append(f"| {api_key} | {name} | {ours} | {defined} | {SERVED_NOTES.get(ApiKey(api_key), '')} |")
        else:
            lines.append(f"| {api_key} | {name} | not served | {defined} | {NOT_SERVED[ApiKey(api_key)]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    (ROOT / OUTPUT).parent.mkdir(exist_ok=True)
    (ROOT / OUTPUT).write_text(render())


if __name__ == "__main__":
    main()
