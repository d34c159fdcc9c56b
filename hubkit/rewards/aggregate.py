"""Group aggregation: per-rollout reward components → one advantage per rollout.

A batch holds the rollouts of several prompts; rollouts of the same prompt share a group id. Groups may
have any size and need not be contiguous. Two modes, named as in the design:

- ``sum_then_normalize``: ``combined = Σ wᵢ·rᵢ``, then z-normalized within its group. This is GRPO on the
  combined reward (TRL's default ``multi_objective_aggregation``; verl's ``grpo`` estimator).
- ``normalize_then_sum`` (GDPO, arXiv 2601.05242): each component z-normalized within its group, then
  ``Σ wᵢ·zᵢ``; optionally whitened over the whole batch afterwards, as the paper, TRL and verl ≥0.7.1 do.

The z-score is ``(x − mean) / (std + epsilon)``. Two cases are defined explicitly rather than left to
floating point: a group whose values are all equal gets advantage 0 (never NaN, never rounding noise
blown up by a tiny epsilon), and a group of one rollout gets 0 (it has no baseline to compare with).
Plain numpy, so it runs in any training environment.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hubkit.rewards.spec import AGGREGATIONS, Aggregation, StdKind


@dataclass(frozen=True)
class AggregationResult:
    """What an aggregation produced for one batch.

    Attributes:
        advantages: one advantage per rollout, in batch order.
        combined: the weighted sum per rollout before the final normalization (``Σ wᵢ·rᵢ`` for
            ``sum_then_normalize``, ``Σ wᵢ·zᵢ`` for ``normalize_then_sum``).
        component_means: batch mean of each raw component, for logging.
        component_stds: batch std of each raw component (same std kind as the aggregation), for logging.
        zero_std_fraction: fraction of rollouts whose group had no spread in the normalized quantity.
    """

    advantages: np.ndarray
    combined: np.ndarray
    component_means: dict[str, float]
    component_stds: dict[str, float]
    zero_std_fraction: float


def _std(values: np.ndarray, std: StdKind) -> float:
    ddof = 1 if std == "unbiased" else 0
    if values.size <= ddof:
        return 0.0
    return float(np.std(values, ddof=ddof))


def _group_codes(group_ids: Sequence[Hashable]) -> np.ndarray:
    """Group ids → 0..G-1, numbered in order of first appearance (ids may be any hashable: uuids, ints)."""
    codes: dict[Hashable, int] = {}
    return np.fromiter(
        (codes.setdefault(g, len(codes)) for g in group_ids), dtype=np.int64, count=len(group_ids)
    )


def _zscore(values: np.ndarray, std: StdKind, epsilon: float) -> tuple[np.ndarray, bool]:
    """(x − mean) / (std + epsilon) over all of `values`; zeros when they do not vary or there is one."""
    if values.size < 2 or np.all(values == values[0]):
        return np.zeros_like(values), True
    return (values - values.mean()) / (_std(values, std) + epsilon), False


def group_normalize(
    values: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable],
    *,
    std: StdKind = "unbiased",
    epsilon: float = 1e-6,
) -> np.ndarray:
    """Z-normalize `values` (one per rollout) within each group of `group_ids`: ``(x − group mean) /
    (group std + epsilon)`` as float64, 0 for groups whose values are all equal and for groups of one
    rollout. `std`: ``unbiased`` (N−1, as TRL's ``nanstd`` and verl's ``torch.std``) or ``biased`` (N).

    Raises:
        ValueError: `values` and `group_ids` differ in length, or a value is not finite.
    """
    return _group_normalize(np.asarray(values, dtype=np.float64), group_ids, std, epsilon)[0]


def _group_normalize(
    values: np.ndarray, group_ids: Sequence[Hashable], std: StdKind, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    if values.ndim != 1 or len(values) != len(group_ids):
        raise ValueError(f"got {values.shape} values for {len(group_ids)} group ids")
    if not np.all(np.isfinite(values)):
        raise ValueError("reward values must be finite (a component returned NaN or inf)")
    if values.size == 0:
        return values.copy(), np.zeros(0, dtype=bool)
    # Vectorized over groups: per-group sums by bincount, indexed back to rollouts by group code.
    codes = _group_codes(group_ids)
    counts = np.bincount(codes)
    means = np.bincount(codes, weights=values) / counts
    deviations = values - means[codes]
    ddof = 1 if std == "unbiased" else 0
    stds = np.sqrt(np.bincount(codes, weights=deviations**2) / np.maximum(counts - ddof, 1))
    highs = np.full(counts.shape, -np.inf)
    lows = np.full(counts.shape, np.inf)
    np.maximum.at(highs, codes, values)
    np.minimum.at(lows, codes, values)
    # Defined cases rather than floating point: no spread (all equal) or a single rollout → 0.
    flat = ((highs == lows) | (counts < 2))[codes]
    denominators = np.where(flat, 1.0, stds[codes] + epsilon)  # 1.0 only to avoid dividing by zero
    return np.where(flat, 0.0, deviations / denominators), flat


def aggregate(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    weights: Mapping[str, float],
    group_ids: Sequence[Hashable],
    *,
    mode: Aggregation = "sum_then_normalize",
    std: StdKind = "unbiased",
    epsilon: float = 1e-6,
    batch_whiten: bool = False,
) -> AggregationResult:
    """Turn per-component rewards (name → one raw reward per rollout) into one advantage per rollout.

    `weights` must name exactly the components of `scores`; `std` and `epsilon` apply to every z-score.
    `batch_whiten` (``normalize_then_sum`` only) z-normalizes the weighted sum over the whole batch (GDPO's
    last step); it is ignored for ``sum_then_normalize``, where the group z-score is final.

    Raises:
        ValueError: unknown mode, weights that do not match the components, lengths that differ, or
            non-finite rewards.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation mode {mode!r}")
    if set(scores) != set(weights) or not scores:
        raise ValueError(f"weights {sorted(weights)} must name exactly the components {sorted(scores)}")
    raw = {name: np.asarray(values, dtype=np.float64) for name, values in scores.items()}
    for name, values in raw.items():
        if values.shape != (len(group_ids),):
            raise ValueError(f"component {name!r} has {values.shape} values for {len(group_ids)} rollouts")

    if mode == "sum_then_normalize":
        combined = sum(weights[name] * values for name, values in raw.items())
        advantages, zero_std = _group_normalize(combined, group_ids, std, epsilon)
    else:
        normalized = {name: _group_normalize(values, group_ids, std, epsilon) for name, values in raw.items()}
        combined = sum(weights[name] * z for name, (z, _) in normalized.items())
        # A rollout counts as "no signal" only when no component varied in its group.
        zero_std = np.logical_and.reduce([flags for _, flags in normalized.values()])
        if batch_whiten:
            advantages, _ = _zscore(combined, std, epsilon)
        else:
            advantages = combined.copy()

    return AggregationResult(
        advantages=advantages,
        combined=np.asarray(combined, dtype=np.float64),
        component_means={name: float(values.mean()) if values.size else 0.0 for name, values in raw.items()},
        component_stds={name: _std(values, std) for name, values in raw.items()},
        zero_std_fraction=float(zero_std.mean()) if zero_std.size else 0.0,
    )
