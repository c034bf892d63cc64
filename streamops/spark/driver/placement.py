"""Where a running query's state stores live, and moving some onto new executors.

Spark's stateful tasks take their preferred executor from the state store coordinator (the
last executor that reported a store partition active). After a live scale-out every store is
on the old executors; instead of letting tasks land anywhere for a while (stores can bounce
between executors, each move a reload), the driver plans a sticky, balanced assignment — as
Kafka Streams' assignor does: a partition moves only off an executor above its share — and
records the moves in the coordinator, so the next batch runs those partitions on the new
executors and the rest stay where their stores are loaded.
"""

from __future__ import annotations

from typing import Any

#: stateful operators a query may have whose stores are placed (ids 0..N-1; absent ones cost nothing)
OPERATORS = 4


def balance(owners: dict[int, str | None], executors: list[str]) -> dict[int, str]:
    """Moves (partition -> executor) that leave every executor with its share of partitions
    (the first ``len(owners) % len(executors)`` executors in sorted order take one more)
    and move as few partitions as possible. Partitions on no live executor always move."""
    if not executors:
        return {}
    order = sorted(executors, key=lambda e: (len(e), e))
    base, extra = divmod(len(owners), len(order))
    quota = {e: base + (1 if i < extra else 0) for i, e in enumerate(order)}
    held: dict[str, list[int]] = {e: [] for e in order}
    loose: list[int] = []
    for part in sorted(owners):
        held.get(owners[part] or "", loose).append(part)
    # an executor keeps its lowest partitions up to its quota; the rest are free to move
    for e in order:
        while len(held[e]) > quota[e]:
            loose.append(held[e].pop())
    # the executors that hold the most keep their quota first: the remaining ones go to the
    # executors below quota, emptiest first
    moves: dict[int, str] = {}
    for part in sorted(loose):
        target = min((e for e in order if len(held[e]) < quota[e]), key=lambda e: (len(held[e]), order.index(e)))
        held[target].append(part)
        moves[part] = target
    return moves


def executor_host(spark: Any, eid: str) -> str:
    """The host executor ``eid`` runs on, as the task scheduler knows it."""
    host = spark.sparkContext._jsc.sc().taskScheduler().executorIdToHost().get(eid)
    return host.get() if host.isDefined() else "unknown"


class StatePlacement:
    """The coordinator side of a running query's state stores (py4j)."""

    def __init__(self, spark: Any, query: Any, partitions: int, operators: int = OPERATORS) -> None:
        self.spark = spark
        self.jvm = spark.sparkContext._jvm
        self.partitions = partitions
        self.operators = operators
        execution = query._jsq.streamingQuery()
        hpath = self.jvm.org.apache.hadoop.fs.Path
        self.root = hpath(hpath(execution.resolvedCheckpointRoot()), "state").toString()
        self.run_id = execution.runId()
        self.coordinator = spark._jsparkSession.streams().stateStoreCoordinator()

    def _provider(self, op: int, part: int) -> Any:
        state = self.jvm.org.apache.spark.sql.execution.streaming.state
        return state.StateStoreProviderId(state.StateStoreId(self.root, op, part, "default"), self.run_id)

    def owners(self) -> dict[int, str | None]:
        """Partition -> executor id its store (operator 0) is active on, None if nowhere yet."""
        out: dict[int, str | None] = {}
        for part in range(self.partitions):
            loc = self.coordinator.getLocation(self._provider(0, part))
            # an ExecutorCacheTaskLocation: "executor_<host>_<executor id>"
            out[part] = loc.get().rsplit("_", 1)[-1] if loc.isDefined() else None
        return out

    def place(self, moves: dict[int, str]) -> None:
        """Record executor ``moves[p]`` as the home of partition p's stores (every operator)."""
        none = self.jvm.org.apache.spark.api.python.PythonUtils.toSeq([])
        for part, eid in moves.items():
            host = executor_host(self.spark, eid)
            for op in range(self.operators):
                self.coordinator.reportActiveInstance(self._provider(op, part), host, eid, none)

    def rebalance(self, executors: list[str]) -> dict[int, str]:
        """Move stores onto ``executors`` as ``balance`` plans; returns the moves."""
        moves = balance(self.owners(), executors)
        self.place(moves)
        return moves
