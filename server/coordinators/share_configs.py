"""Kafka's internal share coordinator configs (ShareCoordinatorConfig's defineInternal): accepted as
Kafka accepts them, though its docs do not list them, for the periodic jobs of the share service
(server/coordinators/share_service.py)."""

from ..config.broker_config_defs import BrokerConfigDef

SHARE_COORDINATOR_INTERNAL_CONFIGS = {
    "share.coordinator.state.topic.prune.interval.ms": BrokerConfigDef(
        name="share.coordinator.state.topic.prune.interval.ms", type="int", default=300_000, valid_values="[1,...]",
        importance="low", update_mode="read-only", kafka_version="4.4.0",
        doc="Kafka's internal config: the duration in milliseconds that the share coordinator will wait between "
            "pruning eligible records in share-group state topic."),
    "share.coordinator.cold.partition.snapshot.interval.ms": BrokerConfigDef(
        name="share.coordinator.cold.partition.snapshot.interval.ms", type="int", default=300_000,
        valid_values="[1,...]", importance="low", update_mode="read-only", kafka_version="4.4.0",
        doc="Kafka's internal config: the duration in milliseconds that the share coordinator will wait between "
            "force snapshotting share partitions which are not being updated."),
}
