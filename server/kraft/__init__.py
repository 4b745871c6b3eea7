"""KRaft broker mode (process.roles=broker): a Samsa broker in a KRaft cluster under Apache Kafka's
controller quorum. The quorum observer fetches the metadata log (quorum.py), the lifecycle registers
and heartbeats (lifecycle.py, on coordinator/broker_lifecycle.py) through the channel to the active
controller (controller_channel.py), and the published image is what handlers read
(metadata_cache.py) and what this broker's replicas follow (publisher.py)."""
