"""``streamops produce APP|TOPIC``: feed an app's input from the generator its job declares (or
from JSON-lines files). A TOPIC is fed through the job of the app that reads it, so the core never
imports a job itself (``spec.load_job`` finds it in the checkout from any working directory)."""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from streamops.cli.common import emit, settings_from
from streamops.exceptions import UsageError

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig
    from streamops.spec import AppSpec

USAGE_NOTE = """\
APP (a name in include/streams.yaml) feeds every input topic of the app; TOPIC feeds that topic
only, through the job of the app that reads it (an error, exit 2, when no app reads it).
--events N makes N records with the job's own generator (its generate(); --seed picks the
sample; --users, --bad-ratio and --skew are passed to it when given and when it takes them).
--from-file F.jsonl sends one record per line (the line is the value, the key is what the job's
key() gives for it, none for a line it rejects); an app with several input topics takes
--from-file TOPIC=F.jsonl once per topic. The same options always give the same records, in the
same order per partition.

Partitioning: a keyed record goes where Kafka's default partitioner puts it,
toPositive(murmur2(key)) % partitions (as Java producers and Kafka Streams do), so one key stays
in one partition, which order-dependent jobs need; records without a key go round-robin.
Topics are created with the spec's input_partitions when missing; an existing topic is used as
it is (never altered, never emptied): records are appended to it.
"""


# -- argument types (argparse turns ArgumentTypeError into a usage error, exit 2) --------------
def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _rate(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 events/s, got {text}")
    return value


def _ratio(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


_HOSTPORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def _bootstrap(text: str) -> str:
    for entry in text.split(","):
        m = _HOSTPORT.match(entry.strip())
        if not m or not 1 <= int(m.group(2)) <= 65535:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
    return text


# -- progress bar ------------------------------------------------------------------------------
class ProgressBar:
    """A one-line text bar on ``stream``: redrawn in place on a terminal (at most 10 times per
    second), otherwise a plain line at most once per second."""

    def __init__(self, total: int, stream: TextIO, *, width: int = 30,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.stream = stream
        self.width = width
        self.clock = clock
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = 0.1 if self.tty else 1.0
        self.t0 = clock()
        self._last = -math.inf
        self._drawn = False
        self.done = 0

    def render(self, done: int) -> str:
        elapsed = max(self.clock() - self.t0, 1e-9)
        frac = done / self.total if self.total else 1.0
        filled = round(frac * self.width)
        rate = done / elapsed
        eta = f"{(self.total - done) / rate:4.0f}s" if 0 < rate and done < self.total else "   -"
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {frac * 100:5.1f}%  "
                f"{done:,}/{self.total:,}  {rate:,.0f} ev/s  ETA {eta}")

    def update(self, done: int, *, force: bool = False) -> None:
        self.done = done
        now = self.clock()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        if self.tty:
            self.stream.write("\r\x1b[K" + self.render(done))
        else:
            self.stream.write(self.render(done) + "\n")
        self._drawn = True
        self.stream.flush()

    def close(self) -> None:
        """Draw the last known state and end the line."""
        self.update(self.done, force=True)
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


# -- command -----------------------------------------------------------------------------------
#: generator options: flag -> the keyword ``generate`` takes
GENERATE_OPTIONS = {"--users": "users", "--bad-ratio": "bad_ratio", "--skew": "skew"}


@dataclass(frozen=True)
class Target:
    """What a run feeds: an app, and which of its input topics."""

    spec: AppSpec
    topics: tuple[str, ...]
    named_topic: bool  # the command named a topic, not the app


def resolve_target(specs: dict[str, AppSpec], name: str) -> Target:
    """An app by name (all its input topics), or the app reading topic ``name`` (that topic only)."""
    if name in specs:
        return Target(specs[name], tuple(specs[name].input_topics), False)
    readers = [s for s in specs.values() if name in s.input_topics]
    if not readers:
        read = sorted({t for s in specs.values() for t in s.input_topics})
        raise UsageError(f"{name!r} is neither an app nor a topic an app reads; apps: {', '.join(sorted(specs))}; "
                         f"topics they read: {', '.join(read)}")
    jobs = {s.job for s in readers}
    if len(jobs) > 1:
        who = ", ".join(f"{s.name} ({s.job})" for s in readers)
        raise UsageError(f"{name} is read by apps with different jobs: {who}; name the app whose generator "
                         f"to use (`streamops produce APP`)")
    return Target(readers[0], (name,), True)


def cmd_produce(args: argparse.Namespace) -> int:
    from streamops.spec import default_spec_path, load_job, load_specs

    settings = settings_from(args)
    target = resolve_target(load_specs(default_spec_path(settings.repo)), args.topic)
    spec = target.spec
    options = {kw: getattr(args, kw) for kw in GENERATE_OPTIONS.values() if getattr(args, kw) is not None}
    if (args.events is None) == (not args.from_file):
        raise UsageError(f"give exactly one of --events N or --from-file F.jsonl (for {args.topic})")
    if args.from_file and options:
        raise UsageError(f"{_flags(options)} go to the job's generate(), which --from-file does not use")
    files = file_sources(args.from_file or [], target) if args.from_file else None  # before any broker call
    job_cls = load_job(spec, settings.repo)
    if files is not None:
        total = sum(len(lines) for lines in files.values())
        records: Iterable[tuple[str, bytes | None, bytes]] = _keyed_lines(job_cls, files)
        source = ", ".join(f"{t}={p}" for t, p in zip(files, args.from_file))
    else:
        total = args.events
        records = _generated(job_cls, spec, target, args.events, args.seed, options)
        source = f"{job_cls.__name__}.generate"
    from streamops.kafka.config import KafkaConfig
    from streamops.kafka.security import kafka_config

    kafka = kafka_config(settings)  # the platform's clients; another cluster's (--bootstrap): PLAINTEXT
    if args.bootstrap and args.bootstrap != kafka.bootstrap:
        kafka = KafkaConfig.plaintext(args.bootstrap)
    return _send(args, spec, target, kafka, records, total, source, options)


def _flags(options: dict[str, Any]) -> str:
    by_kw = {kw: flag for flag, kw in GENERATE_OPTIONS.items()}
    return ", ".join(by_kw[kw] for kw in options)


def _generated(job_cls: type, spec: AppSpec, target: Target, events: int, seed: int,
               options: dict[str, Any]) -> Iterator[tuple[str, bytes | None, bytes]]:
    """The job's generate() as (topic, key, value), only for the topics fed; a refused option is a
    usage error found before anything is sent (the first record is made here)."""
    from streamops.job import topic_records

    if not job_cls.can_generate():
        raise UsageError(f"{spec.name}'s job ({job_cls.__name__} in {spec.job}) declares no generate(): use "
                         f"--from-file F.jsonl, or add generate() to it (docs/writing-a-job.md)")
    name = f"{spec.name}: {job_cls.__name__}.generate()"
    takes = job_cls.generate_options()
    refused = [kw for kw in options if "*" not in takes and kw not in takes]
    if refused:
        said = ", ".join(takes) if takes else "no options"
        raise UsageError(f"{_flags({kw: None for kw in refused})}: {name} does not take "
                         f"{', '.join(refused)} (it takes {said})")
    try:
        it = iter(job_cls().generate(events, seed, **options))
        first = list(itertools.islice(it, 1))
    except (ValueError, TypeError) as exc:
        if not options:
            raise
        raise UsageError(f"{_flags(options)}: {name} refused them: {exc}") from None
    records = topic_records(itertools.chain(first, it), spec.input_topics, source=f"{job_cls.__name__}.generate()")
    if not target.named_topic:
        return records
    fed = set(target.topics)
    return (r for r in records if r[0] in fed)


def file_sources(given: list[str], target: Target) -> dict[str, list[bytes]]:
    """``--from-file [TOPIC=]F.jsonl`` (repeatable) -> the lines per topic, read now."""
    out: dict[str, list[bytes]] = {}
    for text in given:
        topic, sep, path = text.partition("=")
        if not (sep and topic in target.spec.input_topics):
            if len(target.topics) > 1:
                raise UsageError(f"{target.spec.name} reads several topics ({', '.join(target.topics)}): give "
                                 f"--from-file TOPIC=F.jsonl for each topic to feed, got {text!r}")
            topic, path = target.topics[0], text
        elif topic not in target.topics:
            raise UsageError(f"--from-file {text}: this run feeds {', '.join(target.topics)}, not {topic}")
        if topic in out:
            raise UsageError(f"--from-file: two files for {topic}")
        out[topic] = _file_lines(path)
    return out


def _send(args: argparse.Namespace, spec: AppSpec, target: Target, kafka: KafkaConfig,
          records: Iterable[tuple[str, bytes | None, bytes]], total: int, source: str,
          options: dict[str, Any]) -> int:
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce_to_topics

    made = ensure_topics(kafka, [TopicSpec(name=t, partitions=spec.input_partitions) for t in target.topics])
    show = sys.stderr.isatty() or not args.json
    bar = ProgressBar(total, sys.stderr) if show else None
    try:
        result = produce_to_topics(kafka, records, partitions={t: made[t].partitions for t in target.topics},
                                   rate=args.rate, progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    topics = {t: {"partitions": made[t].partitions, "created": made[t].created, "records": result.per_topic.get(t, 0)}
              for t in target.topics}
    payload: dict[str, Any] = {
        "app": spec.name, "topics": topics, "bootstrap": kafka.bootstrap, "events": result.records, "bytes": result.bytes,
        "seconds": round(result.seconds, 3), "events_per_s": round(result.records_per_s, 1), "source": source,
        "seed": None if args.from_file else args.seed, "options": options, "rate": args.rate,
        "partitioner": "murmur2 (Kafka's default)"}
    if len(target.topics) == 1:
        (t,) = target.topics
        payload.update(topic=t, partitions=made[t].partitions, topic_created=made[t].created)
    where = ", ".join(f"{t} ({v['records']:,} records, {v['partitions']} partitions{', created' if v['created'] else ''})"
                      for t, v in topics.items())
    text = (f"produced {result.records:,} records for {spec.name} to {where} in {result.seconds:.2f}s: "
            f"{result.records_per_s:,.0f} records/s")
    emit(args, payload, text)
    return 0


def _file_lines(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            return [ln.rstrip(b"\r\n") for ln in f if ln.strip()]
    except OSError as exc:
        raise UsageError(f"--from-file {path}: {exc.strerror or exc}") from None


def keyed_lines(job_cls: type, topic: str, lines: list[bytes]) -> Iterator[tuple[bytes | None, bytes]]:
    """Each line as a record value, keyed by the job's key for it, so that one key's records share a
    partition (order-dependent jobs need that); a line the job rejects goes unkeyed (the app sends
    it to its DLQ)."""
    from streamops.job import Record, Reject, key_or_reject

    job = job_cls()
    for i, value in enumerate(lines):
        parsed = job.parse(Record(topic, -1, i, None, value))
        key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
        yield (None if isinstance(key, Reject) else key.encode()), value


def _keyed_lines(job_cls: type, files: dict[str, list[bytes]]) -> Iterator[tuple[str, bytes | None, bytes]]:
    for topic, lines in files.items():
        for key, value in keyed_lines(job_cls, topic, lines):
            yield topic, key, value


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "produce", parents=[common], help="feed an app (or a topic an app reads) from its job's generator or a file",
        description="Feed APP's input topics, or the one TOPIC an app reads, from the generator its job declares "
                    "(--events) or from JSON-lines files (--from-file). Keyed records are placed by Kafka's "
                    "default partitioner (murmur2, as Java producers and Kafka Streams place them).",
        epilog=USAGE_NOTE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="APP|TOPIC", help="an app name, or an input topic of an app (created if missing)")
    p.add_argument("--events", metavar="N", type=_int_at_least(0), help="records to generate (>= 0)")
    p.add_argument("--from-file", metavar="[TOPIC=]F.jsonl", action="append",
                   help="one record value per line; TOPIC= for an app with several input topics (repeatable)")
    p.add_argument("--users", metavar="K", type=_int_at_least(1),
                   help="generator option: distinct users (>= 1), for a generate() that takes users")
    p.add_argument("--rate", metavar="R", type=_rate, help="records per second (> 0; default: as fast as possible)")
    p.add_argument("--skew", metavar="zipf:S",
                   help="generator option: key popularity, e.g. zipf:1.2 (default uniform), for a generate() that "
                        "takes skew; passed on as the string given, which generate() parses")
    p.add_argument("--bad-ratio", metavar="F", type=_ratio,
                   help="generator option: share of invalid records, 0..1 (default: the job's), for a generate() "
                        "that takes bad_ratio")
    p.add_argument("--seed", metavar="S", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--bootstrap", metavar="HOST:PORT", type=_bootstrap,
                   help="Kafka bootstrap servers (default: $STREAMOPS_BOOTSTRAP_SERVERS or the embedded broker)")
    p.set_defaults(func=cmd_produce)
