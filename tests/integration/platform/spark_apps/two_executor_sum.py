"""Trivial Spark job for the cluster test: waits for 2 executors, sums a range, prints JSON."""

import json
import sys
import time

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("streamops-cluster-check").getOrCreate()
sc = spark.sparkContext
deadline = time.time() + 60
while time.time() < deadline:
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    if len(infos) - 1 >= 2:  # minus the driver
        break
    time.sleep(0.5)
n = int(sys.argv[1])
total = sc.parallelize(range(n), 8).map(lambda x: x * 2).sum()
hosts = sc.parallelize(range(8), 8).map(lambda _: __import__("os").getpid()).distinct().count()
executors = len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1
print("RESULT " + json.dumps({"total": total, "executors": executors, "python_workers": hosts,
                              "app_id": sc.applicationId, "master": sc.master}), flush=True)
spark.stop()
