"""What each chart of a card shows: the training curves and the accuracy-versus-length plot, as data.

What to draw is decided here, as frozen data (`Chart`: one `Curve` per logged metric; `AccuracyChart`: one
`ModelPoint` per evaluated model); `hubkit.cards.figures` draws it with matplotlib, which a push runs in a
child process (`hubkit.cards.chart_process`). The same chart gives the same PNG bytes, so a push with
nothing new uploads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards.metrics import MetricSeries

if TYPE_CHECKING:
    from hubkit.evaluate.results import EvalSummary

ASSETS_DIR = "assets"
ACCURACY_PATH = f"{ASSETS_DIR}/accuracy_vs_length.png"
# Distinct, colour-blind-safe line colours (Okabe-Ito), one per curve of a chart, in order.
CURVE_COLORS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
CHECKPOINT_COLOR = "#BBBBBB"

# Chart file name, title, y label, and the card metrics it draws (in this order).
_TRAINING_CHARTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("reward.png", "Reward", "mean reward", ("reward", "component:*")),
    ("response_length.png", "Response length", "tokens", ("length_mean", "length_max")),
    ("kl.png", "KL to the reference model", "KL", ("kl",)),
    ("entropy.png", "Entropy", "entropy", ("entropy",)),
    ("grad_norm.png", "Gradient norm", "grad norm", ("grad_norm",)),
)


@dataclass(frozen=True)
class Curve:
    """One line: a metric over training steps (a NaN or infinite value leaves a gap)."""

    label: str
    points: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Chart:
    """One training-curve image.

    Args:
        path: where it goes in the repo (``assets/reward.png``).
        title: the chart's title (also the image's alt text in the card).
        ylabel: the y axis label.
        curves: one per logged metric, drawn in `CURVE_COLORS` order.
        marked_steps: published checkpoints, drawn as vertical lines.
    """

    path: str
    title: str
    ylabel: str
    curves: tuple[Curve, ...]
    marked_steps: tuple[int, ...]


@dataclass(frozen=True)
class ModelPoint:
    """One evaluated model: its mean answer length, its accuracy and the accuracy's 95 % interval (%).

    Args:
        step: the checkpoint's step; None for the base model.
    """

    step: int | None
    tokens_mean: float
    accuracy: float
    low: float
    high: float


@dataclass(frozen=True)
class AccuracyChart:
    """The accuracy-versus-length image: one point per evaluated model, the base first."""

    title: str
    ylabel: str
    points: tuple[ModelPoint, ...]
    path: str = ACCURACY_PATH


def training_charts(series: Sequence[MetricSeries], published_steps: Sequence[int]) -> tuple[Chart, ...]:
    """The training-curve charts for the metrics a run logged: reward (and each component), response
    length, KL, entropy and gradient norm; a chart none of whose metrics was logged is left out.

    Args:
        series: the run's key metrics (`hubkit.cards.metrics.key_metric_series`).
        published_steps: the steps in the repo, marked on every chart.

    Returns:
        The charts, in card order.
    """
    charts = []
    for filename, title, ylabel, keys in _TRAINING_CHARTS:
        chosen = [
            s
            for key in keys
            for s in series
            if s.key == key or (key.endswith("*") and s.key.startswith(key[:-1]))
        ]
        if chosen:
            charts.append(
                Chart(
                    path=f"{ASSETS_DIR}/{filename}",
                    title=title,
                    ylabel=ylabel,
                    curves=tuple(Curve(f"{s.label} [{s.logged_as}]", s.points) for s in chosen),
                    marked_steps=tuple(sorted(published_steps)),
                )
            )
    return tuple(charts)


def accuracy_chart(summary: EvalSummary) -> AccuracyChart:
    """Accuracy (with its 95 % interval) against mean answer length, one point per evaluated model.

    Args:
        summary: the evaluation's summary (base model and checkpoints).

    Returns:
        The chart, its points in percent.
    """
    models = ([summary.base] if summary.base else []) + list(summary.checkpoints)
    return AccuracyChart(
        title=f"Accuracy vs. answer length ({summary.problems.source}, n = {summary.problems.n})",
        ylabel=f"accuracy (%, {summary.metric.name})",
        points=tuple(
            ModelPoint(
                step=m.step,
                tokens_mean=m.tokens_mean,
                accuracy=100 * m.accuracy,
                # min/max: at 0 % or 100 % the Wilson bound equals the accuracy up to rounding, either side.
                low=100 * min(m.accuracy, m.ci95[0]),
                high=100 * max(m.accuracy, m.ci95[1]),
            )
            for m in models
        ),
    )
