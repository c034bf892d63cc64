"""Everything true of one app whatever runs it (a driver, an operation, the CLI, an Airflow task):
its folder and files (``dir``), its checkpoint and lock (``checkpoint``), its topics, group,
transactional id and header names (``topics``), its batch markers (``marker``) and the checks
before it starts (``preflight``). Below every runtime: nothing here imports Spark."""
