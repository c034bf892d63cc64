"""The Spark driver of an app: one process per running app, started by the launcher
(``lifecycle.driver``) as ``python -m streamops.spark.driver --app NAME`` and entered only there
(``main``); nothing outside this package imports it (``tests/unit/test_import_graph.py``).

Its parts, each a concern of the running driver:

- ``main``: the entry point (arguments, the spec it runs, the checks of every start, ``run_app``);
- ``loop``: the driver's lifecycle (``run_app``, ``AppDriver``): the restart loop, each start of
  the query and the loop that watches it, the stop at a batch boundary or a bounded run's end;
- ``sink``: the per-batch sink, the exactly-once commit path (``BatchSink``);
- ``report``: what the driver tells (observed state, progress lines, heartbeat);
- ``live``: live resize of the running application (executor scaler, control);
- ``warmup``: new executors warmed up before a live scale-out counts them;
- ``standby``: a warm standby for restart resizes, and the query rehearsal;
- ``placement``: where a running query's state stores live (only the driver moves them).

What other layers need of an app (its folder, its control signals, its topics) is in
``streamops.app``; the Spark settings of its session in ``spark.session`` and
``spark.warmup_plugin``. Import submodules directly; this package imports nothing.
"""
