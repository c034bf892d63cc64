"""``streamops verify APP``: do the changelog and the output topic hold what the state store holds?

The state store at the checkpoint's last committed batch is the reference (read with Spark's
``statestore`` data source). The changelog topic's and the output topic's latest value per key
are compared with it (missing / extra / different keys, with samples); records of batches after
the verified one (a running app is one batch ahead at most) are ignored, so verify can run while
the app runs and needs no lease. Then Great Expectations suites from ``include/expectations/``
check the state's data quality (``<app>_state.json``) and the comparison's result
(``verify_result.json``: zero mismatches), writing an HTML report under
``<state_dir>/reports/verify/<app>/``. The outcome is recorded in the ledger (kind ``verify``).

Unlike ``streamops check`` this does not refold the input: it costs one state scan and two topic
scans, so it can run every hour on a large app. Everything app-specific comes from the declared
job: the state store is read through its serde (``state.store``), the changelog must hold the
serialized state per key and the output what ``emit`` makes of it.

A job that ``expire``s state (closed windows, ended sessions) leaves output records of what it
dropped, which no state explains any more. The rule (``split_output``): an output key is
*compared* when ``emit`` of a state in the store yields it, and *expired* otherwise; an expired
key's latest record can only be checked for form (``OutputShape``: JSON with the fields and JSON
types the job emits), and one that fails is *malformed*. The report counts all three, and says
"nothing to compare" instead of a bare OK when the state explains no key of a view.

The modules, in the order a run uses them (import each directly; this package imports nothing):
``topics`` (the topic scans), ``state_read`` (the state store and its checksums), ``outputs``
(which output keys the state explains, the output shape), ``report`` (the report model and its
text), ``expectations`` (the Great Expectations suites) and ``run`` (the command: ``verify``).
"""
