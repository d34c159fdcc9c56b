"""Training curves and the accuracy-versus-length plot, as PNG bytes for a card's ``assets/`` folder.

What to draw is decided first, as data (`Chart`: one `Curve` per logged metric); `draw_chart` then draws
it with matplotlib's Agg canvas (no pyplot, no global state, no display). PNGs carry no timestamp or
version, so the same run gives the same bytes and a push with nothing new uploads nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards.metrics import MetricSeries

if TYPE_CHECKING:
    from hubkit.evaluate.results import EvalSummary

ASSETS_DIR = "assets"
# Distinct, colour-blind-safe line colours (Okabe-Ito), one per curve of a chart, in order.
CURVE_COLORS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
CHECKPOINT_COLOR = "#BBBBBB"
_FIGSIZE = (7.0, 3.6)
_DPI = 100
_MARKERS_UP_TO = 30  # points drawn as dots too when a curve has at most this many (a 1-step run is visible)
# Each curve is drawn thinner than the one before, so a curve equal to an earlier one (TRL's reward and a
# single component) still shows both colours.
_LINE_WIDTHS = (4.0, 2.8, 1.8, 1.2)

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


def _new_figure():  # type: ignore[no-untyped-def]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=_FIGSIZE, dpi=_DPI)
    # Fixed margins (inches) with room for 9-character tick labels, the axis labels and the title: a
    # layout engine would measure every text first, which doubles the cost of a chart.
    width, height = _FIGSIZE
    figure.subplots_adjust(
        left=1.05 / width, right=1 - 0.15 / width, bottom=0.55 / height, top=1 - 0.35 / height
    )
    FigureCanvasAgg(figure)
    return figure


def _png(figure) -> bytes:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def draw_chart(chart: Chart) -> bytes:
    """Draw one training chart as a PNG.

    Returns:
        The PNG bytes.

    Raises:
        ValueError: the chart has more curves than `CURVE_COLORS`.
    """
    if len(chart.curves) > len(CURVE_COLORS):
        raise ValueError(f"{chart.path}: {len(chart.curves)} curves, at most {len(CURVE_COLORS)} colours")
    from matplotlib.ticker import MaxNLocator

    figure = _new_figure()
    axes = figure.add_subplot()
    if chart.marked_steps:
        # One collection for all the checkpoint lines: the legend's placement tests each artist against it.
        axes.vlines(
            chart.marked_steps,
            0,
            1,
            transform=axes.get_xaxis_transform(),
            color=CHECKPOINT_COLOR,
            linestyles="--",
            linewidth=1,
            zorder=0,
            label="published checkpoint",
        )
    for index, (curve, color) in enumerate(zip(chart.curves, CURVE_COLORS, strict=False)):
        steps = [step for step, _ in curve.points]
        values = [value for _, value in curve.points]
        width = _LINE_WIDTHS[min(index, len(_LINE_WIDTHS) - 1)]
        marker = "o" if len(steps) <= _MARKERS_UP_TO else None
        axes.plot(
            steps,
            values,
            color=color,
            linewidth=width,
            marker=marker,
            markersize=width + 2,
            label=curve.label,
        )
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title(chart.title)
    axes.set_xlabel("training step")
    axes.set_ylabel(chart.ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return _png(figure)


def draw_accuracy_vs_length(summary: EvalSummary) -> bytes:
    """Accuracy (with its 95 % interval) against mean answer length, one point per evaluated model.

    Args:
        summary: the evaluation's summary (base model and checkpoints).

    Returns:
        The PNG bytes.
    """
    figure = _new_figure()
    axes = figure.add_subplot()
    models = ([summary.base] if summary.base else []) + list(summary.checkpoints)
    xs = [m.tokens_mean for m in models]
    ys = [100 * m.accuracy for m in models]
    errors = [
        # max(0, ...): at 0 % or 100 % the Wilson bound equals the accuracy up to rounding, either side.
        [100 * max(0.0, m.accuracy - m.ci95[0]) for m in models],
        [100 * max(0.0, m.ci95[1] - m.accuracy) for m in models],
    ]
    checkpoints = [m for m in models if m.step is not None]
    if len(checkpoints) > 1:
        axes.plot(
            [m.tokens_mean for m in checkpoints],
            [100 * m.accuracy for m in checkpoints],
            color=CURVE_COLORS[0],
            linewidth=1,
            alpha=0.5,
        )
    axes.errorbar(xs, ys, yerr=errors, fmt="none", ecolor=CHECKPOINT_COLOR, capsize=3)
    labels: dict[tuple[float, float], list[str]] = {}  # models at the same point share one label
    for model in models:
        point = (model.tokens_mean, 100 * model.accuracy)
        color = CURVE_COLORS[1] if model.step is None else CURVE_COLORS[0]
        axes.plot(*point, "o", color=color, markersize=6)
        labels.setdefault(point, []).append("base" if model.step is None else f"step {model.step}")
    for point, names in labels.items():
        axes.annotate(", ".join(names), point, textcoords="offset points", xytext=(5, 5), fontsize="small")
    axes.margins(x=0.15, y=0.1)
    axes.set_title(f"Accuracy vs. answer length ({summary.problems.source}, n = {summary.problems.n})")
    axes.set_xlabel("mean answer length (tokens)")
    axes.set_ylabel(f"accuracy (%, {summary.metric.name})")
    axes.grid(True, alpha=0.3)
    return _png(figure)
