"""The job API's Arrow side: the rows an aggregate job's parse stage yields, whether its vectorized
parser (``Job.parse_arrow``) or the platform's per-record ``parse`` + ``contribute`` makes them
(``parsed_arrow_schema``). The platform's query (``streamops.spark.query``) takes them from here,
so the rule lives once.

Apart from ``streamops.job`` because a job's declaration is also read where pyarrow must never
load (status, metrics and alerts in the Airflow UI: ``streamops.observe``).
"""

from __future__ import annotations

import pyarrow as pa

from streamops.job import Job

#: the columns every parsed row ends with: a rejected record's reason, raw key and raw value (None
#: on a valid row), and the record's source coordinates (what its DLQ copy's headers name)
DLQ_COLUMNS = (("reason", pa.string()), ("raw_key", pa.binary()), ("raw_value", pa.binary()),
               ("src_topic", pa.string()), ("src_partition", pa.int32()), ("src_offset", pa.int64()))
#: an aggregate field's type (``AggField.type``) as Arrow's
FIELD_TYPES = {"long": pa.int64(), "double": pa.float64()}


def parsed_arrow_schema(job_cls: type[Job]) -> pa.Schema:
    """An aggregate job's parse-stage rows: its key (named ``key_name``, a string), each field of
    ``aggregate`` in declaration order, then ``DLQ_COLUMNS``."""
    agg = job_cls.aggregate or {}
    return pa.schema([(job_cls.key_name, pa.string()), *((f, FIELD_TYPES[a.type]) for f, a in agg.items()),
                      *DLQ_COLUMNS])
