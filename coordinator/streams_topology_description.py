"""A streams group's topology description (KIP-1331), sans I/O: what the coordinator answers to
StreamsGroupTopologyDescriptionUpdate and which TopologyDescriptionStatus StreamsGroupDescribe v1
reports.

Kafka 4.4 keeps descriptions outside the log, in a StreamsGroupTopologyDescriptionPlugin
(`group.streams.topology.description.plugin.class`); `__consumer_offsets` only records, in the
StreamsGroupMetadata record's tagged StoredDescriptionTopologyEpoch and FailedDescriptionTopologyEpoch,
which topology epoch the plugin holds or permanently refused (StreamsGroup carries and replays both).
Without a plugin, Kafka's default, the feature is off: the heartbeat never sets
TopologyDescriptionRequired, an update is UNSUPPORTED_VERSION, and Describe says NOT_STORED. Samsa
loads no Java plugin, so it always behaves as Kafka does without one.
"""

from __future__ import annotations

from ..wire.errors import ErrorCode

# StreamsGroupDescribe's TopologyDescriptionStatus (Kafka's StreamsGroupTopologyDescriptionStatus).
NOT_STORED = 1  # no description for the group's current topology epoch
UNAVAILABLE = 2  # the plugin failed to answer
STORED = 3  # the description is attached

NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def validate_update(group_id: str, member_id: str, topology_description, plugin_configured: bool = False
                    ) -> tuple[ErrorCode, str] | None:
    """The error (code, message) of a StreamsGroupTopologyDescriptionUpdate refused before it reaches
    the group, or None (Kafka's throwIfStreamsGroupTopologyDescriptionUpdateInvalid: the plugin is
    checked first, so without one every update is UNSUPPORTED_VERSION, however malformed)."""
    if not plugin_configured:
        return ErrorCode.UNSUPPORTED_VERSION, NO_PLUGIN
    if not member_id:
        return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    if not group_id:
        return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
    if topology_description is None:
        return ErrorCode.INVALID_REQUEST, "TopologyDescription can't be null."
    return None

