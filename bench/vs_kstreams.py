"""The demo app (``user_activity``) on streamops beside a Kafka Streams peer doing the same fold, on
one Apache Kafka broker over the same records: throughput over a backlog, then latency under a
steady load (issue 39).

    .venv/bin/python bench/vs_kstreams.py [--events 300000] [--partitions 6] [--users 10000] [--runs 3] \
        [--batch 100000] [--master local[2]] [--rate 5000] [--latency-seconds 30] [--warmup 10]
    .venv/bin/python bench/vs_kstreams.py --validation-only   # the peer's validation against fold.validate

The peer, ``bench/peers/kstreams/``, is a Java app on ``org.apache.kafka:kafka-streams`` of the
broker's version (4.1.0): ``processing.guarantee=exactly_once_v2``, 2 stream threads, its profiles in
a RocksDB key-value store with caching off (``statestore.cache.max.bytes=0``), its own JSON parser
written to accept exactly what ``jobs/demo/fold.validate`` (Python's json module) accepts; rejected
records go to its DLQ topic as streamops writes them (the raw record, the reason in the
``streamops.dlq.reason`` header, the source topic/partition/offset in headers). The bench builds it
with ``mvn -q package`` when its jar is older than its sources.

First, always: the peer's validation (``--validate``: no Kafka) over ``EDGE_CASES`` (null, empty,
BOM, bad UTF-8, NaN/Infinity, -0, huge ints, float ts, escapes, duplicate keys, deep nesting...)
and 3,000 generated records with 20% malformed, compared line by line with ``fold.validate`` and
``contract.amount_cents``, and their folded profiles (with totals of up to 1e16 in currency units)
with ``fold.profile_json``. A difference stops the bench.

Throughput, per run (``--runs``): a fresh broker (temporary state dir, free ports; stopped in
``finally``), ``--events`` seeded records (the demo generator, seed = run number, 1% malformed,
``--users`` users) in ``user-events`` with ``--partitions`` partitions, then both sides over that
same topic, the order alternating per run:

- ``kstreams``: the peer (app id ``kstreams-peer-RUN``, writing ``kstreams-profiles`` and
  ``kstreams-events.dlq``) until it has processed ``--events`` records, then its clean close (the
  last transaction commits). ``first to last record`` = records / (the last record processed - the
  first), as the peer reports it; ``wall`` = records / (its process's start to its exit: JVM start,
  topic checks, rebalance, close).
- ``streamops``: ``python -m streamops.spark.driver --app user_activity --exit-at-end``
  (``bench/throughput.py``'s ``run_spark``: ``--batch`` records per trigger, ``--master``), writing
  ``user-profiles`` and ``user-events.dlq``. ``all batches`` = records / (the first batch's start to
  the last one's end); ``steady`` = batches 2..n (the first also starts the Python workers and the
  state stores); ``wall`` adds the driver's start.

After each side, its output is checked against the plain fold of the input topic as it is
(``fold.validate`` + ``fold.fold``): the latest value of each user in the output, read
read_committed, must be ``fold.profile_json`` of that user's folded profile, byte for byte, with no
other key; the DLQ must hold every rejected input record exactly once, with ``validate``'s reason
(matched by the source headers). A difference stops the bench.

Table: records/s, min/median/max over the runs; ``ratio to kstreams`` = the row's median / the
peer's ``first to last record`` median (streamops/kstreams: below 1 is slower than the peer).

Latency (``--latency-seconds``, 0 skips): per side a fresh broker, the app started on an empty
``user-events`` (streamops: the driver with the spec's defaults, its trigger included; the
peer as above, without a record limit), ``bench/latency.py``'s feeder at ``--rate`` events/s and
one probe every 0.25 s (a login of a user of its own), timed from just before its produce until
its profile is visible to a read_committed consumer of the side's output topic. The clock starts
once the side has processed its first records (streamops: its first batch committed); the first
``--warmup`` seconds of probes are left out; a probe not seen 30 s after the last is lost.
p50/p90/max in seconds; ``p50 ratio to kstreams`` = streamops' p50 / the peer's.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, summary, table
from bench.latency import probe_latency
from bench.throughput import produce_input, run_spark
from jobs.demo import contract as c
from jobs.demo.fold import fold, profile_json, validate
from streamops.platform import manager
from streamops.settings import Settings
from streamops.spec import default_spec_path, get_app, load_specs

PEER = REPO / "bench" / "peers" / "kstreams"
PEER_JAR = PEER / "target" / "kstreams-peer.jar"
PEER_MAIN = "streamops.peer.KStreamsPeer"
PEER_OUTPUT, PEER_DLQ = "kstreams-profiles", "kstreams-events.dlq"
#: the peer's JVM heap: Spark's default driver memory (the streamops side runs in one local JVM)
PEER_HEAP = "-Xmx1g"

Coords = tuple[str, int, int]


# -- the peer: build and run -------------------------------------------------------------------------
def peer_sources(root: Path = PEER) -> list[Path]:
    return [root / "pom.xml", *sorted((root / "src").rglob("*.java"))]


def needs_build(jar: Path, sources: Iterable[Path]) -> bool:
    """The jar is missing or older than one of its sources."""
    if not jar.exists():
        return True
    built = jar.stat().st_mtime
    return any(p.stat().st_mtime > built for p in sources)


def build_peer() -> Path:
    if needs_build(PEER_JAR, peer_sources()):
        print("building the Kafka Streams peer (mvn -q package)...", file=sys.stderr, flush=True)
        subprocess.run(["mvn", "-q", "package"], cwd=PEER, check=True)
    return PEER_JAR


def peer_java(jar: Path) -> list[str]:
    return ["java", PEER_HEAP, "-cp", f"{jar}{os.pathsep}{jar.parent / 'lib' / '*'}", PEER_MAIN]


def peer_args(bootstrap: str, app_id: str, state_dir: Path, records: int, idle_timeout_s: int) -> list[str]:
    return ["--bootstrap", bootstrap, "--input", c.INPUT_TOPIC, "--output", PEER_OUTPUT, "--dlq", PEER_DLQ,
            "--app-id", app_id, "--state-dir", str(state_dir), "--records", str(records),
            "--idle-timeout-s", str(idle_timeout_s)]


def ensure_peer_topics(settings: Settings, partitions: int) -> None:
    from streamops.kafka.admin import TopicSpec, ensure_topics

    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=t, partitions=partitions)
                                             for t in (c.INPUT_TOPIC, PEER_OUTPUT, PEER_DLQ)])


def run_peer(settings: Settings, jar: Path, events: int, app_id: str) -> dict:
    """The peer to the end of ``events`` input records; its summary line plus ``wall_rate``."""
    log = settings.state_dir / f"{app_id}.log"
    t0 = time.monotonic()
    with open(log, "wb") as err:
        r = subprocess.run(peer_java(jar) + peer_args(settings.kafka_bootstrap, app_id, settings.state_dir / app_id,
                                                     events, 60),
                           stdout=subprocess.PIPE, stderr=err, check=False)
    wall = time.monotonic() - t0
    lines = r.stdout.decode().strip().splitlines()
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the peer exited {r.returncode}; log: {log}\n" + log.read_text(errors="replace")[-3000:])
    out = json.loads(lines[-1])
    if out["records"] != events:
        raise SystemExit(f"the peer processed {out['records']:,} records, expected {events:,}; log: {log}")
    return {**out, "wall_rate": events / wall}


# -- the peer's validation against fold.validate -------------------------------------------------------------
def _event(**fields: object) -> bytes:
    return json.dumps({"user_id": "u1", "event_type": "purchase", "amount": 1.5, "ts": 1, **fields}).encode()


def _raw(amount: str = "1.5", ts: str = "1", user: str = '"u1"', kind: str = '"purchase"') -> bytes:
    return f'{{"user_id":{user},"event_type":{kind},"amount":{amount},"ts":{ts}}}'.encode()


#: values where a JSON parser, a number type or a rounding could differ from Python's
EDGE_CASES: tuple[bytes | None, ...] = (
    None, b"", b" ", b"null", b"true", b"false", b"42", b"-0", b"1.5", b'"u1"', b"[]", b"[1, 2]", b"{}", b"NaN",
    b"\xef\xbb\xbf" + _raw(), _raw().decode().encode("utf-16"), _raw().decode().encode("utf-16-le"),
    *(_raw(user='"x"').replace(b'"x"', b'"' + bad + b'"')  # not UTF-8: a stray byte, overlong, a surrogate,
      for bad in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82")),  # > U+10FFFF, cut
    _raw(user='"\u00fc\u65e5\U0001f600"'), _raw(user='"\\u00fc"'), _raw(user='"\\ud83d\\ude00"'),
    _raw(user='"\\ud800"'), _raw(user='"\\udc00x"'), _raw(user='"a\\ud800\\u0041"'), _raw(user='"\\u12G4"'),
    _raw(user='"\\x41"'), _raw(user='"a\x01"'), _raw(user='"a\tb"'), _raw(user='"a\x7f"'), _raw(user='"\\/\\"\\\\"'),
    _raw(user='"\\b\\f\\n\\r\\t"'), _raw(user='"\\U00e9"'), _raw(user='"\\u00E9"'),
    _raw(user='"\u00a0"'), b'{"user\\u005fid":"u1","event_type":"view","amount":0,"ts":1}',
    b' \t\r\n' + _raw() + b' \n', _raw() + b"\x0c", b"\x0b" + _raw(), b"\xc2\xa0" + _raw(), _raw() + b"}",
    _raw() + b" x", _raw() + b"\x00", _raw()[:-1] + b",}", b"[1,]", _raw().replace(b":", b"", 1),
    b"{'user_id':'u1'}", b'{user_id:"u1"}', b"/*c*/" + _raw(), _raw().replace(b"{", b"{ ", 1),
    b'{"user_id":"u1","event_type":"view","amount":0,"ts":1,"user_id":""}',  # duplicate keys: the last wins
    b'{"user_id":"","event_type":"view","amount":0,"ts":1,"user_id":"u2"}',
    _raw(user="42"), _raw(user="null"), _raw(user="[]"), _raw(user="{}"), _raw(user="true"), _raw(user='""'),
    _raw(user="NaN"), _raw(kind='"LOGIN"'), _raw(kind='"login "'), _raw(kind="null"), _raw(kind="1"),
    _raw(kind='"log\\u0069n"'), b'{"user_id":"u1","amount":0,"ts":1}', b'{"user_id":"u1","event_type":"view","ts":1}',
    b'{"user_id":"u1","event_type":"view","amount":0}',
    *(_raw(amount=a) for a in (
        "0", "-0", "-0.0", "0.0", "1e12", "1E12", "1000000000000", "1000000000001", "1000000000000.0001",
        "1.0000000000001e12", "999999999999.995", "999999999999.9999", "123456789012.345", "NaN", "Infinity",
        "-Infinity", "-NaN", "nan", "infinity", "1e999", "-1e999", "1E2", "1e+2", "1e-2", "1e-400", "5e-324",
        "0.005", "0.015", "0.125", "2.675", "1.005", "0.0050000000000000001", "0.12499999999999999",
        "1.0049999999999999", "1.00499999999999989", "0.1", "0.30000000000000004", "4.35", "8.675",
        "1.5", '"5"', "true", "false", "null", "[1]", '{"a":1}', "-", "01", "00", "1.", ".5", "+1", "1e", "1e+",
        "0x10", "1.5e", "1_000", "-1", "-0.001", str(10**30), str(-10**30), "1" * 4300, "1" * 4301,
        "-" + "1" * 4300, "9" * 400 + ".5", "0." + "0" * 400 + "1", "1" + "0" * 11 + ".0050000000000000001",
        "[" * 500 + "]" * 500, "[" * 2000 + "]" * 2000, '{"a":' * 2000 + "1" + "}" * 2000)),
    *(_raw(ts=t) for t in (
        "0", "-0", "-1", "1.0", "1e3", '"1"', "true", "null", str(2**63 - 1), str(2**63), str(-(2**63)),
        str(10**30), "1" * 4301, "Infinity", "NaN", "01")),
    *(_raw(kind='"login"', ts=t) for t in ("5", "3", str(2**63 - 1))),
    _event(extra={"nested": [1, {"x": None}], "n": 1e308}), _event(amount=0, ts=7, event_type="view"),
)


def corpus(generated: int = 3000) -> list[bytes | None]:
    """``EDGE_CASES``, generated records with 20% malformed (every variant of the generator's bad records),
    and a big spender (totals past 1e15 cents, where the peer formats the float the long way)."""
    from jobs.demo.generator import generate_records

    big = [_raw(amount=a, user='"big"') for a in ("1e12",) * 10_001 + ("999999999999.99",) * 3 + ("0.01",)]
    return [*EDGE_CASES, *(r.value for r in generate_records(generated, 50, seed=7, bad_ratio=0.2)), *big]


def validation_lines(values: Iterable[bytes | None]) -> str:
    """The peer's ``--validate`` input: one value a line, base64 ("-" for a null value)."""
    return "".join(("-" if v is None else base64.b64encode(v).decode()) + "\n" for v in values)


def expected_validation(value: bytes | None) -> str:
    """What the peer's ``--validate`` must print for ``value``: the reason, or ``ok CENTS TS TYPE USER``."""
    event, reason = validate(value)
    if reason is not None:
        return reason
    cents = c.amount_cents(event["amount"]) if event["event_type"] == "purchase" else 0
    return f"ok {cents} {event['ts']} {event['event_type']} {json.dumps(event['user_id'])}"


def validation_mismatches(values: list[bytes | None], out: str) -> list[str]:
    """The differences between the peer's ``--validate`` output and ``fold.validate`` + ``fold.fold``:
    one line per value, then ``profile JSON`` per user of the valid events."""
    lines = out.splitlines()
    problems = [f"value {i} {values[i]!r:.120}: the peer says {got!r}, fold.validate {want!r}"
                for i, (got, want) in enumerate(zip(lines, map(expected_validation, values))) if got != want]
    if len(lines) < len(values):
        problems.append(f"the peer answered {len(lines)} of {len(values)} values")
    folded = fold(e for e, r in map(validate, values) if r is None)
    want = {profile_json(p) for p in folded.values()}
    got = {line.removeprefix("profile ").encode() for line in lines[len(values):]}
    problems += [f"profile only the peer gives: {p!r:.200}" for p in sorted(got - want)]
    problems += [f"profile the peer does not give: {p!r:.200}" for p in sorted(want - got)]
    return problems


def check_validation(jar: Path) -> int:
    values = corpus()
    r = subprocess.run(peer_java(jar) + ["--validate"], input=validation_lines(values).encode(),
                       capture_output=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"the peer's --validate exited {r.returncode}: {r.stderr.decode()[-3000:]}")
    problems = validation_mismatches(values, r.stdout.decode())
    if problems:
        raise SystemExit("the peer's validation differs from fold.validate:\n" + "\n".join(problems[:40]))
    return len(values)


# -- checking a side's output against the plain fold -----------------------------------------------------------
def expected_of(records: Iterable[tuple[Coords, bytes | None]]) -> tuple[dict[str, bytes], dict[Coords, str]]:
    """The plain fold of input records: each user's profile (``profile_json``) and each rejected record's reason."""
    rejected: dict[Coords, str] = {}

    def valid():
        for where, value in records:
            event, reason = validate(value)
            if reason is None:
                yield event
            else:
                rejected[where] = reason

    profiles = {uid: profile_json(p) for uid, p in fold(valid()).items()}
    return profiles, rejected


def output_problems(side: str, profiles: Mapping[str, bytes], rejected: Mapping[Coords, str],
                    output: Mapping[str, bytes], dlq: list[tuple[Coords, str]], most: int = 10) -> list[str]:
    """How a side's latest output per key and its DLQ entries differ from the plain fold's."""
    problems = [f"{side}: no output for user {u!r}" for u in sorted(profiles.keys() - output.keys())]
    problems += [f"{side}: output for {u!r}, which the fold has no profile of" for u in sorted(output.keys() - profiles.keys())]
    problems += [f"{side}: {u!r} is {output[u]!r}, the fold gives {profiles[u]!r}"
                 for u in sorted(profiles.keys() & output.keys()) if output[u] != profiles[u]]
    seen = Counter(where for where, _ in dlq)
    problems += [f"{side}: {where} is in the DLQ {n} times" for where, n in sorted(seen.items()) if n > 1]
    got = dict(dlq)
    problems += [f"{side}: {where} ({reason}) is not in the DLQ" for where, reason in sorted(rejected.items())
                 if where not in got]
    problems += [f"{side}: {where} is in the DLQ as {reason}, the fold has it valid" for where, reason in sorted(got.items())
                 if where not in rejected]
    problems += [f"{side}: {where} is in the DLQ as {got[where]}, the fold says {reason}"
                 for where, reason in sorted(rejected.items()) if where in got and got[where] != reason]
    return problems[:most] + ([f"{side}: ... {len(problems) - most} more"] if len(problems) > most else [])


def read_expected(settings: Settings) -> tuple[dict[str, bytes], dict[Coords, str]]:
    from streamops.kafka import read_topic

    return expected_of(((m.topic(), m.partition(), m.offset()), m.value())
                       for m in read_topic(settings.kafka_bootstrap, c.INPUT_TOPIC))


def check_side(settings: Settings, side: str, output_topic: str, dlq_topic: str,
               expected: tuple[dict[str, bytes], dict[Coords, str]]) -> str:
    """Raises SystemExit on a difference; else a summary (profiles, DLQ records by reason)."""
    from streamops.kafka import latest_per_key, read_topic
    from streamops.spark.query.records import dlq_entry

    output = latest_per_key(settings.kafka_bootstrap, output_topic, decode=bytes)
    dlq = [dlq_entry(m.headers()) for m in read_topic(settings.kafka_bootstrap, dlq_topic)]
    problems = output_problems(side, *expected, output, dlq)
    if problems:
        raise SystemExit("\n".join(problems))
    reasons = Counter(reason for _, reason in dlq)
    return f"{len(output):,} profiles, DLQ " + ", ".join(f"{r} {reasons[r]}" for r in c.REASONS if reasons[r])


# -- the tables --------------------------------------------------------------------------------------------------
KSTREAMS_RATE = "kstreams, first to last record"


def rate_rows(rates: Mapping[str, list[float]]) -> list[list[str]]:
    """records/s rows: min/median/max and the median's ratio to the peer's (first to last record)."""
    base = statistics.median(rates[KSTREAMS_RATE]) if rates.get(KSTREAMS_RATE) else None
    rows = []
    for name, values in rates.items():
        if not values:
            continue
        lo, med, hi = summary(values)
        rows.append([name, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}", f"{med / base:.2f}" if base else "-"])
    return rows


def latency_rows(lat: Mapping[str, dict]) -> list[list[str]]:
    base = lat.get("kstreams")
    return [[side, f"{r['p50']:.3f}", f"{r['p90']:.3f}", f"{r['max']:.3f}", str(r["probes"]), str(r["lost"]),
             f"{r['p50'] / base['p50']:.2f}" if base else "-"] for side, r in lat.items()]


# -- the runs --------------------------------------------------------------------------------------------------
def throughput_run(settings: Settings, jar: Path, run: int, args: argparse.Namespace,
                   rates: dict[str, list[float]]) -> None:
    produce_input(settings, args.events, args.users, args.partitions, seed=run)
    ensure_peer_topics(settings, args.partitions)
    expected = read_expected(settings)
    for side in (("kstreams", "streamops") if run % 2 == 0 else ("streamops", "kstreams")):
        if side == "kstreams":
            r = run_peer(settings, jar, args.events, f"kstreams-peer-{run}")
            rates[KSTREAMS_RATE].append(r["records_per_s"])
            rates["kstreams, wall (incl. JVM start and close)"].append(r["wall_rate"])
            note = check_side(settings, side, PEER_OUTPUT, PEER_DLQ, expected)
            print(f"run {run + 1}: kstreams {r['records_per_s']:,.0f} rec/s (wall {r['wall_rate']:,.0f}; "
                  f"{r['rekeyed']} rekeyed, close {r['close_ms']:,.0f} ms); {note}", flush=True)
        else:
            r = run_spark(settings, args.events, args.batch, args.master)
            rates["streamops, all batches"].append(r["rate"])
            rates["streamops, steady (batches 2..n)"].append(r["steady_rate"])
            rates["streamops, wall (incl. driver start)"].append(r["wall_rate"])
            spec = get_app(load_specs(default_spec_path(REPO)), c.APP)
            note = check_side(settings, side, spec.live_output_topic, spec.dlq_topic, expected)
            print(f"run {run + 1}: streamops {r['rate']:,.0f} rec/s (steady {r['steady_rate']:,.0f}, wall "
                  f"{r['wall_rate']:,.0f}; {r['batches']} batches); {note}", flush=True)


def measure_peer(settings: Settings, jar: Path, args: argparse.Namespace) -> dict:
    ensure_peer_topics(settings, args.partitions)
    log = settings.state_dir / "kstreams-peer-latency.log"

    def start() -> subprocess.Popen:
        with open(log, "wb") as err:
            return subprocess.Popen(peer_java(jar) + peer_args(settings.kafka_bootstrap, "kstreams-peer-latency",
                                                               settings.state_dir / "kstreams-peer-latency", 0, 0),
                                    stdout=err, stderr=subprocess.STDOUT)

    def ready(_proc: subprocess.Popen) -> bool:
        return log.exists() and b"first_record_ms" in log.read_bytes()

    return probe_latency(settings.kafka_bootstrap, PEER_OUTPUT, args.rate, args.latency_seconds, args.warmup,
                         start=start, ready=ready, log=log, what="the Kafka Streams peer")


def main() -> None:
    from bench.latency import measure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100_000, help="streamops' records per micro-batch")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rate", type=int, default=5_000, help="the latency part's load, events/s")
    ap.add_argument("--latency-seconds", type=float, default=30, help="0 skips the latency part")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--validation-only", action="store_true", help="only the peer's validation check")
    args = ap.parse_args()

    jar = build_peer()
    n = check_validation(jar)
    print(f"the peer's validation equals fold.validate on {n:,} values", flush=True)
    if args.validation_only:
        return
    rates: dict[str, list[float]] = {KSTREAMS_RATE: [], "kstreams, wall (incl. JVM start and close)": [],
                                     "streamops, all batches": [], "streamops, steady (batches 2..n)": [],
                                     "streamops, wall (incl. driver start)": []}
    lat: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="streamops-bench-kstreams-") as tmp:
        for run in range(args.runs):
            settings = isolated_settings(Path(tmp) / f"run-{run}")
            try:
                manager.up(settings, only=["kafka"])
                throughput_run(settings, jar, run, args, rates)
            finally:
                manager.down(settings)
                shutil.rmtree(settings.state_dir, ignore_errors=True)
        if args.latency_seconds > 0:
            for side in ("kstreams", "streamops"):
                settings = isolated_settings(Path(tmp) / f"latency-{side}")
                try:
                    manager.up(settings, only=["kafka"])
                    lat[side] = (measure_peer(settings, jar, args) if side == "kstreams" else
                                 measure(settings, args.rate, args.latency_seconds, args.warmup, args.master, None))
                finally:
                    manager.down(settings)
                    shutil.rmtree(settings.state_dir, ignore_errors=True)
                r = lat[side]
                print(f"latency {side}: p50 {r['p50']:.3f}s p90 {r['p90']:.3f}s max {r['max']:.3f}s "
                      f"({r['probes']} probes, {r['lost']} lost)", flush=True)

    print(f"\n{args.events:,} events, {args.partitions} partitions, {args.users:,} users, {args.runs} runs; "
          f"streamops {args.batch:,} per batch, master {args.master}; kstreams exactly_once_v2, 2 threads, "
          f"RocksDB, caching off\n")
    print(table(["records/s", "min", "median", "max", "ratio to kstreams (median)"], rate_rows(rates)))
    if lat:
        print(f"\nlatency at {args.rate:,} events/s for {args.latency_seconds:.0f} s after {args.warmup:.0f} s "
              f"warm-up (produce -> visible read_committed in the output)\n")
        print(table(["side", "p50 s", "p90 s", "max s", "probes", "lost", "p50 ratio to kstreams"], latency_rows(lat)))


if __name__ == "__main__":
    main()
