"""Kafka helpers on confluent-kafka: topics, bounded reads, fast producing. No Airflow, no Spark."""

from streamops.kafka.admin import TopicSpec, end_offsets, ensure_topics, partitions
from streamops.kafka.read import latest_per_key, read_topic

__all__ = ["TopicSpec", "end_offsets", "ensure_topics", "latest_per_key", "partitions", "read_topic"]
