"""The embedded Spark cluster's shared secret (``spark.authenticate``), generated at the first
``platform up``: the master and workers refuse a driver, worker or executor that does not prove it
holds it. Kept beside the cluster's state in a Spark properties file of mode 0600 that drivers load
as it is (``streamops.spark.security``)."""

from __future__ import annotations

import secrets

from streamops.host.files import write_private
from streamops.settings import Settings
from streamops.spark.security import embedded_auth_properties

AUTH = "spark.authenticate"
SECRET = "spark.authenticate.secret"


def ensure(settings: Settings) -> dict[str, str]:
    """The cluster's authentication properties, the secret generated on first use (then kept, so a
    restarted master and a running driver still agree)."""
    path = embedded_auth_properties(settings)
    if not path.is_file():
        write_private(path, "# Spark RPC authentication of the embedded cluster (streamops platform up). "
                            "Mode 0600: the secret lets its holder run code on the workers.\n"
                            f"{AUTH} true\n{SECRET} {secrets.token_hex(32)}\n")
    return read(settings)


def read(settings: Settings) -> dict[str, str]:
    path = embedded_auth_properties(settings)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.strip().partition(" ")
        if key in (AUTH, SECRET):
            out[key] = value.strip()
    return out

