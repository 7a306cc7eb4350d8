"""Batch sizing without Kafka or Spark: the limit a task's next batch gets from the batches before
it (``BatchSizer``), and the share each partition gives to a sink batch (``share_records``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sluiceway.connect.batch_config import BatchLimits
from sluiceway_executor.pipelines.batch_sizing import BatchSizer, share_records


def test_a_first_batch_takes_up_to_the_record_ceiling() -> None:
    assert BatchSizer(BatchLimits(max_records=1000)).next_limit() == 1000


def test_a_batch_that_took_too_long_shrinks_the_next_in_proportion() -> None:
    sizer = BatchSizer(BatchLimits(max_records=1_000_000, duration_ms=5000))
    sizer.observe(1_000_000, 1_000_000, 10.0)
    assert sizer.next_limit() == 500_000
    # Unknown record counts (a DataFrame-level source) shrink from the limit the batch had...
    sizer.observe(500_000, None, 20.0)
    assert sizer.next_limit() == 125_000
    # ...and grow back from it once batches are quick again (the Spark session warmed up).
    sizer.observe(125_000, None, 1.0)
    assert sizer.next_limit() == 625_000


def test_a_full_batch_that_was_quick_lets_the_next_grow_up_to_the_ceiling() -> None:
    sizer = BatchSizer(BatchLimits(max_records=1_000_000, duration_ms=5000))
    sizer.observe(1_000_000, 1_000_000, 10.0)
    sizer.observe(500_000, 500_000, 4.0)
    assert sizer.next_limit() == 625_000
    sizer.observe(625_000, 625_000, 1.0)
    assert sizer.next_limit() == 1_000_000


def test_a_batch_well_under_its_limit_leaves_the_limit_however_long_it_took() -> None:
    sizer = BatchSizer(BatchLimits(max_records=1_000_000, duration_ms=5000))
    sizer.observe(1_000_000, 1_000_000, 10.0)
    sizer.observe(500_000, 20, 0.3)
    assert sizer.next_limit() == 500_000
    # A first batch of a few records on a cold Spark session: slow, but not for its records.
    sizer.observe(500_000, 7000, 7.5)
    assert sizer.next_limit() == 500_000
    sizer.observe(500_000, 250_000, 10.0)  # half the limit: it counts
    assert sizer.next_limit() == 125_000


def test_the_byte_bound_follows_the_record_sizes_seen() -> None:
    sizer = BatchSizer(BatchLimits(max_records=1_000_000, max_bytes=100_000))
    sizer.observe_sizes(0, 0)  # nothing seen: no estimate yet
    assert sizer.record_bytes is None and sizer.next_limit() == 1_000_000
    sizer.observe_sizes(10, 1000)
    assert sizer.next_limit() == 1000
    sizer.observe_sizes(10, 3000)  # an average of the estimates: 200 bytes a record
    assert sizer.record_bytes == 200 and sizer.next_limit() == 500
    tiny = BatchSizer(BatchLimits(max_bytes=1))
    tiny.observe_sizes(1, 10_000)
    assert tiny.next_limit() == 1  # never below one record


def test_shares_take_everything_that_fits() -> None:
    assert share_records({("t", 0): 3, ("t", 1): 0, ("t", 2): 7}, 10) == {
        ("t", 0): 3,
        ("t", 1): 0,
        ("t", 2): 7,
    }


def test_shares_leave_no_small_remainder_behind() -> None:
    # An even split per partition (50,000 each) would leave one record of partition 1 for a batch
    # of its own; the shares give partition 0's unused allowance to partition 1.
    assert share_records({("t", 0): 49_999, ("t", 1): 50_001}, 100_000) == {
        ("t", 0): 49_999,
        ("t", 1): 50_001,
    }
    assert share_records({("t", 0): 10, ("t", 1): 100, ("t", 2): 100}, 50) == {
        ("t", 0): 10,
        ("t", 1): 20,
        ("t", 2): 20,
    }
    assert share_records({("t", 0): 100, ("t", 1): 100, ("t", 2): 100}, 7) == {
        ("t", 0): 3,
        ("t", 1): 2,
        ("t", 2): 2,
    }


@given(
    st.dictionaries(st.tuples(st.just("t"), st.integers(0, 20)), st.integers(0, 10_000), max_size=12),
    st.integers(1, 50_000),
)
def test_shares_fill_the_limit_fairly(pending: dict[tuple[str, int], int], limit: int) -> None:
    shares = share_records(pending, limit)
    assert shares.keys() == pending.keys()
    assert sum(shares.values()) == min(sum(pending.values()), limit)
    assert all(0 <= shares[key] <= pending[key] for key in pending)
    # Fair: a partition that gave less than it had got no less than any other's share, but one.
    cut = [shares[key] for key in pending if shares[key] < pending[key]]
    if cut:
        assert max(shares.values()) - min(cut) <= 1
