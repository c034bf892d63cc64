from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_spark(spark):
    """The session's local SparkSession (no cluster, no Kafka) for the jobs' pure transformations."""
    return spark
