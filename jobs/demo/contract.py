"""The ``user_activity`` event and profile contract, shared by the Spark job, the generator
and the plain-Python oracle so all three agree on what is valid and what a profile is.

Event (JSON value, Kafka key = user_id as UTF-8):
    {"user_id": str, "event_type": "login"|"purchase"|"view", "amount": number >= 0, "ts": int epoch ms}
Profile (state per user, changelog value and output value, JSON):
    {"user_id": str, "last_login_ts": int|null, "purchases": int, "total_amount": float (2 decimals),
     "events": int}
    last_login_ts = max ts over login events; purchases = number of purchase events;
    total_amount = sum of amount over purchase events, rounded to cents; events = all valid events.

A record is invalid for the FIRST reason that applies, checked in this order:
    invalid_json    value is not UTF-8 JSON (or is empty / null)
    not_an_object   JSON but not an object
    missing_user_id user_id absent, not a string, or empty
    bad_event_type  event_type absent or not one of EVENT_TYPES
    bad_amount      amount absent, not a number (booleans are not numbers), negative, not finite,
                    or above MAX_AMOUNT (so cents fit a 64-bit long in Spark)
    bad_ts          ts absent, not an integer (booleans are not), negative, or above MAX_TS
Invalid records go to the DLQ topic with the reason and their source in headers.
"""

from __future__ import annotations

from typing import Final

EVENT_TYPES: Final = ("login", "purchase", "view")
REASONS: Final = ("invalid_json", "not_an_object", "missing_user_id", "bad_event_type", "bad_amount", "bad_ts")

#: largest valid amount per event: 1e12 is 1e14 cents, so ~92k such purchases fit one user's
#: 64-bit cents total (Spark sums a long; Python's int would not overflow, Spark's would)
MAX_AMOUNT: Final = 1e12
#: largest valid ts (epoch ms): Spark's long
MAX_TS: Final = 2**63 - 1

APP: Final = "user_activity"
INPUT_TOPIC: Final = "user-events"
OUTPUT_TOPIC: Final = "user-profiles"
CHANGELOG_TOPIC: Final = "user_activity-profiles-changelog"
DLQ_TOPIC: Final = "user-events.dlq"

# the records' header names (the DLQ reason, the source position, the batch) are the platform's:
# ``streamops.app.topics``


def amount_cents(amount: float) -> int:
    """Amount as integer cents, rounded half up (sums of cents are exact and order-independent)."""
    from decimal import ROUND_HALF_UP, Decimal

    return int((Decimal(str(amount)) * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))
