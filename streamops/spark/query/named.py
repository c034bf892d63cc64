"""Named state on the executors (``streamops.named_state``): a key's state in
``transformWithStateInPandas``' state variables (``NamedStore``) and the ``StatefulProcessor``
that runs ``worker.update_key``/``worker.timed_key`` over it (``named_processor``). Apart from
``worker`` because it is the one part of the update shape that talks to Spark's state server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from streamops.job import Job
from streamops.spark.query.worker import ROW_FIELDS, _frame, _group_columns, timed_key, update_key


class NamedStore:
    """A key's named state (``streamops.named_state``) in ``transformWithStateInPandas``'s state
    variables: loaded whole, written part by part (``named_state.changes``), with one changelog
    row per changed part and at most one registered timer, the next one."""

    def __init__(self, job_cls: type[Job], variables: dict[str, Any], handle, watermark_ms: int) -> None:
        self.values = job_cls.state_values or {}
        self.vars, self.handle, self.wm = variables, handle, watermark_ms
        self.loaded: dict[str, Any] | None = None

    def load(self) -> dict[str, Any] | None:
        from streamops import named_state as ns

        state: dict[str, Any] = {}
        for name, kind in self.values.items():
            var = self.vars[name]
            if isinstance(kind, ns.Value):
                got = var.get()
                state[name] = None if got is None else json.loads(got[0])
            elif isinstance(kind, ns.ListOf):
                state[name] = [json.loads(v[0]) for v in var.get()]
            else:
                state[name] = {k[0]: json.loads(v[0]) for k, v in var.iterator()}
        self.loaded = None if ns.is_empty(self.values, state) else state
        # the job may change what it is handed in place: keep a copy to diff against
        return None if self.loaded is None else json.loads(json.dumps(self.loaded))

    def watermark(self) -> int:
        return self.wm

    def save(self, key: str, kept: Any, rows: list[tuple]) -> Any:
        from streamops import named_state as ns

        if kept is not None:
            ns.check_shape(self.values, key, kept)
            if ns.is_empty(self.values, kept):
                kept = None
        done = ns.changes(self.values, self.loaded, kept)
        dumps = ns._dumps
        for c in done:
            var = self.vars[c.name]
            if c.op == "put":
                var.updateValue((c.entry,), (dumps(c.value),))
            elif c.op == "remove":
                var.removeKey((c.entry,))
            elif c.op == "clear":
                var.clear()
            elif c.op == "append":
                var.appendList([(dumps(v),) for v in c.value])
            elif isinstance(self.values[c.name], ns.ListOf):
                var.put([(dumps(v),) for v in c.value])
            else:
                var.update((dumps(c.value),))
        for ckey, value in ns.changelog_records(self.values, key, kept, done):
            rows.append(("changelog", ckey, value))
        self.loaded = kept
        return kept

    def set_timer(self, ts: int | None, wm: int | None) -> None:
        """Spark fires a timer once its watermark reaches it (expiry <= watermark)."""
        have = list(self.handle.listTimers())
        for t in have:
            if t != ts:
                self.handle.deleteTimer(t)
        if ts is not None and ts not in have:
            self.handle.registerTimer(ts)


def named_processor(job_cls: type[Job], *, seed: bool = False):
    """The ``StatefulProcessor`` of a job with named state: ``update_key``/``timed_key`` over a
    ``NamedStore``; with ``seed``, it writes each key's state from a seed row (``seed_ddl``)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from streamops import named_state as ns
    from streamops import stream_time

    values, timed = job_cls.state_values or {}, job_cls.has_time()

    class Processor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.vars: dict[str, Any] = {}
            for name, kind in values.items():
                if isinstance(kind, ns.Value):
                    self.vars[name] = handle.getValueState(name, "json string")
                elif isinstance(kind, ns.ListOf):
                    self.vars[name] = handle.getListState(name, "json string")
                else:
                    self.vars[name] = handle.getMapState(name, "entry string", "json string")

        def _store(self, timer_values) -> NamedStore:
            return NamedStore(job_cls, self.vars, self.handle, timer_values.getCurrentWatermarkInMs())

        def handleInputRows(self, key, rows, timerValues) -> Iterator:
            k, lane = key[0], int(key[1])
            store = self._store(timerValues)
            if seed:
                job = job_cls()
                for pdf in rows:
                    for blob in pdf["blob"]:
                        store.load()
                        kept = store.save(k, json.loads(blob), [])
                        if timed and job_cls.has_timers():
                            store.set_timer(None if kept is None else stream_time.next_timer(job, k, kept), None)
                yield _frame([])
                return
            if timed:
                out = timed_key(job_cls, k, lane, _group_columns(rows), store)
            else:
                out = update_key(job_cls, k, lane, _group_columns(rows), store)
            yield _frame(out)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
            empty = {n: [] for n in ROW_FIELDS}
            yield _frame(timed_key(job_cls, key[0], int(key[1]), empty, self._store(timerValues)))

        def close(self) -> None:
            pass

    return Processor()
