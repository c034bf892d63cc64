"""App specs from ``include/streams.yaml``, validated; an invalid field is named in the error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamops.exceptions import ConfigError, UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_UNITS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1.0, "second": 1.0,
          "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0}


def duration_seconds(text: str) -> float:
    """'2 seconds' / '500 ms' / '1 minute' -> seconds (the forms Spark's trigger accepts)."""
    m = _DURATION.match(text)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"not a duration: {text!r} (use e.g. '2 seconds', '500 ms', '1 minute')")
    return float(m.group(1)) * _UNITS[m.group(2)]


class Parallelism(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    default: int = Field(2, ge=1)
    min: int = Field(1, ge=1)
    max: int = Field(4, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Parallelism:
        if not self.min <= self.default <= self.max:
            raise ValueError(f"need min <= default <= max, got {self.min} <= {self.default} <= {self.max}")
        return self


class AppSpec(BaseModel):
    """One streaming application."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    job: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    description: str = ""
    input_topics: tuple[str, ...] = Field(min_length=1)
    input_partitions: int = Field(6, ge=1)
    output_topic: str
    changelog_topic: str
    dlq_topic: str
    state_partitions: int = Field(4, ge=1, le=200)
    trigger_interval: str = "2 seconds"
    max_offsets_per_trigger: int | None = Field(None, ge=1)
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    parallelism: Parallelism = Parallelism()
    checkpoint_root: Path | None = None
    spark_master: str | None = None  # None: the platform's standalone master; "local[N]" or a URL

    @field_validator("trigger_interval")
    @classmethod
    def _valid_interval(cls, v: str) -> str:
        duration_seconds(v)
        return v

    @property
    def trigger_seconds(self) -> float:
        return duration_seconds(self.trigger_interval)

    @property
    def commits_topic(self) -> str:
        """Compacted topic holding the last committed batch id (the exactly-once marker)."""
        return f"_streamops-{self.name}-commits"


def default_spec_path(repo: Path) -> Path:
    return repo / "include" / "streams.yaml"


def load_specs(path: Path) -> dict[str, AppSpec]:
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"no app specs at {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    apps = raw.get("apps") if isinstance(raw, dict) else None
    if not isinstance(apps, dict) or not apps:
        raise ConfigError(f"{path}: expected a mapping 'apps: {{name: spec}}'")
    out = {}
    for name, body in apps.items():
        try:
            out[name] = AppSpec(name=name, **(body or {}))
        except ValidationError as exc:
            problems = "; ".join(
                f"apps.{name}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{path}: {problems}") from None
        except TypeError as exc:
            raise ConfigError(f"{path}: apps.{name}: {exc}") from None
    return out


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
    return importlib.import_module(spec.job)
