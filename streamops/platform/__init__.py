"""Embedded platform: Kafka-protocol broker, Spark standalone cluster, Airflow 3 components."""
