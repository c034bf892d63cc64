"""``streamops produce APP|TOPIC``: feed an app from the generator its job declares (or from a
JSON-lines file), or load a raw topic with deterministic ``user_activity`` events."""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Callable
from typing import TextIO

from streamops.cli.common import emit, settings_from
from streamops.exceptions import UsageError

USAGE_NOTE = """\
APP (a name in include/streams.yaml): --events N makes N records with the app's own generator
(its job's generate(); --seed picks the sample), --from-file F.jsonl sends one record per line
(the line is the value; the key is what the job's key() gives for it, none for a line it
rejects). Both write to the app's first input topic, created with the spec's partitions if
missing.
TOPIC (any other name): user_activity events; --users is required. The same --seed, --events,
--users, --skew and --bad-ratio always produce the same records, in the same order per
partition. Creates TOPIC (--partitions, default 6) only if it is missing; an existing topic is
used as it is (never altered, never emptied): records are appended to it.
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


def _skew(text: str) -> str:
    from jobs.demo.generator import parse_skew

    try:
        parse_skew(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


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
def cmd_produce(args: argparse.Namespace) -> int:
    from streamops.spec import default_spec_path, load_specs

    settings = settings_from(args)
    specs = load_specs(default_spec_path(settings.repo))
    if args.topic in specs:
        return _produce_app(args, settings, specs[args.topic])
    if args.from_file is not None:
        raise UsageError(f"--from-file needs an app (one of {', '.join(sorted(specs))}), got the topic {args.topic!r}")
    if args.users is None:
        raise UsageError(f"{args.topic!r} is not an app ({', '.join(sorted(specs))}): producing user_activity events "
                         f"to a raw topic needs --users K")
    if args.events is None:
        raise UsageError("--events N is required")
    return _produce_topic(args, settings)


def _produce_app(args: argparse.Namespace, settings, spec) -> int:
    """An app's input from its job's generator or from a JSON-lines file."""
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce
    from streamops.spec import load_job

    given = [o for o, v in (("--users", args.users), ("--skew", args.skew), ("--partitions", args.partitions_given))
             if v is not None] + (["--bad-ratio"] if args.bad_ratio else [])
    if given:
        raise UsageError(f"{', '.join(given)} apply to a raw topic; {spec.name}'s job decides its own sample "
                         f"(its generate()); use --events and --seed, or --from-file")
    if (args.events is None) == (args.from_file is None):
        raise UsageError(f"give exactly one of --events N or --from-file F.jsonl for the app {spec.name}")
    job_cls = load_job(spec, settings.repo)
    lines = _file_lines(args.from_file) if args.from_file is not None else None  # before any broker call
    bootstrap = args.bootstrap or settings.kafka_bootstrap
    name = spec.input_topics[0]
    topic = ensure_topics(bootstrap, [TopicSpec(name=name, partitions=spec.input_partitions)])[name]
    if lines is not None:
        total = len(lines)
        records = _keyed_lines(job_cls, name, lines)
    else:
        if not job_cls.can_generate():
            raise UsageError(f"{spec.name}'s job ({job_cls.__name__}) declares no generate(): use --from-file F.jsonl")
        total = args.events
        records = job_cls().generate(args.events, args.seed)
    show = sys.stderr.isatty() or not args.json
    bar = ProgressBar(total, sys.stderr) if show else None
    try:
        result = produce(bootstrap, name, records, partitions=topic.partitions, rate=args.rate,
                         progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    payload = {"app": spec.name, "topic": name, "bootstrap": bootstrap, "topic_created": topic.created,
               "partitions": topic.partitions, "events": result.records, "bytes": result.bytes,
               "seconds": round(result.seconds, 3), "events_per_s": round(result.records_per_s, 1),
               "source": str(args.from_file) if args.from_file is not None else f"{job_cls.__name__}.generate",
               "seed": None if args.from_file is not None else args.seed, "rate": args.rate}
    text = (f"produced {result.records:,} records for {spec.name} to {name} ({topic.partitions} partitions"
            f"{', created' if topic.created else ''}) in {result.seconds:.2f}s: {result.records_per_s:,.0f} records/s")
    emit(args, payload, text)
    return 0


def _file_lines(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            return [ln.rstrip(b"\r\n") for ln in f if ln.strip()]
    except OSError as exc:
        raise UsageError(f"--from-file {path}: {exc.strerror or exc}") from None


def _keyed_lines(job_cls, topic: str, lines: list[bytes]):
    """Each line as a record value, keyed by the job's key for it (so one key's records share a
    partition, as the job's ordering needs); a line the job rejects goes unkeyed (the app sends it to
    its DLQ)."""
    from streamops.job import Record, Reject

    job = job_cls()
    for i, value in enumerate(lines):
        parsed = job.parse(Record(topic, -1, i, None, value))
        yield (None if isinstance(parsed, Reject) else job.key(parsed).encode()), value


def _produce_topic(args: argparse.Namespace, settings) -> int:
    from jobs.demo.generator import generate_records
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce

    bootstrap = args.bootstrap or settings.kafka_bootstrap
    args.partitions = 6 if args.partitions_given is None else args.partitions_given
    topic = ensure_topics(bootstrap, [TopicSpec(name=args.topic, partitions=args.partitions)])[args.topic]
    bad = 0

    def records():
        nonlocal bad
        for rec in generate_records(args.events, args.users, seed=args.seed, skew=args.skew,
                                    bad_ratio=args.bad_ratio):
            if rec.reason is not None:
                bad += 1
            yield rec.key, rec.value

    show = sys.stderr.isatty() or not args.json
    bar = ProgressBar(args.events, sys.stderr) if show else None
    try:
        result = produce(bootstrap, args.topic, records(), partitions=topic.partitions, rate=args.rate,
                         progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    payload = {
        "topic": args.topic,
        "bootstrap": bootstrap,
        "topic_created": topic.created,
        "partitions": topic.partitions,
        "events": result.records,
        "bad": bad,
        "bytes": result.bytes,
        "seconds": round(result.seconds, 3),
        "events_per_s": round(result.records_per_s, 1),
        "seed": args.seed,
        "users": args.users,
        "skew": args.skew,
        "bad_ratio": args.bad_ratio,
        "rate": args.rate,
    }
    text = (f"produced {result.records:,} events ({bad:,} bad) to {args.topic} "
            f"({topic.partitions} partitions{', created' if topic.created else ''}) in "
            f"{result.seconds:.2f}s: {result.records_per_s:,.0f} events/s")
    emit(args, payload, text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "produce", parents=[common], help="feed an app from its generator or a file, or load a raw topic",
        description="Feed APP's input from the generator its job declares (--events) or from a JSON-lines "
                    "file (--from-file), or produce deterministic user_activity events to a raw TOPIC.",
        epilog=USAGE_NOTE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="APP|TOPIC", help="an app name, or a topic to write to (created if missing)")
    p.add_argument("--events", metavar="N", type=_int_at_least(0), help="records to produce (>= 0)")
    p.add_argument("--from-file", metavar="F.jsonl", help="APP only: one record value per line")
    p.add_argument("--users", metavar="K", type=_int_at_least(1), help="TOPIC only: distinct user ids (>= 1)")
    p.add_argument("--rate", metavar="R", type=_rate, help="events per second (> 0; default: as fast as possible)")
    p.add_argument("--skew", metavar="zipf:S", type=_skew,
                   help="user popularity: zipf:S with S > 0 (e.g. zipf:1.2); default uniform")
    p.add_argument("--bad-ratio", metavar="F", type=_ratio, default=0.0,
                   help="share of invalid records, 0..1 (default 0); they rotate through every DLQ reason")
    p.add_argument("--seed", metavar="S", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--partitions", metavar="P", type=_int_at_least(1), dest="partitions_given",
                   help="TOPIC only: partitions if the topic is created (default 6)")
    p.add_argument("--bootstrap", metavar="HOST:PORT", type=_bootstrap,
                   help="Kafka bootstrap servers (default: $STREAMOPS_BOOTSTRAP_SERVERS or the embedded broker)")
    p.set_defaults(func=cmd_produce)
