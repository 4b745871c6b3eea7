"""Samsa: a Kafka-compatible broker."""
