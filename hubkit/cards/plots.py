"""Training curves and the accuracy-versus-length plot, as PNG bytes for a card's ``assets/`` folder.

What to draw is decided first, as data (`Chart`: one `Curve` per logged metric); matplotlib (Agg,
imported only when a chart is drawn) draws it. The PNGs carry no timestamp and no version, so the same
data gives the same bytes and a push with nothing new uploads nothing; `cached_png` keeps each image
under the hash of what it shows, so such a push draws nothing either.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.cards.metrics import MetricSeries, select
from hubkit.runs.state import keep

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from hubkit.runs.eval_results import EvalSummary, ModelResult

ASSETS_DIR = "assets"
# Distinct, colour-blind-safe line colours (Okabe-Ito), one per curve of a chart, in order.
CURVE_COLORS: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
CHECKPOINT_COLOR = "#BBBBBB"
_MARKERS_UP_TO = 30  # points drawn as dots too when a curve has at most this many (a 1-step run is visible)
# Each curve is drawn thinner than the one before (points), so a curve equal to an earlier one (TRL's
# reward and a single component) still shows both colours.
_LINE_WIDTHS = (3.6, 2.6, 1.7, 1.1)
# 700 x 360 pixels: readable at a model card's width without scaling text down.
_SIZE_INCHES, _DPI = (7.0, 3.6), 100
_MAX_LABEL = 60  # legend and point labels longer than this are shortened with "…"

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
    """One training-curve image: its path in the repo (``assets/reward.png``), its title (also its alt text in
    the card), one curve per logged metric in `CURVE_COLORS` order, published checkpoints as vertical lines."""

    path: str
    title: str
    ylabel: str
    curves: tuple[Curve, ...]
    marked_steps: tuple[int, ...]


def training_charts(series: Sequence[MetricSeries], published_steps: Sequence[int]) -> tuple[Chart, ...]:
    """The training-curve charts for the metrics a run logged: reward (and each component), response
    length, KL, entropy and gradient norm, in card order; a chart none of whose metrics was logged is left
    out. `published_steps` (the steps in the repo) are marked on every chart."""
    charts = []
    for filename, title, ylabel, keys in _TRAINING_CHARTS:
        chosen = select(series, keys)
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


def cached_png(kind: str, shown: object, draw: Callable[[], bytes], cache_dir: Path | None) -> bytes:
    """The PNG of `shown` from `cache_dir` (a run's ``.hubkit/charts``; None draws every time) when drawn
    before with this matplotlib, else drawn and kept; the key is `kind` and the ``repr`` of `shown` (a
    `Chart`, an `EvalSummary`)."""
    if cache_dir is None:
        return draw()
    key = hashlib.sha256(f"{kind}\n{version('matplotlib')}\n{shown!r}".encode()).hexdigest()
    path = cache_dir / f"{key}.png"
    if path.is_file():
        return path.read_bytes()
    data = draw()
    keep(path, data, "a chart")
    return data


def training_figure(chart: Chart) -> Figure:
    """The training chart: its curves, a dashed line at each published checkpoint, the legend below.

    Raises:
        ValueError: the chart has more curves than `CURVE_COLORS`, or none.
    """
    from matplotlib.ticker import MaxNLocator

    if not chart.curves or len(chart.curves) > len(CURVE_COLORS):
        raise ValueError(f"{chart.path}: {len(chart.curves)} curves, 1 to {len(CURVE_COLORS)} colours")
    figure, axes = _figure(chart.title, "training step", chart.ylabel)
    for step in chart.marked_steps:
        axes.axvline(step, color=CHECKPOINT_COLOR, linestyle="--", linewidth=1, zorder=1)
    for index, (curve, color) in enumerate(zip(chart.curves, CURVE_COLORS, strict=False)):
        width = _LINE_WIDTHS[min(index, len(_LINE_WIDTHS) - 1)]
        steps, values = zip(*curve.points, strict=True) if curve.points else ((), ())
        marker = "o" if len(curve.points) <= _MARKERS_UP_TO else None
        axes.plot(
            steps, values, color=color, linewidth=width, marker=marker, markersize=width + 2.5, zorder=2
        )
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    labels = [_short(curve.label) for curve in chart.curves]
    if chart.marked_steps:
        axes.plot([], [], color=CHECKPOINT_COLOR, linestyle="--", linewidth=1)
        labels.append("published checkpoint")
    _legend_below(figure, axes, labels)
    return figure


def accuracy_figure(summary: EvalSummary) -> Figure:
    """Accuracy against mean answer length: each model's dot and 95 % interval, the checkpoints joined in
    step order and shaded by step (lighter: earlier), a label beside each point where it overlaps nothing
    (the base first, then the checkpoints from the last one back; models at one point share a label)."""
    from matplotlib.colors import to_rgb

    models = ([summary.base] if summary.base else []) + list(summary.checkpoints)
    figure, axes = _figure(
        f"Accuracy vs. answer length ({summary.problems.source}, n = {summary.problems.n})",
        "mean answer length (tokens)",
        f"accuracy (%, {summary.metric.name})",
    )
    checkpoints = [m for m in models if m.step is not None]
    for model in models:
        # min/max: at 0 % or 100 % the Wilson bound equals the accuracy up to rounding, either side.
        low, high = 100 * min(model.accuracy, model.ci95[0]), 100 * max(model.accuracy, model.ci95[1])
        axes.plot([model.tokens_mean] * 2, [low, high], color=CHECKPOINT_COLOR, linewidth=1.5, zorder=1)
    if len(checkpoints) > 1:
        axes.plot(
            [m.tokens_mean for m in checkpoints],
            [100 * m.accuracy for m in checkpoints],
            color=_lighter(to_rgb(CURVE_COLORS[0]), 0.5),
            linewidth=1.2,
            zorder=2,
        )
    last = max(1, len(checkpoints) - 1)  # the first checkpoint 60 % white, the last one full colour
    shade = {
        m.step: _lighter(to_rgb(CURVE_COLORS[0]), 0.6 * (len(checkpoints) - 1 - i) / last)
        for i, m in enumerate(checkpoints)
    }
    steps_at: dict[tuple[float, float], list[int | None]] = {}
    for model in models:
        point = (model.tokens_mean, 100 * model.accuracy)
        color = CURVE_COLORS[1] if model.step is None else shade[model.step]
        axes.plot(*point, marker="o", markersize=8, color=color, linestyle="none", zorder=3)
        steps_at.setdefault(point, []).append(model.step)
    axes.margins(x=0.15, y=0.12)
    axes.set_xlim(left=0)  # lengths: the axis starts at none
    labels = []
    if summary.base:
        axes.plot([], [], marker="o", markersize=8, color=CURVE_COLORS[1], linestyle="none")
        labels.append("base model")
    if checkpoints:
        axes.plot([], [], marker="o", markersize=8, color=CURVE_COLORS[0], linestyle="none")
        labels.append("checkpoint (lighter: earlier)" if len(checkpoints) > 1 else "checkpoint")
    _legend_below(figure, axes, labels)
    order = sorted(steps_at.items(), key=lambda item: (None not in item[1], -max(s or 0 for s in item[1])))
    _label_points(figure, axes, [(x, y, point_label(steps)) for (x, y), steps in order])
    return figure


def sweep_figure(
    runs: Sequence[tuple[str, Sequence[ModelResult]]],
    base: ModelResult | None,
    front: Sequence[tuple[str, int | None]],
    title: str,
    setting: str,
) -> Figure:
    """Accuracy against mean answer length for every run of a sweep: each run's checkpoints joined in step
    order in a colour of its own (its last one larger), the base model, and the Pareto front (no other
    model both more accurate and shorter) joined by a dashed line and labelled. `runs`: each run's varied
    value and its evaluated checkpoints, by step; `front`: the (value, step) of each model on it, the base's
    ("base", None); the legend says `setting=value`, a point `value, step N`."""
    figure, axes = _figure(title, "mean answer length (tokens)", "accuracy (%)")
    points: dict[tuple[str, int | None], tuple[float, float]] = {}
    legend: list[tuple[str, dict]] = []  # each entry's label and how its proxy line is drawn
    for i, (label, checkpoints) in enumerate(runs):
        style = {
            "color": CURVE_COLORS[i % len(CURVE_COLORS)],
            "marker": "o",
            "markersize": 5,
            "linewidth": 1.4,
        }
        xs, ys = [m.tokens_mean for m in checkpoints], [100 * m.accuracy for m in checkpoints]
        axes.plot(xs, ys, **style, zorder=2)
        if checkpoints:
            axes.plot(
                xs[-1], ys[-1], marker="o", markersize=10, color=style["color"], linestyle="none", zorder=3
            )
        points.update({(label, m.step): (x, y) for m, x, y in zip(checkpoints, xs, ys, strict=True)})
        legend.append((_short(f"{setting}={label}"), style))
    if base is not None:
        points[("base", None)] = (base.tokens_mean, 100 * base.accuracy)
        style = {"marker": "*", "markersize": 13, "color": "#000000", "linestyle": "none"}
        axes.plot(*points[("base", None)], **style, zorder=3)
        legend.append(("base model", style))
    if not points:  # the page of a sweep no run of which is evaluated yet
        axes.set_xlim(0, 1000)
        axes.set_ylim(0, 100)
        axes.text(0.5, 0.5, "no run evaluated yet", transform=axes.transAxes, ha="center", color="#555555")
        return figure
    on_front = sorted((points[key] for key in front if key in points), key=lambda point: point[0])
    style = {"color": "#555555", "linestyle": "--", "linewidth": 1}
    axes.plot([x for x, _ in on_front], [y for _, y in on_front], **style, zorder=1)
    legend.append(("Pareto front: none both more accurate and shorter", style))
    axes.margins(x=0.15, y=0.12)
    axes.set_xlim(left=0)
    for _, proxy in legend:  # `_legend_below` takes the last lines drawn as its entries
        axes.plot([], [], **proxy)
    _legend_below(figure, axes, [label for label, _ in legend])
    names = {key: key[0] if key[1] is None else f"{key[0]}, step {key[1]}" for key in points}
    _label_points(figure, axes, [(*points[key], names[key]) for key in front if key in points])
    return figure


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


def png(figure: Figure) -> bytes:
    """The figure as PNG bytes, with no metadata (no version, no time): the same chart, the same bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    # The object API, not pyplot: no global state, no GUI backend, safe off the main thread.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=_SIZE_INCHES, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_title(_short(title, 90), fontsize=12)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(color="#EEEEEE", linewidth=0.8)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure, axes


def _legend_below(figure: Figure, axes: Axes, labels: list[str]) -> None:
    """The legend under the plot, outside it (nothing covers the data), in as many columns as fit."""
    if labels:
        columns = max(1, min(len(labels), 700 // (8 * max(len(label) for label in labels) + 40)))
        figure.legend(
            axes.get_lines()[-len(labels) :],
            labels,
            loc="outside lower center",
            ncols=columns,
            frameon=False,
            fontsize=9,
        )


# Where a point's label may go, in order: offsets in points and the text's alignment.
_LABEL_PLACES = (
    (6, 6, "left", "bottom"),
    (6, -6, "left", "top"),
    (-6, 6, "right", "bottom"),
    (-6, -6, "right", "top"),
    (0, 9, "center", "bottom"),
    (0, -9, "center", "top"),
    (9, 0, "left", "center"),
    (-9, 0, "right", "center"),
)


def _label_points(figure: Figure, axes: Axes, labelled: list[tuple[float, float, str]]) -> None:
    """Each label at the first place beside its point that stays inside the plot and overlaps no dot and
    no label placed before it; a point with no such place stays unnamed."""
    from matplotlib.transforms import Bbox

    renderer = figure.canvas.get_renderer()
    figure.draw_without_rendering()  # the layout, so that positions are final
    inside = axes.get_window_extent(renderer)
    dots = [axes.transData.transform((x, y)) for x, y, _ in labelled]
    taken = [Bbox([[x - 5, y - 5], [x + 5, y + 5]]) for x, y in dots]  # each dot, 5 points around
    for x, y, text in labelled:
        for dx, dy, ha, va in _LABEL_PLACES:
            label = axes.annotate(
                _short(text), (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=8
            )
            box = label.get_window_extent(renderer)
            if (
                box.x0 >= inside.x0
                and box.x1 <= inside.x1
                and box.y0 >= inside.y0
                and box.y1 <= inside.y1
                and not any(box.overlaps(other) for other in taken)
            ):
                taken.append(box)
                break
            label.remove()


def _lighter(rgb: tuple[float, float, float], white: float) -> tuple[float, float, float]:
    """`rgb` mixed with `white` parts of white (0: itself, 1: white)."""
    return tuple(channel + (1 - channel) * white for channel in rgb)  # type: ignore[return-value]


def _short(text: str, limit: int = _MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
