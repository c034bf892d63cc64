"""``produce`` places keys as Kafka's default partitioner does: ``toPositive(murmur2(key)) % n``.

The reference below is Kafka's ``org.apache.kafka.common.utils.Utils.murmur2`` transcribed line by
line with Java's 32-bit int arithmetic (``i32`` wraps like Java's int, ``>>>`` is the unsigned shift),
independent of ``streamops.kafka.produce.murmur2``; the known vectors are Kafka's own
(``UtilsTest.testMurmur2``). The integration test (``tests/integration/kafka/test_produce.py``) checks the
broker's placement of records ``streamops produce`` sent against the same reference.
"""

from __future__ import annotations

import pytest

from streamops.kafka.produce import default_partition, murmur2
from streamops.state.lint import sample_records


def i32(x: int) -> int:
    """Java's int: the low 32 bits, two's complement."""
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x >= 0x80000000 else x


def ushr(x: int, n: int) -> int:
    """Java's ``x >>> n`` on an int."""
    return i32((x & 0xFFFFFFFF) >> n)


def java_murmur2(data: bytes) -> int:
    length = len(data)
    seed = i32(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = i32(seed ^ length)
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = i32((data[i4 + 0] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16)
                + ((data[i4 + 3] & 0xFF) << 24))
        k = i32(k * m)
        k = i32(k ^ ushr(k, r))
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    tail = length % 4  # Java's switch falls through 3 -> 2 -> 1
    if tail >= 3:
        h = i32(h ^ ((data[(length & ~3) + 2] & 0xFF) << 16))
    if tail >= 2:
        h = i32(h ^ ((data[(length & ~3) + 1] & 0xFF) << 8))
    if tail >= 1:
        h = i32(h ^ (data[length & ~3] & 0xFF))
        h = i32(h * m)
    h = i32(h ^ ushr(h, 13))
    h = i32(h * m)
    h = i32(h ^ ushr(h, 15))
    return h


def kafka_partition(key: bytes, partitions: int) -> int:
    """``BuiltInPartitioner.partitionForKey``: ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``."""
    return (java_murmur2(key) & 0x7FFFFFFF) % partitions


#: Kafka's UtilsTest.testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

#: ascii, unicode (UTF-8, 2-4 byte characters), empty, every tail length, long, high bytes
KEYS = [b"", b"a", b"ab", b"abc", b"abcd", b"u0042", b"user-1", b"/p007", b"c0199",
        "ü".encode(), "Zürich".encode(), "日本語のキー".encode(), "🙂 emoji".encode(), "ключ".encode(),
        bytes(range(256)), b"\xff\xfe\xfd", b"k" * 1000, ("long-" * 300).encode(), b"\x00", b"\x80\x80\x80\x80\x80"]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items(), ids=[k.decode() for k in KAFKA_VECTORS])
def test_murmur2_gives_kafkas_own_test_vectors(data: bytes, expected: int) -> None:
    assert java_murmur2(data) == expected  # the reference is right
    assert murmur2(data) == expected


@pytest.mark.parametrize("partitions", [1, 4, 6, 7, 12, 100])
def test_partitions_equal_the_reference_for_a_table_of_keys(partitions: int) -> None:
    for key in KEYS + list(KAFKA_VECTORS):
        assert murmur2(key) == java_murmur2(key), key
        assert default_partition(key, partitions) == kafka_partition(key, partitions), (key, partitions)


def test_known_partitions() -> None:
    """From Kafka's vectors by hand: toPositive(h) = h & 0x7fffffff, then % n."""
    assert default_partition(b"foobar", 4) == (-790332482 & 0x7FFFFFFF) % 4 == 2
    assert default_partition(b"21", 6) == (-973932308 & 0x7FFFFFFF) % 6 == 0
    assert default_partition(b"abc", 7) == 479470107 % 7 == 4


def test_zero_partitions_is_refused() -> None:
    with pytest.raises(ValueError):
        default_partition(b"a", 0)


def test_lint_samples_place_keys_like_produce() -> None:
    """``app lint`` spreads its sample as ``produce`` would: keys by murmur2, keyless round-robin."""
    from streamops.job import Job

    pairs = [(k, b"v") for k in KEYS] + [(None, b"x")] * 5
    records = sample_records(Job, "t", 7, pairs)
    for r in records[:len(KEYS)]:
        assert r.partition == kafka_partition(r.key, 7)
    assert [r.partition for r in records[len(KEYS):]] == [0, 1, 2, 3, 4]
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())
