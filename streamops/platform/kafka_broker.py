"""The embedded Apache Kafka broker: one KRaft node that is broker and controller at once.

``platform up`` writes its ``server.properties`` from the settings, formats its storage on the
first start (what ``kafka-storage.sh format`` does) and runs ``kafka.Kafka`` from the pinned jars
(``host.jars``). Its data is under ``$STREAMOPS_HOME/kafka/data``; its log is the component's
(``logs/kafka.log``, configured by ``include/kafka/log4j2.xml``).
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

from streamops.exceptions import UsageError
from streamops.host import jars
from streamops.platform import kafka_auth
from streamops.platform.exceptions import KafkaStorageError, PlatformError
from streamops.settings import Settings

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
NODE_ID = 1
#: Kafka's command-line tools by the name of their shell script (kafka-<name>.sh)
TOOLS = {
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "configs": "kafka.admin.ConfigCommand",
    "storage": STORAGE_TOOL,
}
#: the option that hands each client tool its client properties (the platform's client security)
CONFIG_FLAGS = {name: "--command-config" for name in TOOLS if name not in ("storage", "console-consumer")}
CONFIG_FLAGS["console-consumer"] = "--consumer.config"


def broker_dir(settings: Settings) -> Path:
    return settings.state_dir / "kafka"


def data_dir(settings: Settings) -> Path:
    return broker_dir(settings) / "data"


def properties_path(settings: Settings) -> Path:
    return broker_dir(settings) / "server.properties"


def log4j_config(settings: Settings) -> Path:
    return settings.repo / "include" / "kafka" / "log4j2.xml"


def node_properties(host: str, node_id: int, port: int, controller_port: int, voters: dict[int, int],
                    log_dirs: Path, *, replicas: int = 1, insync: int = 1) -> dict[str, str]:
    """A KRaft node that is broker and controller on loopback-style ``host`` ports, sized for small
    data on two cores; ``voters`` maps each quorum member's node id to its controller port. One
    owner for the embedded broker (one node) and ``kafka_cluster``'s nodes."""
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{n}@{host}:{p}" for n, p in voters.items()),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dirs),
        "num.partitions": "1",
        # internal topics at the node count's replication, and few partitions (50 by default,
        # each with its files and its load at the first group or transaction)
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(insync),
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(insync),
    }
    if replicas > 1:
        props |= {"default.replication.factor": str(replicas), "min.insync.replicas": str(insync)}
    return props | {
        # a group's first member is not held back 3 s waiting for others
        "group.initial.rebalance.delay.ms": "0",
        # the log cleaner (compacted changelogs, commits topics) takes 128 MB of heap by default
        "log.cleaner.dedupe.buffer.size": str(16 * 2**20),
    }


def server_properties(settings: Settings) -> dict[str, str]:
    """The embedded broker: one node, replication factor 1 everywhere."""
    cport = settings.kafka_controller_port
    props = node_properties(settings.host, NODE_ID, settings.kafka_port, cport, {NODE_ID: cport}, data_dir(settings))
    if kafka_auth.secured(settings):  # the SASL_SSL listener (platform up --kafka-security sasl_ssl)
        props.update(kafka_auth.server_properties(settings))
    return props


def format_argv(settings: Settings, cluster: str, properties: Path) -> list[str]:
    """Kafka's storage tool formatting the log dirs ``properties`` names for cluster id ``cluster``
    (``kafka-storage.sh format``)."""
    return [java_binary(), "-Xmx256m", f"-Dlog4j2.configurationFile={log4j_config(settings)}",
            "-cp", str(jars.jars_dir() / jars.KAFKA_BROKER / "*"), STORAGE_TOOL, "format",
            f"--cluster-id={cluster}", "-c", str(properties)]


def write_config(settings: Settings) -> Path:
    path = properties_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# written by `streamops platform up` from the settings; edits are overwritten\n"
    text += "".join(f"{k}={v}\n" for k, v in server_properties(settings).items())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)  # a secured broker's own SCRAM password is in it
    tmp.replace(path)
    return path


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


def jvm_options(settings: Settings) -> list[str]:
    """Ours, then ``KAFKA_OPTS`` (as Kafka's ``kafka-run-class.sh`` appends it: a JMX agent,
    a JAAS file, class-data sharing), so an option given there wins."""
    heap = settings.kafka_heap
    return [f"-Xmx{heap}", f"-Xms{_quarter(heap)}",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j_config(settings)}", *shlex.split(os.environ.get("KAFKA_OPTS", ""))]


def _quarter(heap: str) -> str:
    n, unit = int(heap[:-1]), heap[-1].lower()
    mb = n * (1024 if unit == "g" else 1)
    return f"{max(32, mb // 4)}m"


def argv(settings: Settings, properties: Path | None = None) -> tuple[str, ...]:
    """The broker's command line (Kafka's own ``kafka-server-start.sh`` runs the same class) over
    ``properties`` (default: the embedded broker's file)."""
    return (java_binary(), *jvm_options(settings), "-cp", str(jars.jars_dir() / jars.KAFKA_BROKER / "*"),
            MAIN_CLASS, str(properties or properties_path(settings)))


def tool_argv(name: str, args: list[str]) -> list[str]:
    """A Kafka command-line tool (``kafka-NAME.sh``) from the pinned jars."""
    if name not in TOOLS:
        raise UsageError(f"unknown Kafka tool {name!r}; one of: {', '.join(sorted(TOOLS))}")
    jars.jars(jars.KAFKA_BROKER)
    quiet = Path(__file__).with_name("kafka_tools_log4j2.properties")
    return [java_binary(), "-Xmx256m", f"-Dlog4j2.configurationFile={quiet}",
            "-cp", str(jars.jars_dir() / jars.KAFKA_BROKER / "*"), TOOLS[name], *args]


def cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, base64url without padding (``kafka-storage.sh random-uuid``)."""
    while True:  # as Kafka's Uuid.randomUuid: never one that a command line would take for an option
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def read_meta(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def prepare_storage(settings: Settings, env: dict[str, str]) -> str:
    """Format the storage on the first start; check it on the others. Returns what was done."""
    data = data_dir(settings)
    if "," in str(data):  # Kafka splits log.dirs at commas: it would format other folders (one relative to the cwd)
        raise KafkaStorageError(f"{data}: the broker's storage path may not hold a comma (Kafka's log.dirs is a "
                                f"comma-separated list); choose a STREAMOPS_HOME without one")
    meta = data / "meta.properties"
    if meta.is_file():
        try:
            fields = read_meta(meta)
        except OSError as exc:
            raise KafkaStorageError(f"{meta} cannot be read ({exc}); {_storage_remedy(data)}") from None
        if fields.get("node.id") != str(NODE_ID) or not fields.get("cluster.id"):
            raise KafkaStorageError(f"{meta} is not a KRaft node {NODE_ID}'s (node.id={fields.get('node.id')}, "
                                    f"cluster.id={fields.get('cluster.id')}); {_storage_remedy(data)}")
        kafka_auth.check_formatted_with_users(settings, fields["cluster.id"], data)
        return "storage checked"
    if data.exists() and any(data.iterdir()):
        raise KafkaStorageError(f"{data} holds files but no meta.properties: a broker's storage cut short or "
                                f"damaged; {_storage_remedy(data)}")
    data.mkdir(parents=True, exist_ok=True)
    cid = cluster_id()
    cmd = format_argv(settings, cid, properties_path(settings))
    secured = kafka_auth.secured(settings)
    if secured:  # the SCRAM users of a secured broker exist from the start
        cmd += kafka_auth.scram_arguments(settings)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0 or not meta.is_file():
        shutil.rmtree(data, ignore_errors=True)  # nothing half-formatted is left
        out = kafka_auth.redact((r.stdout + r.stderr).strip()[-2000:], settings)
        raise PlatformError(f"formatting the Kafka storage in {data} failed (exit {r.returncode}):\n{out}")
    if secured:
        kafka_auth.users_marker(settings).write_text(cid)
    return "storage formatted" + (" with SCRAM users" if secured else "")


def _storage_remedy(data: Path) -> str:
    return (f"move {data} aside (its topics are then gone) or restore it from a copy, then run "
            f"`streamops platform up` again")
