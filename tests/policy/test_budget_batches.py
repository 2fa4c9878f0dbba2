"""The one greedy token-budget batcher (hpd.policy.batching): the sum, padded and shared-prefix sizes, the row cap,
and an item over the budget on its own."""

from hpd.policy.batching import budget_batches


def test_sum_of_sizes_within_the_budget_in_order():
    assert budget_batches([3, 4, 2, 5, 1], 7) == [[0, 1], [2, 3], [4]]
    assert budget_batches([9, 1, 1], 5) == [[0], [1, 2]]      # over the budget alone: a batch of its own
    assert budget_batches([], 5) == []
    assert budget_batches([5, 5, 5], None) == [[0, 1, 2]]    # no budget


def test_padded_size_is_rows_times_the_longest():
    assert budget_batches([2, 3, 3, 1], 9, padded=True) == [[0, 1, 2], [3]]    # 3 rows x 3 = 9
    assert budget_batches([4, 3, 2, 1], 8, padded=True) == [[0, 1], [2, 3]]    # 2 x 4; then 2 x 2
    assert budget_batches([1, 5], 6, padded=True) == [[0], [1]]                # 2 x 5 > 6


def test_shared_prefix_is_counted_once_within_a_batch():
    # sizes 10, 10, 10 sharing 8 with the one before: 10 + 2 + 2 = 14 <= 14
    assert budget_batches([10, 10, 10], 14, shared=[0, 8, 8]) == [[0, 1, 2]]
    # a new batch computes its first item whole
    assert budget_batches([10, 10, 10], 12, shared=[0, 8, 8]) == [[0, 1], [2]]


def test_row_cap():
    assert budget_batches([1] * 5, None, max_rows=2) == [[0, 1], [2, 3], [4]]
    assert budget_batches([1] * 5, 100, padded=True, max_rows=4) == [[0, 1, 2, 3], [4]]
