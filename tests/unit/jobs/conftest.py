from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def local_spark():
    """A local SparkSession (no cluster, no Kafka) for the jobs' pure transformations."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("streamops-unit")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    yield spark
    spark.stop()
