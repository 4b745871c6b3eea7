"""The broker's configuration: Kafka's config definitions, KafkaConfig, dynamic broker configs (KIP-226)
and the config resources of the config APIs."""
