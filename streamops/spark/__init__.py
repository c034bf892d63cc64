"""Spark runtime of streamops (core package, never imports Airflow).

Import submodules directly; this package imports nothing, so pure modules such as
``streamops.spark.offsets`` load without pyspark or confluent-kafka. Kafka I/O goes through
``streamops.spark.kafka_io`` (``read_kafka`` / ``write_kafka_batch``), which uses Spark's own
``kafka`` format when its connector is installed and the ``streamops_kafka`` Python data source
(``streamops.spark.kafka_source``) otherwise.
"""
