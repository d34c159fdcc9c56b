"""Group aggregation, pinned against groups computed by hand (values in the comments)."""

import math

import numpy as np
import pytest

from hubkit.rewards.aggregate import aggregate, group_normalize

SQRT3_2 = math.sqrt(3) / 2  # [1,0,1,0]: mean 0.5, unbiased std sqrt(1/3) → ±0.5/sqrt(1/3)


def test_group_normalize_unbiased_biased_and_epsilon():
    ids = [0, 0, 0, 0]
    assert group_normalize([1, 0, 1, 0], ids, epsilon=0) == pytest.approx([SQRT3_2, -SQRT3_2] * 2)
    # biased std of [1,0,1,0] is 0.5 → ±1
    assert group_normalize([1, 0, 1, 0], ids, std="biased", epsilon=0) == pytest.approx([1, -1, 1, -1])
    # epsilon is added to the std: 0.5 / (0.57735 + 0.1)
    assert group_normalize([1, 0, 1, 0], ids, epsilon=0.1) == pytest.approx([0.7381705, -0.7381705] * 2)


def test_several_uneven_interleaved_groups_in_one_batch():
    # a: [1,0,1,0] → ±0.866; b: [0,3] → mean 1.5, std sqrt(4.5) → ∓0.7071; c: one rollout → 0;
    # d: all equal → 0. Group members are interleaved, not contiguous.
    values = [1, 0, 5, 1, 3, 0, 7, 7, 0]
    ids = ["a", "b", "c", "a", "b", "a", "d", "d", "a"]
    out = group_normalize(values, ids, epsilon=0)
    expected = [SQRT3_2, -1 / math.sqrt(2), 0.0, SQRT3_2, 1 / math.sqrt(2), -SQRT3_2, 0.0, 0.0, -SQRT3_2]
    assert out == pytest.approx(expected)


@pytest.mark.parametrize("epsilon", [0.0, 1e-6, 1e-4])
def test_zero_variance_gives_exact_zeros_never_nan(epsilon):
    # 0.1 * 3 / 3 != 0.1 in floating point: without the explicit case, rounding noise / epsilon would leak.
    out = group_normalize([0.1, 0.1, 0.1, -2.0, -2.0], ["g", "g", "g", "h", "h"], epsilon=epsilon)
    assert np.all(out == 0.0)
    result = aggregate(
        {"c": [1, 1, 1], "l": [-0.3, -0.3, -0.3]},
        {"c": 1.0, "l": 0.5},
        [0, 0, 0],
        mode="normalize_then_sum",
        epsilon=epsilon,
        batch_whiten=True,
    )
    assert np.all(result.advantages == 0.0)
    assert result.zero_std_fraction == 1.0


def test_single_rollout_groups_get_zero():
    for std in ("unbiased", "biased"):
        assert group_normalize([3.0, -1.0], ["x", "y"], std=std).tolist() == [0.0, 0.0]


def test_sum_then_normalize_by_hand():
    # combined = c + 0.5·l = [0.9, 0.8, -0.05, -0.15]; mean 0.375; unbiased std sqrt(0.9125/3) = 0.551513
    result = aggregate(
        {"c": [1, 1, 0, 0], "l": [-0.2, -0.4, -0.1, -0.3]}, {"c": 1.0, "l": 0.5}, [7, 7, 7, 7], epsilon=0
    )
    assert result.combined == pytest.approx([0.9, 0.8, -0.05, -0.15])
    assert result.advantages == pytest.approx([0.951927, 0.770607, -0.770607, -0.951927], abs=1e-6)
    assert result.component_means == pytest.approx({"c": 0.5, "l": -0.25})
    assert result.component_stds == pytest.approx({"c": 0.577350, "l": 0.129099}, abs=1e-6)
    assert result.zero_std_fraction == 0.0


def test_normalize_then_sum_by_hand_with_and_without_batch_whitening():
    # z(c) = ±0.866025; z(l): mean -0.25, std sqrt(0.05/3) → [0.387298, -1.161895, 1.161895, -0.387298]
    # sum = z(c) + 0.5·z(l) = [1.059675, 0.285078, -0.285078, -1.059675]
    scores = {"c": [1, 1, 0, 0], "l": [-0.2, -0.4, -0.1, -0.3]}
    plain = aggregate(scores, {"c": 1.0, "l": 0.5}, [0] * 4, mode="normalize_then_sum", epsilon=0)
    assert plain.advantages == pytest.approx([1.059675, 0.285078, -0.285078, -1.059675], abs=1e-6)
    # whitened over the batch: mean 0, unbiased std sqrt(2.408357/3) = 0.895983
    whitened = aggregate(
        scores, {"c": 1.0, "l": 0.5}, [0] * 4, mode="normalize_then_sum", epsilon=0, batch_whiten=True
    )
    assert whitened.advantages == pytest.approx([1.182694, 0.318173, -0.318173, -1.182694], abs=1e-6)


def test_gdpo_separates_what_grpo_collapses():
    # GDPO paper's example: two binary rewards, two rollouts. Rewards (0,1) vs (0,0) and (1,1) vs (0,0)
    # get the same GRPO advantage (±0.7071) but different GDPO advantages (±0.7071 vs ±1.4142).
    weights = {"a": 1.0, "b": 1.0}
    one = {"a": [0, 0], "b": [1, 0]}
    two = {"a": [1, 0], "b": [1, 0]}
    grpo = [aggregate(s, weights, [0, 0], epsilon=0).advantages for s in (one, two)]
    gdpo = [
        aggregate(s, weights, [0, 0], mode="normalize_then_sum", epsilon=0).advantages for s in (one, two)
    ]
    assert grpo[0] == pytest.approx(grpo[1])
    assert gdpo[0] == pytest.approx([0.707107, -0.707107], abs=1e-6)
    assert gdpo[1] == pytest.approx([1.414214, -1.414214], abs=1e-6)


def test_batch_whitening_spans_groups():
    # Two groups whose normalized sums are [+0.707, -0.707] and [+1.414, -1.414]: whitening uses one
    # mean (0) and one std for the whole batch: std = sqrt((2·0.5 + 2·2)/3) = 1.290994.
    scores = {"a": [0, 0, 1, 0], "b": [1, 0, 1, 0]}
    result = aggregate(
        scores, {"a": 1.0, "b": 1.0}, [0, 0, 1, 1], mode="normalize_then_sum", epsilon=0, batch_whiten=True
    )
    assert result.advantages == pytest.approx([0.547723, -0.547723, 1.095445, -1.095445], abs=1e-6)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="must name exactly"):
        aggregate({"c": [1, 0]}, {"c": 1.0, "l": 0.5}, [0, 0])
    with pytest.raises(ValueError, match="2 rollouts"):
        aggregate({"c": [1, 0, 1]}, {"c": 1.0}, [0, 0])
    with pytest.raises(ValueError, match="finite"):
        aggregate({"c": [1, float("nan")]}, {"c": 1.0}, [0, 0])
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate({"c": [1, 0]}, {"c": 1.0}, [0, 0], mode="mean")
