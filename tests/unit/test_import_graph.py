"""Rules on the core's file-level import graph (function-level imports count: they are the ones
that creep in). Each failure names the offending import and the rule it breaks."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import streamops

ROOT = Path(streamops.__file__).parent
REPO = ROOT.parent


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, package: str) -> list[tuple[str, int]]:
    """(module named, line) for every import in the file, relative ones resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            found += [(f"{base}.{a.name}", node.lineno) for a in node.names] + [(base, node.lineno)]
    return found


def _resolve(name: str) -> str | None:
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


@cache
def graph() -> dict[str, dict[str, int]]:
    """module -> {project module it imports: first line}"""
    out: dict[str, dict[str, int]] = {}
    for mod, path in modules().items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges: dict[str, int] = {}
        for name, line in _imports(path, package):
            dst = _resolve(name) if name.startswith("streamops") else None
            if dst and dst != mod and not (path.name == "__init__.py" and dst.startswith(mod + ".")):
                edges.setdefault(dst, line)
        out[mod] = edges
    return out


def _where(mod: str, dst: str) -> str:
    return f"{modules()[mod].relative_to(REPO)}:{graph()[mod][dst]} imports {dst}"


def closure(start: str) -> dict[str, str]:
    """Every project module ``start`` reaches, with the one that imports it first."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        mod = todo.pop()
        for dst in graph()[mod]:
            if dst not in seen and dst != start:
                seen[dst] = mod
                todo.append(dst)
    return seen


def _chain(seen: dict[str, str], mod: str, start: str) -> str:
    chain = [mod]
    while chain[-1] != start:
        chain.append(seen[chain[-1]])
    return " <- ".join(chain)


def test_no_cycle_in_the_import_graph() -> None:
    """Rule: no two core modules import each other, directly or through others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph()[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append("; ".join(_where(a, b) for a in sorted(comp) for b in graph()[a] if b in comp))

    for v in graph():
        if v not in index:
            visit(v)
    assert not cycles, "import circles (rule: no cycle in the import graph):\n" + "\n".join(cycles)


def test_a_deploy_request_never_reaches_the_spark_runtime() -> None:
    """Rule: deploy, resize and stop requests (``lifecycle.operations``) are decided from app-wide
    facts (``streamops.app``); nothing they import, however indirectly, is Spark's runtime."""
    seen = closure("streamops.lifecycle.operations")
    bad = [_chain(seen, m, "streamops.lifecycle.operations") for m in seen if m.startswith("streamops.spark")]
    assert not bad, "a deploy request reaches the Spark runtime (rule: deploy never imports spark/):\n" + "\n".join(bad)


DRIVER = "streamops.spark.driver"


def _in_driver(name: str) -> bool:
    return name == DRIVER or name.startswith(DRIVER + ".")


def test_only_the_driver_enters_the_driver_package() -> None:
    """Rule: the Spark driver (``streamops/spark/driver/``) is a process the launcher starts by
    module name (``python -m streamops.spark.driver``); nothing outside the package imports it:
    no core module, plugin, DAG or job (tests and bench may, for its pure helpers)."""
    bad = [_where(m, d) for m in graph() if not _in_driver(m) for d in graph()[m] if _in_driver(d)]
    for folder in ("plugins", "dags", "jobs"):
        for path in sorted((REPO / folder).rglob("*.py")):
            bad += [f"{path.relative_to(REPO)}:{line} imports {name}" for name, line in _imports(path, "")
                    if _in_driver(name)]
    assert not bad, ("the driver package imported from outside it (rule: only the driver imports "
                     "streamops.spark.driver; start it with lifecycle.driver.job_argv):\n" + "\n".join(bad))


def _third_party(mod: str) -> set[str]:
    path = modules()[mod]
    return {name.split(".")[0] for name, _ in _imports(path, mod) if not name.startswith("streamops")}


def test_observe_loads_neither_pyspark_nor_pyarrow() -> None:
    """Rule: status, metrics, alerts and the DLQ digest run in the Airflow UI and the triggerer:
    nothing they import, however indirectly, loads pyspark or pyarrow."""
    bad = []
    for mod in [m for m in modules() if m.startswith("streamops.observe")]:
        seen = closure(mod)
        for m in [mod, *seen]:
            heavy = _third_party(m) & {"pyspark", "pyarrow"}
            if heavy:
                bad.append(f"{_chain(seen, m, mod) if m != mod else mod} imports {sorted(heavy)}")
    assert not bad, "observe/ loads pyspark or pyarrow (rule: observe imports neither):\n" + "\n".join(sorted(set(bad)))


def test_the_ledger_knows_nothing_of_operations_reset_or_airflow() -> None:
    """Rule: the ledger stores rows; it imports nothing from the operations, reset or the plugins."""
    bad = [_where(m, d) for m in graph() if m.startswith("streamops.ledger")
           for d in graph()[m] if d.startswith(("streamops.lifecycle", "streamops.ops", "streamops.reset"))]
    bad += [f"{modules()[m].relative_to(REPO)} imports {n}" for m in modules() if m.startswith("streamops.ledger")
            for n in _third_party(m) if n in ("airflow", "streamops_airflow")]
    assert not bad, "the ledger imports an operation or Airflow (rule: the ledger knows only storage):\n" + "\n".join(bad)


HEADER = re.compile(r"""["'](streamops\.(?:dlq|source|batch)[a-z_.]*)["']""")


def test_each_record_header_name_is_defined_once() -> None:
    """Rule: every header name a record carries is spelled in ``streamops/app/topics.py`` alone."""
    owner = ROOT / "app" / "topics.py"
    bad = []
    for path in sorted([*ROOT.rglob("*.py"), *(REPO / "jobs").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]):
        if path == owner:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for name in HEADER.findall(line):
                bad.append(f"{path.relative_to(REPO)}:{n} spells {name!r}")
    assert not bad, "header names spelled outside streamops/app/topics.py (rule: one definition):\n" + "\n".join(bad)


#: what a job may import from streamops: the job API (docs/writing-a-job.md); the rest is internal
PUBLIC_JOB_API = ("streamops.job", "streamops.arrow", "streamops.windows", "streamops.joins",
                  "streamops.named_state", "streamops.stream_time", "streamops.testing")


def _streamops_modules(path: Path) -> list[tuple[str, int]]:
    """(streamops module named, line) for every import of streamops in a file outside the core."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "streamops"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "streamops":
            if node.module == "streamops":  # from streamops import job
                found += [(f"streamops.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((node.module, node.lineno))
    return found


def test_jobs_import_only_the_public_job_api() -> None:
    """Rule: a job (every file under ``jobs/``) imports from streamops only the public job API, never
    the runtime (``streamops.spark`` and the rest), which may change under it."""
    bad = [f"{path.relative_to(REPO)}:{line} imports {name}"
           for path in sorted((REPO / "jobs").rglob("*.py")) for name, line in _streamops_modules(path)
           if ".".join(name.split(".")[:2]) not in PUBLIC_JOB_API]
    assert not bad, (f"a job imports streamops beyond the job API (rule: jobs import only {', '.join(PUBLIC_JOB_API)}):\n"
                     + "\n".join(bad))


def test_no_global_statement_and_no_contextvar_outside_the_app_context() -> None:
    """Rule: hidden shared state (a ``global`` statement, a ContextVar) lives in ``app/context.py``
    alone; everything else is handed its collaborators (the Kafka client configuration is a value,
    ``kafka.config.KafkaConfig``; who waits for an operation is the caller's, ``lifecycle.waits``)."""
    bad = []
    for path in sorted([*ROOT.rglob("*.py"), *(REPO / "plugins").rglob("*.py")]):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            found = isinstance(node, ast.Global) or (isinstance(node, ast.Name | ast.Attribute) and
                                                     getattr(node, "id", getattr(node, "attr", None)) == "ContextVar")
            if found and rel != "streamops/app/context.py":
                bad.append(f"{rel}:{node.lineno} {'global' if isinstance(node, ast.Global) else 'ContextVar'}")
    assert not bad, "shared state outside app/context.py (rule: no global, no ContextVar):\n" + "\n".join(bad)


#: where product code may read ``Settings.kafka_bootstrap`` (the address alone, not a client's config)
BOOTSTRAP_READERS = {
    "streamops/kafka/security.py": "kafka_config builds every client's KafkaConfig from it",
    "streamops/cli/platform.py": "`platform up` prints the address",
    "plugins/streamops_airflow/assets.py": "an asset's URI names the cluster (kafka://HOST:PORT/TOPIC)",
}


def test_kafka_clients_get_a_kafka_config_not_the_settings_address() -> None:
    """Rule (issue 38): a Kafka client is made with the ``KafkaConfig`` it is handed (the address and
    the app's or the platform's client properties together); ``settings.kafka_bootstrap`` is read
    only where one is built and where the address is needed as plain text (``BOOTSTRAP_READERS``)."""
    bad, unused = [], set(BOOTSTRAP_READERS)
    for path in sorted([*ROOT.rglob("*.py"), *(REPO / "plugins").rglob("*.py"), *(REPO / "dags").rglob("*.py")]):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "kafka_bootstrap":
                unused.discard(rel)
                if rel not in BOOTSTRAP_READERS:
                    bad.append(f"{rel}:{node.lineno} reads kafka_bootstrap")
    assert not bad, ("the settings' Kafka address read outside a KafkaConfig's builder (rule: pass the "
                     "KafkaConfig, kafka.security.kafka_config(settings, spec), and read kafka.bootstrap):\n"
                     + "\n".join(bad))
    assert not unused, f"no kafka_bootstrap read left in {sorted(unused)}: remove it from BOOTSTRAP_READERS"
