"""The AOPC bounds of Normalized AOPC (itermask.core.aopc_bounds): hand-computed cases, every ordering
enumerated on small random tables, the beam search, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from itermask.core.aopc_bounds import (
    EXACT_LIMIT,
    TableOutputs,
    aopc_bounds,
    authors_weights,
    beam_bounds,
    exact_aopc_bounds,
    exact_bounds,
    naopc,
)


def _value(table, order, weights):
    subset, total = 0, 0.0
    for k, feature in enumerate(order, 1):
        subset |= 1 << feature
        total += weights[k] * (table[0] - table[subset])
    return total


def _every_ordering(table, weights):
    n = len(table).bit_length() - 1
    values = {order: _value(table, order, weights) for order in itertools.permutations(range(n))}
    return max(values.values()), min(values.values())


def test_two_features_by_hand():
    # drops: {0}: 0.4, {1}: 0.1, {0, 1}: 0.7; orders (0, 1): (0.4 + 0.7) / 2, (1, 0): (0.1 + 0.7) / 2
    bounds = exact_aopc_bounds([0.9, 0.5, 0.8, 0.2])
    assert bounds.upper == pytest.approx(0.55) and bounds.upper_order == (0, 1)
    assert bounds.lower == pytest.approx(0.40) and bounds.lower_order == (1, 0)


def test_one_feature_has_equal_bounds():
    bounds = exact_aopc_bounds([0.7, 0.3])
    assert bounds.upper == bounds.lower == pytest.approx(0.4)
    assert np.isnan(naopc(0.4, bounds.upper, bounds.lower))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("weighted", [False, True])
def test_exact_bounds_equal_every_ordering_enumerated(n, weighted):
    rng = np.random.default_rng(n)
    for _ in range(4):
        table = rng.random(1 << n)
        weights = np.r_[0.0, rng.random(n)] if weighted else authors_weights(n)
        bounds = exact_aopc_bounds(table, weights if weighted else None)
        upper, lower = _every_ordering(table, weights)
        assert bounds.upper == pytest.approx(upper, abs=1e-12)
        assert bounds.lower == pytest.approx(lower, abs=1e-12)
        # the orderings returned reach the bounds
        assert _value(table, bounds.upper_order, weights) == pytest.approx(upper, abs=1e-12)
        assert _value(table, bounds.lower_order, weights) == pytest.approx(lower, abs=1e-12)


def test_exact_bounds_ask_for_every_subset_of_every_example_in_one_call():
    rng = np.random.default_rng(0)
    sizes = [3, 1, 5]
    tables = [rng.random(1 << n) for n in sizes]
    outputs = TableOutputs(tables)
    found = exact_bounds(outputs, sizes)
    assert outputs.calls == 1
    assert [b.upper for b in found] == [exact_aopc_bounds(t).upper for t in tables]


def test_beam_of_width_one_is_greedy():
    # greedy descending: first the largest single drop ({1}: 0.5), then {0, 1} (drop 0.6) vs {1, 2} (0.9): {1, 2}
    table = np.zeros(8)
    clean = 1.0
    table[:] = clean
    drops = {0b001: 0.3, 0b010: 0.5, 0b100: 0.4, 0b011: 0.6, 0b110: 0.9, 0b101: 0.95, 0b111: 1.0}
    for subset, drop in drops.items():
        table[subset] = clean - drop
    [greedy] = beam_bounds(TableOutputs([table]), [3], beam_size=1)
    assert greedy.upper_order == (1, 2, 0)
    assert greedy.upper == pytest.approx((0.5 + 0.9 + 1.0) / 3)
    # the exact upper bound takes {0} first to reach {0, 2}: (0.3 + 0.95 + 1) / 3 = 0.75 < greedy 0.8; so here
    # greedy is exact, and the ascending greedy starts with the smallest drop ({0}: 0.3), then {0, 1} (0.6)
    assert exact_aopc_bounds(table).upper == pytest.approx(greedy.upper)
    assert greedy.lower_order == (0, 1, 2)
    assert greedy.lower == pytest.approx((0.3 + 0.6 + 1.0) / 3)


def test_a_beam_wide_enough_is_exact_and_never_beyond_the_exact_bounds():
    rng = np.random.default_rng(1)
    sizes = [4, 6, 7]
    tables = [rng.random(1 << n) for n in sizes]
    exact = exact_bounds(TableOutputs(tables), sizes)
    for width in (1, 2, 5):
        outputs = TableOutputs(tables)
        beam = beam_bounds(outputs, sizes, beam_size=width)
        assert outputs.calls == 1 + max(sizes)  # the clean inputs, then one call per masking step
        for b, e in zip(beam, exact):
            assert b.upper <= e.upper + 1e-12 and b.lower >= e.lower - 1e-12
    # with duplicates merged, a beam as wide as the largest layer of subsets (C(7, 3) = 35) is the DP itself
    wide = beam_bounds(TableOutputs(tables), sizes, beam_size=35)
    assert [v for b in wide for v in b[:2]] == pytest.approx([v for e in exact for v in e[:2]], abs=1e-12)


def test_aopc_bounds_takes_exact_up_to_the_limit_then_beam():
    rng = np.random.default_rng(2)
    sizes = [3, 9, 2]
    tables = [rng.random(1 << n) for n in sizes]
    found = aopc_bounds(TableOutputs(tables), sizes, exact_max_features=3, beam_size=2)
    assert [method for _, method in found] == ["exact", "beam", "exact"]
    assert found[1][0] == beam_bounds(TableOutputs([tables[1]]), [9], beam_size=2)[0]
    assert found[2][0].upper == exact_aopc_bounds(tables[2]).upper
    # the beam search reports each of its masking steps (here the 9 of the one beam example), for a progress bar
    steps = []
    again = aopc_bounds(TableOutputs(tables), sizes, 3, 2, progress=lambda k, total: steps.append((k, total)))
    assert steps == [(k, 9) for k in range(1, 10)] and again == found


def test_naopc_places_aopc_between_the_bounds():
    assert naopc([0.2, 0.5, 0.8], [0.8, 0.8, 0.8], [0.2, 0.2, 0.2]).tolist() == pytest.approx([0.0, 0.5, 1.0])
    assert np.isnan(naopc([0.3], [0.3], [0.3])).all()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: exact_aopc_bounds([0.1, 0.2, 0.3]), "2\\^n outputs"),
        (lambda: exact_aopc_bounds([0.1]), "2\\^n outputs"),
        (lambda: exact_aopc_bounds([0.1, float("nan")]), "NaN"),
        (lambda: exact_aopc_bounds([0.1, 0.2], weights=[0.0]), "2 finite numbers"),
        (lambda: exact_bounds(TableOutputs([]), [EXACT_LIMIT + 1]), f"at most {EXACT_LIMIT}"),
        (lambda: beam_bounds(TableOutputs([]), [3], beam_size=0), "beam_size"),
        (lambda: beam_bounds(TableOutputs([]), [3], beam_size=2.5), "beam_size"),
        (lambda: aopc_bounds(TableOutputs([]), [3], exact_max_features=EXACT_LIMIT + 1), "exact_max_features"),
        (lambda: authors_weights(0), "at least one feature"),
    ],
)
def test_bad_input_is_refused_before_any_output_is_asked_for(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_bounds_closer_than_float_rounding_are_flat():
    # a saturated classifier: U - L of 5e-8 is float32 rounding of a probability near 1, not a span
    assert np.isnan(naopc([3e-8], [5.96e-8], [7.45e-9])).all()
    assert naopc([0.5], [1.0], [0.0]).tolist() == [0.5]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (np.array([[1.0, 0.8, 0.5, 0.1], [1.0, 0.9, 0.6, 0.2]]), "1-D"),
        ([1.0, float("inf"), 0.5, 0.1], "infinite"),
        ([1.0, float("-inf")], "infinite"),
        (np.array([1 + 1j, 0.5]), "real"),
        (np.array(["a", "b"]), "real"),
    ],
)
def test_outputs_must_be_one_real_finite_row(outputs, message):
    with pytest.raises(ValueError, match=message):
        exact_aopc_bounds(outputs)
