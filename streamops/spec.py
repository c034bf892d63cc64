"""App specs from ``include/streams.yaml``, validated; an invalid field is named in the error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamops.exceptions import ConfigError, UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_UNITS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1.0, "second": 1.0,
          "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0,
          "hour": 3600.0, "hours": 3600.0}


def duration_seconds(text: str) -> float:
    """'2 seconds' / '500 ms' / '1 minute' -> seconds (the forms Spark's trigger accepts)."""
    m = _DURATION.match(text)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"not a duration: {text!r} (use e.g. '2 seconds', '500 ms', '1 minute', '2 hours')")
    return float(m.group(1)) * _UNITS[m.group(2)]


#: a reference to a secret (``streamops.kafka.security.kafka_config`` resolves it when it builds a config)
KAFKA_REFERENCE = re.compile(r"^\s*\$\{(file|env):[^}]*\}\s*$")
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"((?:[^"\\]|\\.)*)"')


def kafka_literal_secrets(props: dict[str, str]) -> list[str]:
    """Kafka client properties whose secret is written out instead of referenced: a key naming a
    password or secret, ``ssl.keystore.key``, and sasl.jaas.config's ``password="..."``."""
    bad = []
    for k, v in props.items():
        if k == "sasl.jaas.config":
            if any(not KAFKA_REFERENCE.match(m.group(1)) for m in _JAAS_PASSWORD.finditer(str(v))):
                bad.append(k)
        elif ("password" in k or "secret" in k or k == "ssl.keystore.key") and not KAFKA_REFERENCE.match(str(v)):
            bad.append(k)
    return bad


class Parallelism(BaseModel):
    """Executor cores. The defaults (1, 1..2) fit a new app on the two-core embedded platform."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    default: int = Field(1, ge=1)
    min: int = Field(1, ge=1)
    max: int = Field(2, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Parallelism:
        if not self.min <= self.default <= self.max:
            raise ValueError(f"need min <= default <= max, got {self.min} <= {self.default} <= {self.max}")
        return self


_MASTER = re.compile(r"^(local(\[(\d+|\*)\])?|spark://[^/\s]+:\d+(,[^/\s]+:\d+)*|k8s://https?://\S+)$")
_AGE = re.compile(r"^\s*(\d+)\s*(h|hours?|d|days?|w|weeks?)\s*$")
_AGE_UNITS = {"h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
              "w": 604800, "week": 604800, "weeks": 604800}


def age_seconds(text: str) -> float:
    """'12 hours' / '7 days' / '2 weeks' -> seconds (savepoint retention)."""
    m = _AGE.match(text)
    if not m:
        raise ValueError(f"not an age: {text!r} (use e.g. '12 hours', '7 days', '2 weeks')")
    return int(m.group(1)) * _AGE_UNITS[m.group(2)]


def _cron(v: str) -> str:
    from croniter import croniter

    if not croniter.is_valid(v):
        raise ValueError(f"not a cron expression: {v!r} (five fields, e.g. '0 8 * * 1-5')")
    return v


class SavepointPolicy(BaseModel):
    """When savepoints are taken (cron, UTC; None: manual only) and how many / how old ones are kept.
    Hourly by default: a restore should never have to go back more than an hour."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    schedule: str | None = "0 * * * *"
    retain_count: int = Field(5, ge=1)
    retain_age: str = "7 days"

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, v: str | None) -> str | None:
        return None if v is None else _cron(v)

    @field_validator("retain_age")
    @classmethod
    def _valid_age(cls, v: str) -> str:
        age_seconds(v)
        return v


class MaintenancePolicy(BaseModel):
    """When state maintenance runs (cron, UTC; None: manual runs only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    compact_schedule: str | None = "30 3 * * *"
    verify_schedule: str | None = "15 * * * *"

    @field_validator("compact_schedule", "verify_schedule")
    @classmethod
    def _valid_schedule(cls, v: str | None) -> str | None:
        return None if v is None else _cron(v)


class ReprocessPolicy(BaseModel):
    """The reprocess DAG's intervals: each run (manual or an Airflow backfill) reprocesses one
    data interval of this cron (UTC) into ``output_version`` (None: the one after the live one).

    ``max_offsets_per_trigger``: a backfill's batch size (None: ``BATCH_FACTOR`` times the app's).
    A backfill wants throughput, not latency: bigger batches mean fewer per-batch commits and one
    output and changelog update per key per batch instead of one per key per small batch."""

    BATCH_FACTOR: ClassVar[int] = 4

    model_config = ConfigDict(frozen=True, extra="forbid")
    interval: str = "0 0 * * *"
    output_version: str | None = Field(None, pattern=r"^v\d{1,6}$")
    max_offsets_per_trigger: int | None = Field(None, ge=1)

    def batch_size(self, live: int | None) -> int | None:
        """The backfill's max offsets per trigger, given the live app's (None: unbounded)."""
        if self.max_offsets_per_trigger is not None:
            return self.max_offsets_per_trigger
        return None if live is None else live * self.BATCH_FACTOR

    @field_validator("interval")
    @classmethod
    def _valid_interval(cls, v: str) -> str:
        return _cron(v)


class AlertPolicy(BaseModel):
    """What the app's watch DAG (``streamops_watch__APP``) fails on, besides a crash loop and a
    failed verification, which always alert. None: that alert is off."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: the lag (records behind, at the last batch's processing rate) in seconds
    max_lag_seconds: float | None = Field(300.0, gt=0)
    #: DLQ records per minute over the last 5 minutes
    max_dlq_per_minute: float | None = Field(None, gt=0)
    #: how often the watch looks, seconds
    check_every_s: float = Field(15.0, ge=1, le=3600)


class EventPolicy(BaseModel):
    """The app's Airflow assets (``streamops_airflow.assets``): how often its output asset
    announces the batches committed since the last event."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: at most one output asset event per this many seconds (it carries every batch since the last)
    batch_every_s: float = Field(60.0, ge=1, le=86400)


class ScaleWindow(BaseModel):
    """From each ``start`` (cron, UTC) until the next ``end`` the app runs at ``parallelism``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    start: str
    end: str
    parallelism: int = Field(ge=1)

    @field_validator("start", "end")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        return _cron(v)


class AppSpec(BaseModel):
    """One streaming application. Only ``job``, ``input_topics`` and ``output_topic`` are required;
    the changelog and DLQ topics default to names derived from the app name (``_derived_topics``)."""

    #: topic names derived from the app name, like the platform's ``_streamops-{name}-commits``:
    #: ``{name}-<role>`` with ``-`` only (Kafka warns about names that mix ``.`` and ``_``, and a
    #: ``.`` suffix here means an output version, ``user-profiles.v2``)
    CHANGELOG_TOPIC: ClassVar[str] = "{name}-state-changelog"
    DLQ_TOPIC: ClassVar[str] = "{name}-dlq"

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    job: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    description: str = ""
    input_topics: tuple[str, ...] = Field(min_length=1)
    input_partitions: int = Field(6, ge=1)
    output_topic: str
    changelog_topic: str  # omitted or null: CHANGELOG_TOPIC (filled in by _derived_topics)
    dlq_topic: str  # omitted or null: DLQ_TOPIC
    state_partitions: int = Field(4, ge=1, le=200)
    trigger_interval: str = "500 milliseconds"
    max_offsets_per_trigger: int | None = Field(None, ge=1)
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    #: jobs with stream time: per input topic, how long a partition of it may show no record before
    #: it stops holding the watermark back (until it shows one again); off for a topic not named.
    #: Results then depend on when records arrive, not only on the input (docs/writing-a-job.md, "Idle inputs")
    idle_timeouts: dict[str, str] = Field(default_factory=dict)
    #: where a batch's records are made and committed: ``driver`` (collected, encoded and written in
    #: one transaction by the driver) or ``executors`` (by the tasks that make them, a transaction per
    #: partition; the driver commits the batch's marker). Either may be chosen at any restart
    commit_on: Literal["driver", "executors"] = "driver"
    parallelism: Parallelism = Parallelism()
    checkpoint_root: Path | None = None
    spark_master: str | None = None  # None: the platform's standalone master; "local[N]" or a URL
    savepoints: SavepointPolicy = SavepointPolicy()
    maintenance: MaintenancePolicy = MaintenancePolicy()
    reprocess: ReprocessPolicy = ReprocessPolicy()
    scale_windows: tuple[ScaleWindow, ...] = ()
    alerts: AlertPolicy = AlertPolicy()
    events: EventPolicy = EventPolicy()
    #: the version of the output the app writes (``reset --output-version`` / ``promote`` keep it in
    #: the ledger; see ``streamops.app.outputs``); None: ``output_topic`` itself
    output_version: str | None = Field(None, pattern=r"^v\d{1,6}$")
    #: ``paused``: the app's scheduled DAGs (savepoints, verify, compact, scale windows) get no
    #: schedule on the next DAG parse; they stay triggerable by hand
    schedules: Literal["active", "paused"] = "active"
    #: Kafka client properties merged over the platform's defaults for this app's clients
    #: (``streamops.kafka.security``); secrets only as ``${file:...}`` / ``${env:...}`` references
    kafka: dict[str, str] = Field(default_factory=dict)

    def scheduled(self, cron: str | None) -> str | None:
        """``cron`` while the app's schedules are active, None (manual runs only) when paused."""
        return cron if self.schedules == "active" else None

    @model_validator(mode="before")
    @classmethod
    def _derived_topics(cls, data: Any) -> Any:
        """Fill an omitted changelog or DLQ topic before validation, so both stay plain ``str``
        attributes that every reader (and ``model_copy``/``model_dump``) sees as if written out."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return data  # not a mapping, or no name: the field errors say what is wrong
        derived = {"changelog_topic": cls.CHANGELOG_TOPIC, "dlq_topic": cls.DLQ_TOPIC}
        missing = {k: pattern.format(name=data["name"]) for k, pattern in derived.items() if data.get(k) is None}
        return {**data, **missing} if missing else data

    @field_validator("spark_master")
    @classmethod
    def _valid_master(cls, v: str | None) -> str | None:
        if v is not None and not _MASTER.match(v):
            raise ValueError(f"not a Spark master: {v!r} (local[N], spark://host:port or k8s://https://host:port)")
        return v

    @field_validator("kafka")
    @classmethod
    def _kafka_secrets_by_reference(cls, v: dict[str, str]) -> dict[str, str]:
        bad = kafka_literal_secrets(v)
        if bad:
            raise ValueError(f"{', '.join(bad)}: a secret in the spec file must be a reference, "
                             "${file:/abs/path} or ${env:NAME}, never the value itself")
        return v

    @model_validator(mode="after")
    def _parallelism_usable(self) -> AppSpec:
        limit = self.max_usable_parallelism
        if self.parallelism.max > limit:
            raise ValueError(f"parallelism.max {self.parallelism.max} > {limit}, the most this app can use "
                             f"(input_partitions {self.input_partitions}, state_partitions "
                             f"{self.state_partitions})")
        names = [w.name for w in self.scale_windows]
        for w in self.scale_windows:
            if not self.parallelism.min <= w.parallelism <= self.parallelism.max:
                raise ValueError(f"scale window {w.name!r}: parallelism {w.parallelism} outside "
                                 f"[{self.parallelism.min}, {self.parallelism.max}] (parallelism.min/max)")
            if names.count(w.name) > 1:
                raise ValueError(f"scale window name {w.name!r} used twice")
        return self

    @model_validator(mode="after")
    def _distinct_topics(self) -> AppSpec:
        """A derived name must not land on a topic the app already uses for something else."""
        roles = {"output_topic": self.output_topic, "changelog_topic": self.changelog_topic,
                 "dlq_topic": self.dlq_topic, **{f"input_topics[{i}]": t for i, t in enumerate(self.input_topics)}}
        seen: dict[str, str] = {}
        for role, topic in roles.items():
            if topic in seen:
                raise ValueError(f"{role} and {seen[topic]} are both {topic!r}: each topic has one role")
            seen[topic] = role
        return self

    @property
    def max_usable_parallelism(self) -> int:
        """One core per task: more cores than the widest stage (scan or state) would sit idle."""
        return max(self.input_partitions, self.state_partitions)

    def check_parallelism(self, n: int) -> int:
        """``n`` if this app can run at it, else a ``UsageError`` naming the limit and how to raise it."""
        limit = self.max_usable_parallelism
        if n < 1:
            raise UsageError(f"{self.name}: parallelism must be at least 1, got {n}")
        if n > limit:
            raise UsageError(
                f"{self.name}: parallelism {n} is more than it can use: {limit} (input_partitions "
                f"{self.input_partitions}, state_partitions {self.state_partitions}). To raise it, add "
                f"partitions to {', '.join(self.input_topics)} and input_partitions in the spec, or "
                f"`streamops rebuild-state {self.name} --from-changelog --state-partitions N`")
        if not self.parallelism.min <= n <= self.parallelism.max:
            raise UsageError(f"{self.name}: parallelism {n} outside the spec's range "
                             f"[{self.parallelism.min}, {self.parallelism.max}] (parallelism.min/max in "
                             f"include/streams.yaml)")
        return n

    @field_validator("trigger_interval")
    @classmethod
    def _valid_interval(cls, v: str) -> str:
        duration_seconds(v)
        return v

    @model_validator(mode="after")
    def _idle_inputs(self) -> AppSpec:
        """An idleness timeout names one of the app's inputs and is a duration above zero."""
        for topic, text in self.idle_timeouts.items():
            if topic not in self.input_topics:
                raise ValueError(f"idle_timeouts names {topic!r}, which is not one of input_topics "
                                 f"({', '.join(self.input_topics)})")
            if duration_seconds(text) <= 0:
                raise ValueError(f"idle_timeouts[{topic}] must be above zero, got {text!r}")
        return self

    @property
    def idle_timeout_ms(self) -> dict[str, int]:
        """``idle_timeouts`` in milliseconds, by input topic."""
        return {t: round(duration_seconds(v) * 1000) for t, v in self.idle_timeouts.items()}

    @property
    def trigger_seconds(self) -> float:
        return duration_seconds(self.trigger_interval)

    @property
    def live_output_topic(self) -> str:
        """Where the app writes its output now: ``output_topic`` or its versioned copy."""
        return versioned_output(self.output_topic, self.output_version)

    @property
    def commits_topic(self) -> str:
        """Compacted topic holding the last committed batch id (the exactly-once marker)."""
        return f"_streamops-{self.name}-commits"

    @property
    def ticks_topic(self) -> str:
        """Jobs with stream time: the driver writes a tick here when the watermark moves, and the
        app reads it back with its input, so that Spark learns the watermark with no more input."""
        return f"_streamops-{self.name}-ticks"


def versioned_output(topic: str, version: str | None) -> str:
    """``user-profiles`` + ``v2`` -> ``user-profiles.v2`` (blue/green outputs)."""
    return topic if version is None else f"{topic}.{version}"


def default_spec_path(repo: Path) -> Path:
    return repo / "include" / "streams.yaml"


def _line_of(root: yaml.Node | None, loc: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the deepest node of ``root`` that ``loc`` reaches (None: none)."""
    node, line = root, None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value if k.value == str(key)), None)
            if hit is None:
                break
            line, node = hit[0].start_mark.line + 1, hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_specs(text: str, path: Path) -> dict[str, AppSpec]:
    """Every app of a spec file's text, or a ``ConfigError`` naming each bad field and its line:
    a file that does not load is refused as a whole, never applied in part."""
    try:
        raw = yaml.safe_load(text) or {}
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    apps = raw.get("apps") if isinstance(raw, dict) else None
    if not isinstance(apps, dict) or not apps:
        raise ConfigError(f"{path}: expected a mapping 'apps: {{name: spec}}'")
    out = {}
    problems: list[str] = []
    for name, body in apps.items():
        if not isinstance(body, dict):
            line = _line_of(root, ("apps", name))
            problems.append(f"line {line}: apps.{name}: expected a mapping of fields, got {type(body).__name__}")
            continue
        try:
            out[name] = AppSpec(name=name, **body)
        except ValidationError as exc:
            for e in exc.errors():
                loc = tuple(e["loc"]) if e["loc"] else ()
                line = _line_of(root, ("apps", name, *loc)) if loc != ("name",) else _line_of(root, ("apps", name))
                where = f"line {line}: " if line else ""
                problems.append(f"{where}apps.{name}.{'.'.join(str(p) for p in loc)}: {e['msg']}")
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    return out


def load_specs(path: Path) -> dict[str, AppSpec]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"no app specs at {path}") from None
    return parse_specs(text, path)


def get_app(specs: dict[str, AppSpec], name: str) -> AppSpec:
    if name not in specs:
        raise UsageError(f"unknown app {name!r}; known apps: {', '.join(sorted(specs))}")
    return specs[name]


def import_job(spec: AppSpec, repo: Path):
    """The app's job module (``jobs.x`` lives in the checkout, which may not be on sys.path)."""
    import importlib
    import sys

    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    try:
        return importlib.import_module(spec.job)
    except ImportError as exc:
        raise ConfigError(f"apps.{spec.name}.job: the job module {spec.job!r} cannot be imported from {repo} "
                          f"({exc}); it is a module under jobs/ that declares a streamops.job.Job") from None


def load_job(spec: AppSpec, repo: Path):
    """The app's declared ``Job`` class, checked complete (``JobDeclarationError`` names what is not)."""
    from streamops.job import find_job

    return find_job(import_job(spec, repo))
