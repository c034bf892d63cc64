"""The progress file's line, from Spark's own JSON of a StreamingQueryProgress (what the driver's
listener now receives in one Py4J call instead of field by field)."""

from __future__ import annotations

import json

from streamops.spark.driver.report import progress_line

# as Spark 4 writes it for a Kafka source and the RocksDB aggregation (trimmed of fields we skip)
PROGRESS = json.loads("""{
  "id": "5f0c1a8e-8a57-4d3b-9b59-3d1c1b0a2f11", "runId": "0b3f6a71-0c57-4d65-8f9e-5b3b87e1d2a4",
  "name": "user_activity", "timestamp": "2026-11-26T20:21:41.900Z", "batchId": 7, "batchDuration": 812,
  "numInputRows": 1200, "inputRowsPerSecond": 600.0, "processedRowsPerSecond": 1477.8,
  "durationMs": {"addBatch": 650, "commitOffsets": 40, "getBatch": 0, "latestOffset": 12,
                 "queryPlanning": 30, "triggerExecution": 812, "walCommit": 45},
  "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 310, "numRowsUpdated": 120,
                      "memoryUsedBytes": 40960, "numShufflePartitions": 4, "customMetrics": {}}],
  "sources": [{"description": "KafkaV2[Subscribe[user-events]]",
               "startOffset": {"user-events": {"0": 100, "1": 90}},
               "endOffset": {"user-events": {"0": 700, "1": 690}},
               "latestOffset": {"user-events": {"0": 700, "1": 690}},
               "numInputRows": 1200, "inputRowsPerSecond": 600.0, "processedRowsPerSecond": 1477.8}],
  "sink": {"description": "ForeachBatchSink", "numOutputRows": -1}
}""")


def test_a_progress_becomes_the_same_line_as_before() -> None:
    assert progress_line(PROGRESS) == {
        "batch_id": 7, "timestamp": "2026-11-26T20:21:41.900Z", "input_rows": 1200,
        "input_rows_per_s": 600.0, "processed_rows_per_s": 1477.8,
        "duration_ms": PROGRESS["durationMs"],
        # the offsets as the JSON text Spark's offsets log holds (what str() of the Java value gave)
        "end_offsets": ['{"user-events":{"0":700,"1":690}}'],
        # what the batch read and what there was to read, per partition (the Streams view's lag and skew)
        "start_offsets": ['{"user-events":{"0":100,"1":90}}'],
        "latest_offsets": ['{"user-events":{"0":700,"1":690}}'],
        "state_rows": 310, "state_bytes": 40960,
    }


def test_rates_spark_could_not_compute_are_none_not_nan() -> None:
    """Spark leaves NaN rates out of its JSON (the first batch, an empty trigger): the line says
    None, which ``status`` shows as 0 and JSON can carry (NaN is not JSON)."""
    first = {k: v for k, v in PROGRESS.items() if k not in ("inputRowsPerSecond", "processedRowsPerSecond")}
    line = progress_line({**first, "stateOperators": [], "sources": []})
    assert line["input_rows_per_s"] is None and line["processed_rows_per_s"] is None
    assert line["state_rows"] == 0 and line["end_offsets"] == []
    json.loads(json.dumps(line, allow_nan=False))


def test_the_observed_metrics_give_the_input_timestamps_and_the_state_partitions_records() -> None:
    """``JobQuery.observe_input`` / ``observe_state_partitions`` as Spark reports them (a Row's JSON)."""
    observed = {"streamops_input": {"newest_ms": 1795767354818, "oldest_ms": 1795767352838},
                "streamops_state_partitions": {"p0": 15, "p1": 28, "p2": None, "p3": 29}}  # a sum of no rows: null
    line = progress_line({**PROGRESS, "observedMetrics": observed})
    assert (line["input_newest_ms"], line["input_oldest_ms"]) == (1795767354818, 1795767352838)
    assert line["state_partition_records"] == [15, 28, 0, 29]
    # a batch that read nothing: no timestamps (Spark's max of no rows is null)
    empty = progress_line({**PROGRESS, "observedMetrics": {"streamops_input": {"newest_ms": None, "oldest_ms": None}}})
    assert "input_newest_ms" not in empty and "state_partition_records" not in empty


def test_the_hottest_keys_are_kept_cut_short() -> None:
    observed = {"streamops_hot_keys": {"hot": [{"item": "u1", "count": 40}, {"item": "x" * 200, "count": 9},
                                               {"item": None, "count": 3}]}}  # a null key is no key
    line = progress_line({**PROGRESS, "observedMetrics": observed})
    assert line["hot_keys"] == [["u1", 40], ["x" * 80, 9]]
    assert "hot_keys" not in progress_line({**PROGRESS, "observedMetrics": {"streamops_hot_keys": {"hot": []}}})
