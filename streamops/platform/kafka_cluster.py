"""A Kafka cluster of several KRaft nodes on loopback ports: the test topology of issue 41 (the
cluster fault tests start it; ``make cluster`` starts one for a person), which the platform then
uses as an external cluster (``STREAMOPS_BOOTSTRAP_SERVERS``).

Each node is broker and controller at once; the controller quorum is the nodes' static voter set,
so any one node may be lost. Internal topics (consumer offsets, transaction state) get three
replicas with two in sync, as the platform's own topics do on a cluster this size. The nodes run
the pinned broker jars (``host.jars``), with the embedded broker's JVM options.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamops.host import jars
from streamops.host.process import PidRecord, kill, read_pid, spawn, tail, terminate
from streamops.platform import kafka_broker
from streamops.platform.exceptions import ComponentStartError, PlatformError
from streamops.settings import Settings


@dataclass(frozen=True)
class Node:
    node_id: int
    port: int
    controller_port: int


@dataclass
class LocalKafkaCluster:
    """``nodes`` KRaft nodes under ``root`` (data, config, logs and pid files per node)."""

    root: Path
    nodes: list[Node]
    host: str = "127.0.0.1"
    heap: str = "384m"
    cluster_id: str = field(default_factory=kafka_broker.cluster_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.port}" for n in self.nodes)

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def _dir(self, node: Node) -> Path:
        return self.root / f"node-{node.node_id}"

    def properties(self, node: Node) -> dict[str, str]:
        props = kafka_broker.node_properties(
            self.host, node.node_id, node.port, node.controller_port,
            {n.node_id: n.controller_port for n in self.nodes}, self._dir(node) / "data",
            replicas=min(3, len(self.nodes)), insync=max(1, min(2, len(self.nodes) - 1)))
        # a killed node's partitions move to another leader within seconds, not the default 18 s
        return props | {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000"}

    def _argv(self, node: Node, settings_like: Settings) -> tuple[str, ...]:
        return kafka_broker.argv(settings_like.model_copy(update={"kafka_heap": self.heap}),
                                 self._dir(node) / "server.properties")

    def pid_path(self, node: Node) -> Path:
        return self._dir(node) / "node.pid"

    def log_path(self, node: Node) -> Path:
        return self._dir(node) / "node.log"

    def prepare(self, settings_like: Settings) -> None:
        """Write each node's properties and format its storage with the cluster's id (first start)."""
        jars.verify(jars.KAFKA_BROKER)
        for node in self.nodes:
            d = self._dir(node)
            d.mkdir(parents=True, exist_ok=True)
            path = d / "server.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in self.properties(node).items()))
            if (d / "data" / "meta.properties").is_file():
                continue
            r = subprocess.run(kafka_broker.format_argv(settings_like, self.cluster_id, path),
                               capture_output=True, text=True, timeout=120, check=False)
            if r.returncode != 0:
                raise PlatformError(f"formatting node {node.node_id} failed (exit {r.returncode}): "
                                    f"{(r.stdout + r.stderr)[-2000:]}")

    def start(self, settings_like: Settings, node_ids: list[int] | None = None, timeout: float = 120.0) -> None:
        """Start the nodes (all by default) that do not run; wait until the cluster sees them all."""
        self.prepare(settings_like)
        env = dict(os.environ)
        for node in self.nodes:
            if (node_ids is None or node.node_id in node_ids) and not self.running(node.node_id):
                spawn(self._argv(node, settings_like), env=env, log_path=self.log_path(node),
                      pid_path=self.pid_path(node), cwd=self._dir(node))
        self.wait_brokers(len([n for n in self.nodes if self.running(n.node_id)]), timeout)

    def running(self, node_id: int) -> bool:
        rec = read_pid(self.pid_path(self.node(node_id)))
        return rec is not None and rec.alive

    def _record(self, node_id: int) -> PidRecord | None:
        return read_pid(self.pid_path(self.node(node_id)))

    def crash(self, node_id: int) -> bool:
        """SIGKILL the node, as a crash or the OOM killer would."""
        rec = self._record(node_id)
        return rec is not None and kill(rec)

    def stop(self, node_id: int | None = None, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown: its leaderships moved first), then SIGKILL after ``timeout``."""
        for node in self.nodes:
            if node_id is None or node.node_id == node_id:
                rec = read_pid(self.pid_path(node))
                if rec is not None:
                    terminate(rec, timeout=timeout)
                    self.pid_path(node).unlink(missing_ok=True)

    def wait_brokers(self, count: int, timeout: float = 120.0) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for node in self.nodes:
                rec = read_pid(self.pid_path(node))
                if rec is not None and not rec.alive:
                    raise ComponentStartError(f"kafka node {node.node_id} exited. Last lines of "
                                              f"{self.log_path(node)}:\n{tail(self.log_path(node))}")
            try:
                md = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=3)
                seen = len(md.brokers)
                if seen >= count:
                    return
            except Exception:  # noqa: BLE001 - not up yet: asked again
                seen = 0
            time.sleep(0.5)
        raise ComponentStartError(f"the Kafka cluster at {self.bootstrap} showed {seen} of {count} brokers "
                                  f"after {timeout:.0f}s")

    def group_coordinator(self, group: str) -> int:
        """The node that coordinates consumer group ``group`` now (where a transaction's
        ``send_offsets_to_transaction`` goes)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15).coordinator.id

    def leader(self, topic: str, partition: int) -> int:
        """The node that leads ``topic``'s ``partition`` now."""
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(topic, timeout=10)
        return md.topics[topic].partitions[partition].leader


def main(argv: list[str] | None = None) -> int:
    """``make cluster``: ``up`` starts three nodes under ``$STREAMOPS_HOME/kafka-cluster`` on loopback
    ports from ``--base-port`` (each node a client and a controller port) and says how to point the
    platform at them; ``down`` stops them."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m streamops.platform.kafka_cluster", description=main.__doc__)
    ap.add_argument("action", choices=("up", "down"))
    ap.add_argument("--base-port", type=int, default=19092, help="node N listens on BASE+2(N-1), its controller on +1")
    ap.add_argument("--nodes", type=int, default=3, choices=range(1, 10), metavar="N")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    root = settings.state_dir / "kafka-cluster"
    nodes = [Node(i, args.base_port + 2 * (i - 1), args.base_port + 2 * (i - 1) + 1) for i in range(1, args.nodes + 1)]
    id_file = root / "cluster.id"
    cluster = LocalKafkaCluster(root, nodes, **({"cluster_id": id_file.read_text().strip()} if id_file.exists() else {}))
    if args.action == "down":
        cluster.stop()
        print(f"stopped the Kafka cluster under {root}")
        return 0
    root.mkdir(parents=True, exist_ok=True)
    id_file.write_text(cluster.cluster_id)
    cluster.start(settings)
    print(f"Kafka cluster of {len(nodes)} KRaft nodes up at {cluster.bootstrap} (data and logs under {root})\n"
          f"point the platform at it:  streamops platform up --external kafka={cluster.bootstrap}\n"
          f"stop it:                   make cluster-down")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
