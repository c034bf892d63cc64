"""A declared job as a Spark query, by side: ``plan`` (the driver: the query plan, shape facts, seed
rows), ``worker`` (what the executors' Python workers run: parse, per-group update, state stores),
``records`` (output, changelog and DLQ record encoding) and ``observed`` (the query's observed
metrics). Import the submodules directly: this package imports nothing, so that an executor
importing ``worker`` loads no driver code.
"""
