"""A card's charts drawn with matplotlib: the figure of each `hubkit.cards.plots` chart, and its PNG.

Every figure is 700 × 360 pixels (7 × 3.6 inches at 100 dpi), drawn in matplotlib's default style (a
user's matplotlibrc changes nothing) with the DejaVu Sans font matplotlib ships, and saved without the
PNG's "Software" entry: the same chart gives the same bytes wherever the same matplotlib draws it.

Nothing covers the data and nothing leaves the image: a training chart's legend sits below its plot, in
as many columns as fit the image's width; the accuracy chart labels a point only where its label overlaps
no point and no other label, inside the plot, and its checkpoints are shaded by step (a colour bar reads
the step of one left unlabelled).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox

from hubkit.cards.plots import CHECKPOINT_COLOR, CURVE_COLORS, AccuracyChart, Chart, ModelPoint

WIDTH, HEIGHT, DPI = 7.0, 3.6, 100  # inches, and pixels per inch: 700 × 360 pixels
# matplotlib's defaults, with text a little smaller than its 10 points (the charts are 7 inches wide).
STYLE = {
    "font.size": 9,
    "axes.titlesize": 11,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#E6E6E6",
    "grid.linewidth": 0.8,
}
CHECKPOINT_LINE = {"color": CHECKPOINT_COLOR, "linewidth": 0.8, "linestyle": (0, (4, 4))}  # 4 on, 4 off
# Each curve is drawn thinner than the one before (points), so a curve equal to an earlier one (TRL's reward
# and a single component) still shows both colours.
LINE_WIDTHS = (3.6, 2.6, 1.7, 1.2)
MARKERS_UP_TO = 30  # points drawn as dots too when a curve has at most this many (a 1-step run is visible)
# The accuracy chart's checkpoints, light (early) to dark (late); the base in the second curve colour.
STEP_COLORS = LinearSegmentedColormap.from_list("steps", ["#9ECAE1", "#08306B"])
BASE_COLOR = CURVE_COLORS[1]
PATH_COLOR = "#7FB8D8"  # the line through the checkpoints in step order: CURVE_COLORS[0], half white
MODEL_MARKER = 40  # the accuracy chart's dots: area in points squared (7 points across)
LABEL_SIZE = 8
# Where a point's label may go, in the order tried: offset in points, and which side of it the label is on.
LABEL_PLACES = (
    (6, 0, "left", "center"),
    (0, 6, "center", "bottom"),
    (-6, 0, "right", "center"),
    (0, -6, "center", "top"),
    (5, 5, "left", "bottom"),
    (5, -5, "left", "top"),
    (-5, 5, "right", "bottom"),
    (-5, -5, "right", "top"),
)


def png(chart: Chart | AccuracyChart) -> bytes:
    """`chart` drawn as a PNG.

    Raises:
        ValueError: a training chart has more curves than `CURVE_COLORS`, or none.
    """
    buffer = io.BytesIO()
    with matplotlib.style.context(["default", STYLE]):
        _figure(chart).savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def figure(chart: Chart | AccuracyChart) -> Figure:
    """`chart`'s figure, laid out: the extents of its artists are those `png` saves.

    Raises:
        ValueError: a training chart has more curves than `CURVE_COLORS`, or none.
    """
    with matplotlib.style.context(["default", STYLE]):
        drawn = _figure(chart)
        drawn.draw_without_rendering()
    return drawn


def _figure(chart: Chart | AccuracyChart) -> Figure:
    return _training_figure(chart) if isinstance(chart, Chart) else _accuracy_figure(chart)


def _new_figure() -> tuple[Figure, FigureCanvasAgg]:
    drawn = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    return drawn, FigureCanvasAgg(drawn)


def _freeze_layout(drawn: Figure) -> None:
    """Lay `drawn` out once and keep it so: what is placed afterwards is placed on the final axes."""
    drawn.draw_without_rendering()
    drawn.set_layout_engine("none")


# --- training curves ------------------------------------------------------------------------------------


def _training_figure(chart: Chart) -> Figure:
    """Curves over training steps, dashed lines at the published checkpoints, the legend below."""
    if not chart.curves or len(chart.curves) > len(CURVE_COLORS):
        raise ValueError(f"{chart.path}: {len(chart.curves)} curves, 1 to {len(CURVE_COLORS)} colours")
    drawn, canvas = _new_figure()
    axes = drawn.add_subplot()
    handles = []
    if chart.marked_steps:  # one collection of lines from the plot's bottom (0) to its top (1)
        axes.vlines(
            chart.marked_steps,
            0,
            1,
            transform=axes.get_xaxis_transform(),
            colors=CHECKPOINT_LINE["color"],
            linewidths=CHECKPOINT_LINE["linewidth"],
            linestyles=CHECKPOINT_LINE["linestyle"],
        )
        handles.append(Line2D([], [], label="published checkpoint", **CHECKPOINT_LINE))
    for index, (curve, color) in enumerate(zip(chart.curves, CURVE_COLORS, strict=False)):
        steps = [step for step, _ in curve.points]
        values = [value if math.isfinite(value) else math.nan for _, value in curve.points]
        width = LINE_WIDTHS[min(index, len(LINE_WIDTHS) - 1)]
        dots = None if len(values) <= MARKERS_UP_TO else _lone_points(values)
        (line,) = axes.plot(
            steps,
            values,
            color=color,
            linewidth=width,
            marker="o" if dots != [] else None,
            markersize=width + 2.5,
            markevery=dots,
            label=curve.label,
        )
        handles.append(line)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(title=chart.title, xlabel="training step", ylabel=chart.ylabel)
    _legend_below(drawn, canvas, handles)
    return drawn


def _lone_points(values: Sequence[float]) -> list[int]:
    """The indices of finite values with no finite neighbour: a line through them alone draws nothing."""
    finite = [math.isfinite(v) for v in values]
    return [
        i
        for i, ok in enumerate(finite)
        if ok and not (i > 0 and finite[i - 1]) and not (i + 1 < len(finite) and finite[i + 1])
    ]


def _legend_below(drawn: Figure, canvas: FigureCanvasAgg, handles: list[Line2D]) -> None:
    """The legend under the plot, in the most columns (up to one per entry) that fit the image's width."""
    renderer = canvas.get_renderer()
    room = drawn.bbox.width - 10  # pixels, a margin of 5 on each side
    for columns in range(len(handles), 0, -1):
        legend = drawn.legend(handles=handles, loc="outside lower center", ncols=columns, frameon=False)
        if columns == 1 or legend.get_window_extent(renderer).width <= room:
            return
        legend.remove()


# --- accuracy versus answer length ------------------------------------------------------------------------


def _accuracy_figure(chart: AccuracyChart) -> Figure:
    """One dot per model with its 95 % interval; the checkpoints joined in step order and shaded by step."""
    drawn, canvas = _new_figure()
    axes = drawn.add_subplot()
    points = chart.points
    axes.errorbar(
        [p.tokens_mean for p in points],
        [p.accuracy for p in points],
        yerr=([p.accuracy - p.low for p in points], [p.high - p.accuracy for p in points]),
        fmt="none",
        ecolor=CHECKPOINT_COLOR,
        elinewidth=1,
        capsize=3,
    )
    checkpoints = [p for p in points if p.step is not None]
    xs, ys = [p.tokens_mean for p in checkpoints], [p.accuracy for p in checkpoints]
    if len(checkpoints) > 1:
        axes.plot(xs, ys, color=PATH_COLOR, linewidth=1)
        steps = [p.step for p in checkpoints]
        dots = axes.scatter(xs, ys, c=steps, cmap=STEP_COLORS, s=MODEL_MARKER, zorder=3)
        bar = drawn.colorbar(dots, ax=axes, label="training step", pad=0.02, aspect=30)
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    elif checkpoints:
        axes.scatter(xs, ys, color=CURVE_COLORS[0], s=MODEL_MARKER, zorder=3)
    base = [p for p in points if p.step is None]
    axes.scatter(
        [p.tokens_mean for p in base], [p.accuracy for p in base], color=BASE_COLOR, s=MODEL_MARKER, zorder=3
    )
    axes.margins(0.15, 0.1)
    axes.set(title=chart.title, xlabel="mean answer length (tokens)", ylabel=chart.ylabel)
    _freeze_layout(drawn)
    _label_points(axes, canvas, points)
    return drawn


def _label_points(axes: Axes, canvas: FigureCanvasAgg, points: Sequence[ModelPoint]) -> None:
    """Label each point ("base", "step 40"; models at one point share a label) at the first of
    `LABEL_PLACES` where the label stays inside the plot and overlaps no dot and no label placed before:
    the base first, then the checkpoints from the last one back. A label with no such place is left out."""
    renderer = canvas.get_renderer()
    at: dict[tuple[float, float], list[int | None]] = {}
    for p in points:
        at.setdefault((p.tokens_mean, p.accuracy), []).append(p.step)
    radius = math.sqrt(MODEL_MARKER) / 2 * DPI / 72 + 1  # a dot's half width in pixels, and one more
    taken = [
        Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)
        for x, y in axes.transData.transform(list(at))
    ]
    inside = axes.get_window_extent(renderer).padded(-2)
    order = sorted(at.items(), key=lambda item: (None not in item[1], -max(s or 0 for s in item[1])))
    for point, steps in order:
        for dx, dy, ha, va in LABEL_PLACES:
            label = axes.annotate(
                _label_text(steps),
                point,
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                fontsize=LABEL_SIZE,
            )
            box = label.get_window_extent(renderer)
            if _within(box, inside) and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            label.remove()


def _label_text(steps: Sequence[int | None]) -> str:
    """ "base", "step 40", "base, step 40", "steps 40, 60", "5 steps, 20 to 100"."""
    names = ["base"] if None in steps else []
    numbers = sorted(s for s in steps if s is not None)
    if len(numbers) == 1:
        names.append(f"step {numbers[0]}")
    elif 1 < len(numbers) <= 3:
        names.append("steps " + ", ".join(map(str, numbers)))
    elif numbers:
        names.append(f"{len(numbers)} steps, {numbers[0]} to {numbers[-1]}")
    return ", ".join(names)


def _within(box: Bbox, outer: Bbox) -> bool:
    return outer.x0 <= box.x0 and box.x1 <= outer.x1 and outer.y0 <= box.y0 and box.y1 <= outer.y1
