"""Blue/green outputs: which version of its output topic an app writes.

The spec names the base topic (``user-profiles``); ``reset --output-version v2`` and
``reprocess --output-version v2`` write ``user-profiles.v2``, and ``promote`` makes a version the
one the app writes. The ledger keeps the choice, so the driver, ``check`` and ``verify`` all read
the same answer.
"""

from __future__ import annotations

import re

from streamops.exceptions import ConfigError, UsageError
from streamops.ledger import Ledger
from streamops.settings import Settings
from streamops.spec import AppSpec, default_spec_path, get_app, load_specs, versioned_output

VERSION = re.compile(r"^v\d{1,6}$")


def check_version(version: str | None) -> str | None:
    if version is not None and not VERSION.match(version):
        raise UsageError(f"output version must look like v2 (v and a number), got {version!r}")
    return version


def with_version(spec: AppSpec, version: str | None) -> AppSpec:
    return spec.model_copy(update={"output_version": check_version(version)})


def live_spec(spec: AppSpec, ledger: Ledger) -> AppSpec:
    """``spec`` with the output version the ledger says the app writes."""
    return with_version(spec, ledger.output_version(spec.name))


def load_live_spec(settings: Settings, name: str, ledger: Ledger | None = None, *,
                   last_good_ok: bool = False) -> AppSpec:
    """The app's spec as it runs now (for the driver, the operations, check and verify): the spec
    file's, with the fields a driver reads at its start as the app's last deploy pinned them
    (``streamops.specfile``), and the output version the ledger names. ``last_good_ok``: a spec
    file that does not load gives the last good one instead of its error (``stop`` must work
    while the file is broken)."""
    from streamops.app.dir import AppDir
    from streamops.specfile import effective, open_spec_file

    if last_good_ok:
        spec_file = open_spec_file(settings.repo, settings.state_dir)
        if not spec_file.specs:
            raise ConfigError(spec_file.error or f"no app specs at {default_spec_path(settings.repo)}")
        current = spec_file.specs
    else:
        current = load_specs(default_spec_path(settings.repo))
    pinned = AppDir.of(settings, name).pinned_spec()
    spec = effective(pinned, current.get(name)) if name in current or pinned is not None else None
    if spec is None:
        spec = get_app(current, name)  # the unknown-app error, naming the known ones
    if ledger is not None:
        return live_spec(spec, ledger)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        return live_spec(spec, ledger)
    finally:
        ledger.close()


def reprocess_spec(spec: AppSpec, version: str) -> AppSpec:
    """The identity a reprocess into ``version`` runs under: its own name (so its own checkpoint,
    transactional id and batch marker: it never fences the live app), the versioned output, and
    versioned changelog and DLQ topics (the live ones belong to the live state and input), and
    the backfill's batch size (``ReprocessPolicy.batch_size``)."""
    check_version(version)
    return spec.model_copy(update={
        "name": f"{spec.name}__reprocess_{version}",
        "output_topic": versioned_output(spec.output_topic, version),
        "changelog_topic": versioned_output(spec.changelog_topic, version),
        "dlq_topic": versioned_output(spec.dlq_topic, version),
        "output_version": None,
        "max_offsets_per_trigger": spec.reprocess.batch_size(spec.max_offsets_per_trigger),
    })
