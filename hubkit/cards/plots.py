"""Training curves and the accuracy-versus-length plot, as PNG bytes for a card's ``assets/`` folder.

What to draw is decided first, as data (`Chart`: one `Curve` per logged metric); `draw_chart` then draws
it on a `hubkit.cards.canvas.Canvas`. PNGs carry no timestamp or version, so the same run gives the same
bytes and a push with nothing new uploads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards.metrics import MetricSeries

if TYPE_CHECKING:
    from hubkit.cards.canvas import Canvas
    from hubkit.evaluate.results import EvalSummary

ASSETS_DIR = "assets"
# Distinct, colour-blind-safe line colours (Okabe-Ito), one per curve of a chart, in order.
CURVE_COLORS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
CHECKPOINT_COLOR = "#BBBBBB"
_MARKERS_UP_TO = 30  # points drawn as dots too when a curve has at most this many (a 1-step run is visible)
# Each curve is drawn thinner than the one before (pixels), so a curve equal to an earlier one (TRL's reward
# and a single component) still shows both colours.
_LINE_WIDTHS = (5.0, 3.6, 2.4, 1.6)

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
    """One line: a metric over training steps."""

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


def draw_chart(chart: Chart) -> bytes:
    """Draw one training chart as a PNG.

    Returns:
        The PNG bytes.

    Raises:
        ValueError: the chart has more curves than `CURVE_COLORS`, or none.
    """
    return training_canvas(chart).png()


def training_canvas(chart: Chart) -> Canvas:
    """The training chart drawn: its curves, a dashed line at each published checkpoint, the legend below.

    Raises:
        ValueError: the chart has more curves than `CURVE_COLORS`, or none.
    """
    # Pillow takes 18 ms to import (measured): a push imports it on the thread that draws its charts.
    from hubkit.cards.canvas import Canvas, LegendEntry, axis_for

    if not chart.curves or len(chart.curves) > len(CURVE_COLORS):
        raise ValueError(f"{chart.path}: {len(chart.curves)} curves, 1 to {len(CURVE_COLORS)} colours")
    steps = [step for curve in chart.curves for step, _ in curve.points] + list(chart.marked_steps)
    values = [value for curve in chart.curves for _, value in curve.points]
    legend = []
    if chart.marked_steps:
        legend.append(LegendEntry("published checkpoint", CHECKPOINT_COLOR, width=1, dashed=True))
    widths = [_LINE_WIDTHS[min(index, len(_LINE_WIDTHS) - 1)] for index in range(len(chart.curves))]
    markers = [
        w + 3 if len(c.points) <= _MARKERS_UP_TO else 0 for w, c in zip(widths, chart.curves, strict=True)
    ]
    for curve, color, width, marker in zip(chart.curves, CURVE_COLORS, widths, markers, strict=False):
        legend.append(LegendEntry(curve.label, color, width=width, marker=marker))
    canvas = Canvas(
        axis_for(steps, integer=True),
        axis_for(values),
        title=chart.title,
        xlabel="training step",
        ylabel=chart.ylabel,
        legend=legend,
    )
    for step in chart.marked_steps:
        canvas.vline(step, CHECKPOINT_COLOR)
    for curve, color, width, marker in zip(chart.curves, CURVE_COLORS, widths, markers, strict=False):
        canvas.line(curve.points, color, width, marker=marker)
    return canvas


def draw_accuracy_vs_length(summary: EvalSummary) -> bytes:
    """Accuracy (with its 95 % interval) against mean answer length, one point per evaluated model.

    Args:
        summary: the evaluation's summary (base model and checkpoints).

    Returns:
        The PNG bytes.
    """
    return accuracy_canvas(summary).png()


def accuracy_canvas(summary: EvalSummary) -> Canvas:
    """The accuracy-versus-length chart drawn: each model's dot and interval, the checkpoints joined in step
    order and shaded by step (lighter: earlier), a label beside each point where it overlaps nothing (the
    base first, then the checkpoints from the last one back; models at one point share a label)."""
    from hubkit.cards.canvas import Canvas, LegendEntry, axis_for, lighter

    models = ([summary.base] if summary.base else []) + list(summary.checkpoints)
    xs = [m.tokens_mean for m in models]
    # max/min: at 0 % or 100 % the Wilson bound equals the accuracy up to rounding, either side.
    lows = [100 * min(m.accuracy, m.ci95[0]) for m in models]
    highs = [100 * max(m.accuracy, m.ci95[1]) for m in models]
    checkpoints = [m for m in models if m.step is not None]
    legend = [LegendEntry("base model", CURVE_COLORS[1], width=0, marker=8)] if summary.base else []
    if checkpoints:
        shading = " (lighter: earlier)" if len(checkpoints) > 1 else ""
        legend.append(LegendEntry(f"checkpoint{shading}", CURVE_COLORS[0], width=0, marker=8))
    canvas = Canvas(
        axis_for(xs, margin=0.15),
        axis_for(lows + highs, margin=0.1),
        title=f"Accuracy vs. answer length ({summary.problems.source}, n = {summary.problems.n})",
        xlabel="mean answer length (tokens)",
        ylabel=f"accuracy (%, {summary.metric.name})",
        legend=legend,
    )
    for model, low, high in zip(models, lows, highs, strict=True):
        canvas.error_bar(model.tokens_mean, low, high, CHECKPOINT_COLOR)
    if len(checkpoints) > 1:
        canvas.line(
            [(m.tokens_mean, 100 * m.accuracy) for m in checkpoints], lighter(CURVE_COLORS[0], 0.5), 1.5
        )
    steps_at: dict[tuple[float, float], list[int | None]] = {}
    last = max(1, len(checkpoints) - 1)  # the first checkpoint 60 % white, the last one full colour
    shades = {
        m.step: lighter(CURVE_COLORS[0], 0.6 * (len(checkpoints) - 1 - i) / last)
        for i, m in enumerate(checkpoints)
    }
    for model in models:
        point = (model.tokens_mean, 100 * model.accuracy)
        color = CURVE_COLORS[1] if model.step is None else shades[model.step]
        canvas.dot(*point, color, 8)
        steps_at.setdefault(point, []).append(model.step)
    order = sorted(steps_at.items(), key=lambda item: (None not in item[1], -max(s or 0 for s in item[1])))
    canvas.label_points([(x, y, point_label(steps)) for (x, y), steps in order])
    return canvas


def point_label(steps: Sequence[int | None]) -> str:
    """The label of the models at one point: "base", "step 40", "base, step 40", "steps 40, 60", or
    "5 steps, 20 to 100" (more than three)."""
    names = ["base"] if None in steps else []
    numbers = sorted(s for s in steps if s is not None)
    if len(numbers) == 1:
        names.append(f"step {numbers[0]}")
    elif 1 < len(numbers) <= 3:
        names.append("steps " + ", ".join(map(str, numbers)))
    elif numbers:
        names.append(f"{len(numbers)} steps, {numbers[0]} to {numbers[-1]}")
    return ", ".join(names)
