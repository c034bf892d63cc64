"""Operators: hold templated fields, validate rendered values, call core functions.

DAGs import every operator from here (``streamops_airflow.operators``); the modules split them by
what they act on. Airflow's plugin loader also imports each ``.py`` file of the plugins folder
under its bare file name, so a module here must not be named like a module it would shadow (no
``platform.py``) and imports its siblings absolutely, never relatively.
"""

from __future__ import annotations

from streamops_airflow.operators.handoff import HandsOffWaits
from streamops_airflow.operators.lifecycle import (
    AppOperationOperator,
    DeployAppOperator,
    ResizeAppOperator,
    ScaleWindowsOperator,
    StopAppOperator,
)
from streamops_airflow.operators.maintenance import CompactOperator, RebuildStateOperator, VerifyOperator
from streamops_airflow.operators.observe import DlqSummaryOperator, WatchAppOperator
from streamops_airflow.operators.probe import PlatformProbeOperator
from streamops_airflow.operators.reprocess import PromoteOperator, ReprocessOperator
from streamops_airflow.operators.reset import ResetOperator
from streamops_airflow.operators.savepoints import RestoreOperator, SavepointOperator

__all__ = [
    "AppOperationOperator",
    "CompactOperator",
    "DeployAppOperator",
    "DlqSummaryOperator",
    "HandsOffWaits",
    "PlatformProbeOperator",
    "PromoteOperator",
    "RebuildStateOperator",
    "ReprocessOperator",
    "ResetOperator",
    "ResizeAppOperator",
    "RestoreOperator",
    "SavepointOperator",
    "ScaleWindowsOperator",
    "StopAppOperator",
    "VerifyOperator",
    "WatchAppOperator",
]
