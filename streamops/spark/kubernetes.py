"""A driver on a ``k8s://`` master: the Spark settings that put its executors in pods.

The driver stays where the supervisor started it (client mode, in the supervisor's pod), so the
supervisor keeps tracking its process, lease and log as on a standalone cluster; its executors are
pods Spark's Kubernetes scheduler creates and owns. What a pod needs that a standalone worker had
for free: the image (the project's Dockerfile, the same code and jars as the driver), the state dir
on a ReadWriteMany claim (the checkpoint's state store files are written by executors), the pod's
own address for executors to call back, and its name so the executor pods are deleted with it.
docs/production.md shows this rendering; tests/unit/spark/test_kubernetes.py holds the two equal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from streamops.exceptions import ConfigError
from streamops.settings import ENV_VARS, Settings
from streamops.spec import AppSpec

#: the downward API's variables in the supervisor's pod (docs/production.md's Deployment sets them)
POD_IP, POD_NAME = "STREAMOPS_POD_IP", "STREAMOPS_POD_NAME"
VOLUME = "streamops-state"


def is_kubernetes(master: str) -> bool:
    return master.startswith("k8s://")


def pod_prefix(app: str) -> str:
    """Executor pod names start with this: an RFC 1123 label (lowercase, digits, '-')."""
    return "streamops-" + re.sub(r"[^a-z0-9-]+", "-", app.lower()).strip("-")


def kubernetes_conf(spec: AppSpec, settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a driver on a ``k8s://`` master adds to ``session.session_conf``'s."""
    env = os.environ if environ is None else environ
    if not settings.spark_image:
        raise ConfigError(f"{spec.name} runs on a Kubernetes master: set {ENV_VARS['spark_image']} to the image its "
                          f"executor pods run (built from the project's Dockerfile, so they hold the same code)")
    claim = "spark.kubernetes.executor.volumes.persistentVolumeClaim." + VOLUME
    conf = {
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": settings.k8s_namespace,
        "spark.kubernetes.container.image": settings.spark_image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": settings.k8s_service_account,
        "spark.kubernetes.executor.podNamePrefix": pod_prefix(spec.name),
        "spark.kubernetes.executor.label.app.kubernetes.io/part-of": "streamops",
        "spark.kubernetes.executor.label.streamops.io/app": spec.name,
        f"{claim}.options.claimName": settings.k8s_state_claim,
        f"{claim}.mount.path": str(settings.state_dir),
        # Spark generates a secret per application on Kubernetes and hands it to its executor pods
        "spark.authenticate": "true",
    }
    if ip := env.get(POD_IP):  # executors call the driver back at its pod's address
        conf |= {"spark.driver.host": ip, "spark.driver.bindAddress": "0.0.0.0"}
    if name := env.get(POD_NAME):  # the executor pods are owned by (and deleted with) the driver's
        conf["spark.kubernetes.driver.pod.name"] = name
    return conf
