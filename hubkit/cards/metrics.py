"""The training metrics a card shows, under one name whatever the framework logged them as.

TRL (``trainer_state.json`` ``log_history``, research: trl.md §4) and verl (the ``file`` logger, research:
verl.md §5.2) name the same quantities differently; each `KeyMetric` lists its names per framework, the
first one the run logged wins. A metric the run never logged has no `MetricSeries` at all: cards leave it
out rather than show 0.

Reward components: TRL logs ``rewards/<function name>/mean`` (hubkit's TRL integration names each function
after its component); verl ≥0.7.1's GDPO estimator logs ``gdpo/<key>/mean``. verl 0.6.1 logs no
per-component training metric.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hubkit.runs.model import Metrics, Run


@dataclass(frozen=True)
class KeyMetric:
    """One quantity a card reports, and what each framework calls it (first logged name wins)."""

    key: str
    label: str
    names: dict[str, tuple[str, ...]]


KEY_METRICS: tuple[KeyMetric, ...] = (
    KeyMetric("reward", "reward (mean)", {"trl": ("reward",), "verl": ("critic/score/mean",)}),
    KeyMetric(
        "length_mean",
        "response length, mean (tokens)",
        {"trl": ("completions/mean_length", "completion_length"), "verl": ("response_length/mean",)},
    ),
    KeyMetric(
        "length_max",
        "response length, max (tokens)",
        {"trl": ("completions/max_length",), "verl": ("response_length/max",)},
    ),
    KeyMetric(
        "clipped",
        "share of responses cut at the length limit",
        {"trl": ("completions/clipped_ratio",), "verl": ("response_length/clip_ratio",)},
    ),
    KeyMetric("kl", "KL to the reference model", {"trl": ("kl",), "verl": ("actor/kl_loss",)}),
    # PPO's KL between the policy that sampled and the updated one (verl logs it whatever the KL penalty).
    KeyMetric("policy_kl", "KL, updated to sampling policy", {"trl": (), "verl": ("actor/ppo_kl",)}),
    # TRL logs `policy_loss` only with entropy regularisation; its `loss` is the policy loss (+ β·KL).
    KeyMetric("policy_loss", "loss", {"trl": ("policy_loss", "loss"), "verl": ("actor/pg_loss",)}),
    KeyMetric("grad_norm", "gradient norm", {"trl": ("grad_norm",), "verl": ("actor/grad_norm",)}),
    KeyMetric("entropy", "entropy", {"trl": ("entropy",), "verl": ("actor/entropy",)}),
)
# Where each framework logs a reward component's mean ({} is the component's name); the names matching
# the first pattern are the components the run logged.
COMPONENT_PATTERNS: dict[str, tuple[str, ...]] = {
    "trl": ("rewards/{}/mean", "rewards/{}"),
    "verl": ("gdpo/{}/mean",),
}


@dataclass(frozen=True)
class MetricSeries:
    """A logged metric under its card name (``reward``, ``length_mean``, ``component:<name>`` ...): its
    label, the name the framework logged it under, and (step, value) of the steps that logged it, in order."""

    key: str
    label: str
    logged_as: str
    points: tuple[tuple[int, float], ...]

    def at(self, step: int) -> float | None:
        """The value logged at `step`, or None when that step did not log it."""
        return next((value for s, value in self.points if s == step), None)


def _series(metrics: Metrics, key: str, label: str, candidates: tuple[str, ...]) -> MetricSeries | None:
    for name in candidates:
        points = metrics.series(name)
        if points:
            return MetricSeries(key=key, label=label, logged_as=name, points=tuple(points))
    return None


def logged_components(run: Run) -> tuple[str, ...]:
    """The reward components (TRL: reward functions) whose mean the run logged, by name."""
    prefix, suffix = COMPONENT_PATTERNS[run.framework][0].split("{}")
    pattern = re.compile(f"^{re.escape(prefix)}(?P<name>[^/]+){re.escape(suffix)}$")
    return tuple(match["name"] for logged in run.metrics.names if (match := pattern.match(logged)))


def component_series(run: Run) -> tuple[MetricSeries, ...]:
    """One series per reward component the run logged: the spec's, then any other the framework logged
    (components never logged are left out)."""
    names = [c.name for c in run.manifest.reward.components] if run.manifest.reward else []
    names += [name for name in logged_components(run) if name not in names]
    found = []
    for name in names:
        candidates = tuple(p.format(name) for p in COMPONENT_PATTERNS[run.framework])
        series = _series(run.metrics, f"component:{name}", f"reward: {name} (mean)", candidates)
        if series is not None:
            found.append(series)
    return tuple(found)


def select(series: Sequence[MetricSeries], keys: Sequence[str]) -> list[MetricSeries]:
    """The series of `keys`, in that order (``component:*``: every component, in `series` order)."""
    return [
        s
        for key in keys
        for s in series
        if s.key == key or (key.endswith("*") and s.key.startswith(key[:-1]))
    ]


def key_metric_series(run: Run) -> tuple[MetricSeries, ...]:
    """Every key metric the run logged, reward components right after the reward, in `KEY_METRICS` order."""
    found: list[MetricSeries] = []
    for metric in KEY_METRICS:
        series = _series(run.metrics, metric.key, metric.label, metric.names[run.framework])
        if series is not None:
            found.append(series)
        if metric.key == "reward":
            found.extend(component_series(run))
    return tuple(found)


def snapshot_steps(series: tuple[MetricSeries, ...]) -> tuple[int, ...]:
    """The first, middle and last step at which any of `series` was logged (fewer when fewer steps were),
    distinct and in order."""
    steps = sorted({step for s in series for step, _ in s.points})
    if not steps:
        return ()
    return tuple(sorted({steps[0], steps[(len(steps) - 1) // 2], steps[-1]}))
