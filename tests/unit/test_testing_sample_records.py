"""``streamops.testing.sample_records`` for a job that reads several topics: each generated record on
its own topic, keyed and partitioned as ``streamops produce`` places it; the one-topic call as before;
a record for a topic it was not given is refused with a message that is true."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from jobs.enriched_orders import ORDERS, PRICES, EnrichedOrders, generate
from jobs.user_activity import UserActivity
from streamops.job import Job, JobDeclarationError, Record
from streamops.kafka.produce import default_partition
from streamops.spec import default_spec_path, get_app, load_specs
from streamops.testing import assert_job_sound, sample_records
from tests.fixtures.job_repo import REPO


def _placed_as_produce_places(records: Sequence[Record], partitions: int) -> None:
    """Keyed records where murmur2 puts their key, keyless ones round-robin per topic; offsets count
    per (topic, partition) from 0."""
    nxt: dict[tuple[str, int], int] = {}
    keyless: dict[str, int] = {}
    for r in records:
        if r.key is None:
            assert r.partition == keyless.get(r.topic, 0) % partitions, r
            keyless[r.topic] = keyless.get(r.topic, 0) + 1
        else:
            assert r.partition == default_partition(r.key, partitions), r
        assert r.offset == nxt.get((r.topic, r.partition), 0), r
        nxt[(r.topic, r.partition)] = r.offset + 1


def test_a_two_topic_job_gets_each_record_on_its_own_topic() -> None:
    records = sample_records(EnrichedOrders, topics=(ORDERS, PRICES), events=600, seed=3)
    assert [(r.topic, r.key, r.value) for r in records] == list(generate(600, seed=3))
    by_topic = {t: sum(r.topic == t for r in records) for t in (ORDERS, PRICES)}
    assert by_topic[ORDERS] > 300 and by_topic[PRICES] > 60, by_topic
    assert {r.partition for r in records} == {0, 1, 2, 3}
    _placed_as_produce_places(records, 4)
    assert assert_job_sound(EnrichedOrders, records).ok


def test_an_app_gives_its_input_topics_and_partitions() -> None:
    spec = get_app(load_specs(default_spec_path(REPO)), "enriched_orders")
    assert tuple(spec.input_topics) == (ORDERS, PRICES) and spec.input_partitions == 3
    records = sample_records(EnrichedOrders, app="enriched_orders", events=600, seed=3)
    assert records == sample_records(EnrichedOrders, topics=(ORDERS, PRICES), partitions=3, events=600, seed=3)
    assert records == sample_records(EnrichedOrders, app=spec, events=600, seed=3)
    _placed_as_produce_places(records, 3)


class PairsAndTriples(Job):
    """``generate`` mixes ``(key, value)`` pairs (the first topic's) and ``(topic, key, value)``."""

    def parse(self, record: Record):
        return {"k": json.loads(record.value)["k"], "topic": record.topic}

    def key(self, event) -> str:
        return event["k"]

    def initial(self, key: str):
        return {}

    def update(self, key: str, state, events):
        out = dict(state)
        for e in events:
            out[e["topic"]] = out.get(e["topic"], 0) + 1
        return out

    def generate(self, events: int, seed: int):
        for i in range(events):
            value = json.dumps({"k": f"k{i % 7}"}).encode()
            yield (f"k{i % 7}".encode(), value) if i % 3 else ("prices", f"k{i % 7}".encode(), value)


def test_pairs_go_to_the_first_topic_given_and_triples_to_theirs() -> None:
    records = sample_records(PairsAndTriples, topics=("orders", "prices"), partitions=5, events=30)
    assert [r.topic for r in records] == ["prices" if i % 3 == 0 else "orders" for i in range(30)]
    _placed_as_produce_places(records, 5)
    assert assert_job_sound(PairsAndTriples, records).ok


def test_the_one_topic_call_is_unchanged() -> None:
    records = sample_records(UserActivity, events=300, seed=1)
    pairs = list(UserActivity().generate(300, 1))
    assert [(r.topic, r.key, r.value) for r in records] == [("input", k, v) for k, v in pairs]
    _placed_as_produce_places(records, 4)
    assert records == sample_records(UserActivity, topics=("input",), events=300, seed=1)
    assert sample_records(UserActivity, topic="user-events", partitions=6, events=50) == \
        sample_records(UserActivity, topics=["user-events"], partitions=6, events=50)


def test_a_record_for_a_topic_not_given_names_the_topics_truly() -> None:
    with pytest.raises(JobDeclarationError) as caught:
        sample_records(EnrichedOrders)  # the one-topic call on a two-topic job
    text = str(caught.value)
    assert text.startswith("EnrichedOrders.generate() record 0 is for topic 'product-prices', which is not among "
                           "the topics sample_records was given (topic='input'); app enriched_orders reads "
                           "orders-placed, product-prices: pass topics=(...)"), text
    assert "the app does not read" not in text  # no app was named: it would be false
    with pytest.raises(JobDeclarationError, match=r"record 0 is for topic 'product-prices', which is not among the "
                                                  r"topics sample_records was given \(topics=\('orders-placed',\)\)"):
        sample_records(EnrichedOrders, topics=(ORDERS,))
    spec = get_app(load_specs(default_spec_path(REPO)), "enriched_orders").model_copy(update={"input_topics": (ORDERS,)})
    with pytest.raises(JobDeclarationError, match=r"record 0 is for topic 'product-prices', which app enriched_orders "
                                                  r"does not read \(its input topics: orders-placed\)$"):
        sample_records(EnrichedOrders, app=spec)


def test_topic_topics_and_app_are_one_choice() -> None:
    with pytest.raises(TypeError, match="give one of topic, topics and app"):
        sample_records(EnrichedOrders, topics=(ORDERS, PRICES), app="enriched_orders")
    with pytest.raises(TypeError, match="give one of topic, topics and app"):
        sample_records(UserActivity, topic="a", topics=("b",))
