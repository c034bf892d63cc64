"""App ``enriched_orders``: each order joined with its product's price in force when the order was
placed (event time), the temporal join of a stream to a table.

Inputs, both keyed by SKU: ``orders`` (a stream, ``{"order_id", "sku", "qty", "ts"}``) and
``prices`` (a table, compacted by SKU: ``{"sku", "price_cents", "ts"}``). A key's orders and price
changes are processed in event-time order whatever batches Spark cuts (``streamops.joins``): at
equal times the price first, so an order placed the millisecond a price changed pays the new one.
An order before any price for its SKU is written with ``price_cents: null``. An order or price more
than ``GRACE_MS`` behind its partition's stream time is ``late`` (to the DLQ).

Output, one record per order (key ``order_id``): ``{"order_id", "sku", "qty", "ts", "price_cents",
"total_cents"}``. The state per SKU is the price in force plus the events of the grace period.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from streamops.job import Record, Reject, is_int, is_text, json_object
from streamops.joins import TableJoin

GRACE_MS = 30_000
MAX_TS = 2**53 - 1
ORDERS, PRICES = "orders-placed", "product-prices"

Event = dict[str, Any]


class EnrichedOrders(TableJoin):
    key_name = "sku"
    inputs = {ORDERS: "stream", PRICES: "table"}
    grace_ms = GRACE_MS

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("sku")):
            return Reject("missing_sku")
        if not is_int(obj.get("ts"), 2, MAX_TS):
            return Reject("bad_ts")
        if record.topic == PRICES:
            if not is_int(obj.get("price_cents"), 0, 10**9):
                return Reject("bad_price")
            return {"sku": obj["sku"], "price_cents": obj["price_cents"], "ts": obj["ts"]}
        if not is_text(obj.get("order_id")):
            return Reject("missing_order_id")
        if not is_int(obj.get("qty"), 1, 10_000):
            return Reject("bad_qty")
        return {"order_id": obj["order_id"], "sku": obj["sku"], "qty": obj["qty"], "ts": obj["ts"]}

    def key(self, event: Event) -> str:
        return event["sku"]

    def timestamp(self, event: Event) -> int:
        return event["ts"]

    def output_key(self, key: str, event: Event) -> str:
        return event["order_id"]

    def join(self, key: str, event: Event, table: Event | None) -> dict:
        price = None if table is None else table["price_cents"]
        return {"order_id": event["order_id"], "sku": key, "qty": event["qty"], "ts": event["ts"],
                "price_cents": price, "total_cents": None if price is None else price * event["qty"]}

    def generate(self, events: int, seed: int, *, bad_ratio: float = 0.01
                 ) -> Iterator[tuple[str, bytes | None, bytes]]:
        return generate(events, seed=seed, bad_ratio=bad_ratio)


START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def generate(events: int, *, seed: int = 0, skus: int = 60, step_ms: int = 500, price_ratio: float = 0.2,
             late_ratio: float = 0.01, bad_ratio: float = 0.01, quiet_ratio: float = 0.1
             ) -> Iterator[tuple[str, bytes | None, bytes]]:
    """``events`` records, ``(topic, sku, value)``: price changes (a ``price_ratio`` share, every SKU
    priced once at the start) and orders, event time advancing ``step_ms`` per record with up to
    ``GRACE_MS / 2`` of jitter (so orders and prices cross); a ``quiet_ratio`` share of SKUs get no
    order or price in the second half; a ``late_ratio`` share is minutes behind; a ``bad_ratio`` share
    is malformed."""
    rng = random.Random(seed)
    names = [f"sku{i:04d}" for i in range(skus)]
    quiet = set(rng.sample(names, min(skus - 1, int(skus * quiet_ratio))))
    made = 0
    for sku in names[: min(skus, events // 4)]:  # opening prices for a quarter of the sample at most
        yield PRICES, sku.encode(), _json({"sku": sku, "price_cents": 100 + int(rng.random() * 9900),
                                           "ts": START_MS})
        made += 1
    i = 0
    while made < events:
        i += 1
        sku = names[int(rng.random() ** 1.5 * skus)]
        if sku in quiet and made > events // 2:
            continue
        made += 1
        ts = START_MS + i * step_ms + int(rng.random() * GRACE_MS / 2)
        if rng.random() < late_ratio:
            ts -= 5 * 60_000
        r = rng.random()
        if r < bad_ratio:
            yield ORDERS, sku.encode(), [b"{", b"[]", _json({"sku": sku, "ts": ts, "qty": 0, "order_id": "x"}),
                                         _json({"sku": sku, "ts": ts})][i % 4]
        elif r < bad_ratio + price_ratio:
            yield PRICES, sku.encode(), _json({"sku": sku, "price_cents": 100 + int(rng.random() * 9900), "ts": ts})
        else:
            yield ORDERS, sku.encode(), _json({"order_id": f"o{seed}-{i}", "sku": sku,
                                               "qty": 1 + int(rng.random() * 5), "ts": ts})


def _json(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
