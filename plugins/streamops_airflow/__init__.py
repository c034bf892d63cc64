"""Airflow adapters for streamops: thin operators over the core ``streamops`` package.

Airflow puts the plugins folder on ``sys.path``, so DAGs import ``streamops_airflow.operators``
(a package: one module per concern, every operator re-exported there).
"""
