"""The embedded Spark cluster's shared secret (``spark.authenticate``), generated at the first
``platform up``: the master and workers refuse a driver, worker or executor that does not prove it
holds it. Kept beside the cluster's state in a Spark properties file of mode 0600 that drivers load
as it is (``streamops.spark.security``)."""

from __future__ import annotations

import secrets

from streamops.host.files import write_private
from streamops.kafka.properties import parse_properties
from streamops.settings import Settings
from streamops.spark.security import AUTH, SECRET, auth_properties_text, embedded_auth_properties


def ensure(settings: Settings) -> dict[str, str]:
    """The cluster's authentication properties, the secret generated on first use (then kept, so a
    restarted master and a running driver still agree)."""
    path = embedded_auth_properties(settings)
    if not path.is_file():
        write_private(path, auth_properties_text(
            secrets.token_hex(32), "Spark RPC authentication of the embedded cluster (streamops platform up). "
                                   "Mode 0600: the secret lets its holder run code on the workers."))
    return read(settings)


def read(settings: Settings) -> dict[str, str]:
    path = embedded_auth_properties(settings)
    if not path.is_file():
        return {}
    return {k: v for k, v in parse_properties(path.read_text(encoding="latin-1")).items() if k in (AUTH, SECRET)}
