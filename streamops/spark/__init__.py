"""Spark runtime of streamops (core package, never imports Airflow).

Import submodules directly; this package imports nothing. Kafka I/O goes through
``streamops.spark.kafka_io`` (``read_kafka`` / ``write_kafka_batch``) on Spark's own ``kafka``
format; every session has its connector through ``spark.jars`` (``streamops.host.jars``).
"""
