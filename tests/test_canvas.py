"""The chart canvas: axis ranges and ticks a reader can trust; no legend over the data, no label over
another or off the image; gaps where a metric diverged."""

from __future__ import annotations

import io
import itertools
import math
import random

import pytest
from eval_results import summary_of_models
from PIL import Image

from hubkit.cards import canvas as canvas_module
from hubkit.cards import plots
from hubkit.cards.canvas import axis_for, nice_step, tick_labels
from hubkit.evaluate.results import (
    Contamination,
    EvalSummary,
    ModelResult,
)

BLUE = (0x00, 0x72, 0xB2)  # plots.CURVE_COLORS[0]


@pytest.mark.parametrize(
    ("span", "integer", "step"),
    [
        (100.0, False, 20.0),
        (0.07, False, 0.02),
        (0.121, False, 0.025),
        (3.0, True, 1.0),
        (0.3, True, 1.0),
        (12.5, True, 5.0),
        (150.0, True, 25.0),
        (7e-7, False, 2e-7),
    ],
)
def test_the_tick_step_is_the_smallest_round_one_that_fits(span, integer, step):
    assert nice_step(span, integer=integer) == pytest.approx(step)


def test_every_axis_spans_its_values_with_at_most_seven_distinct_exact_ticks():
    """Random ranges over 20 orders of magnitude, either sign, integer axes too."""
    generator = random.Random(0)
    for _ in range(3000):
        scale = 10.0 ** generator.uniform(-9, 11)
        values = [generator.uniform(-1, 1) * scale for _ in range(generator.randint(2, 5))]
        integer = generator.random() < 0.3
        if integer:
            values = [round(v) for v in values]
        axis = axis_for(values, integer=integer)
        if len(set(values)) < 2:
            continue
        assert axis.lo < min(values) <= max(values) < axis.hi
        assert 2 <= len(axis.ticks) <= 7, (values, axis)
        assert all(axis.lo <= t <= axis.hi for t in axis.ticks)
        assert len(set(axis.labels)) == len(axis.labels), (values, axis.labels)  # no two alike
        if max(values) - min(values) >= 0.1 * max(abs(v) for v in values):  # not a sliver far from 0
            assert all(len(label) <= 9 for label in axis.labels), axis.labels  # they fit the left margin
        step = axis.ticks[1] - axis.ticks[0]
        for tick, label in zip(axis.ticks, axis.labels, strict=True):
            assert abs(float(label) - tick) <= step * 0.05, (tick, label)  # each says where it is
            if integer:
                assert tick == int(tick)


def test_tick_labels_share_their_decimals_and_never_read_minus_zero():
    assert tick_labels([-0.25, 0.0, 0.25, 0.5], 0.25) == ("-0.25", "0.00", "0.25", "0.50")
    assert tick_labels([-0.0, 1.0], 1.0) == ("0", "1")
    assert tick_labels([2e9, 4e9], 2e9) == ("2e+09", "4e+09")
    assert tick_labels([1.0e-7, 1.5e-7], 0.5e-7) == ("1.0e-07", "1.5e-07")


def test_one_value_gets_a_range_around_it():
    assert axis_for([3], integer=True).ticks == (2.0, 3.0, 4.0)
    flat = axis_for([0.25, 0.25])
    assert flat.lo < 0.25 < flat.hi and "0.25" in {label.rstrip("0") for label in flat.labels}
    assert axis_for([0.0]).lo == -0.5


def _column(canvas: canvas_module.Canvas, image: Image.Image, step: float) -> set[tuple[int, int, int]]:
    """The colours of the image's pixel column at `step`, inside the plot area."""
    _, top, _, bottom = canvas.plot
    x = round(canvas.px(step, canvas.y.lo)[0])
    return {image.getpixel((x, y)) for y in range(round(top) + 2, round(bottom) - 2)}


def test_a_drawn_chart_is_the_png_the_card_shows():
    """Its size, white background, curve colour and dashed checkpoint lines (both on and off)."""
    curve = plots.Curve("reward [reward]", tuple((s, math.log(s)) for s in range(1, 101)))
    chart = plots.Chart("assets/reward.png", "Reward", "reward", (curve,), (50,))
    png = plots.draw_chart(chart)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (canvas_module.WIDTH, canvas_module.HEIGHT)
    assert image.getpixel((2, 2)) == (255, 255, 255)
    column = _column(plots.training_canvas(chart), image, 50)
    assert (0xBB, 0xBB, 0xBB) in column and (255, 255, 255) in column  # dashed: the line's gray and gaps
    assert BLUE in set(image.getdata())
    assert plots.draw_chart(chart) == png  # the same chart, the same bytes


def test_a_nan_or_infinite_value_leaves_a_gap_and_does_not_stretch_the_axis():
    """A diverged step logs NaN (or inf): the curve is drawn around it, on the axis of the finite values."""
    assert axis_for([0.5, math.nan, 0.6, math.inf, -math.inf]) == axis_for([0.5, 0.6])
    assert axis_for([math.nan]) == axis_for([0.0, 1.0])
    points = tuple(
        (s, math.nan if s in (40, 41) else (math.inf if s == 70 else s / 100)) for s in range(1, 101)
    )
    chart = plots.Chart("assets/kl.png", "KL", "KL", (plots.Curve("kl [kl]", points),), ())
    image = Image.open(io.BytesIO(plots.draw_chart(chart))).convert("RGB")
    drawn = plots.training_canvas(chart)
    assert BLUE in _column(drawn, image, 20) and BLUE in _column(drawn, image, 60)
    assert BLUE in _column(drawn, image, 90)
    assert BLUE not in _column(drawn, image, 40.5)  # the gap between steps 39 and 42


def test_a_chart_needs_one_to_seven_curves():
    curve = plots.Curve("reward [reward]", ((1, 0.5),))
    with pytest.raises(ValueError, match="0 curves"):
        plots.draw_chart(plots.Chart("assets/reward.png", "Reward", "reward", (), (1,)))
    with pytest.raises(ValueError, match="8 curves"):
        plots.draw_chart(plots.Chart("assets/reward.png", "Reward", "reward", (curve,) * 8, (1,)))


# --- nothing over the data, nothing off the image ---------------------------------------------------------


def _curve(label: str, f, noise: float = 0.03, seed: int = 0) -> plots.Curve:
    generator = random.Random(seed)
    return plots.Curve(label, tuple((s, f(s) + generator.gauss(0, noise)) for s in range(1, 201)))


PUBLISHED = tuple(range(20, 201, 20))
# The reward and three components over 200 steps, as TRL logs them: the chart whose legend, in a corner of
# the plot, covered the curves.
REWARD = plots.Chart(
    "assets/reward.png",
    "Reward",
    "mean reward",
    (
        _curve("reward (mean) [reward]", lambda s: 0.15 + 0.7 * (1 - math.exp(-s / 50))),
        _curve(
            "correctness [rewards/correctness/mean]", lambda s: 0.1 + 0.6 * (1 - math.exp(-s / 60)), seed=1
        ),
        _curve("format [rewards/format/mean]", lambda s: 0.3 + 0.65 * (1 - math.exp(-s / 20)), seed=2),
        _curve("length penalty [rewards/length_penalty/mean]", lambda s: -0.2 + 0.15 * s / 200, seed=3),
    ),
    PUBLISHED,
)
# Seven curves, one with a label wider than the image, of values in the millions.
CROWDED_LEGEND = plots.Chart(
    "assets/reward.png",
    "Reward",
    "mean reward",
    tuple(
        _curve(
            f"component {i} [rewards/component_{i}{'_and_more' * (30 if i == 6 else 0)}/mean]",
            lambda s: 1e6 * s,
        )
        for i in range(7)
    ),
    PUBLISHED,
)


def _model(step: int | None, accuracy: float, tokens: float, n: int = 200) -> ModelResult:
    return ModelResult(
        name="base" if step is None else f"global_step_{step}",
        step=step,
        n=n,
        correct=round(accuracy * n),
        accuracy=accuracy,
        ci95=(max(0.0, accuracy - 0.06), min(1.0, accuracy + 0.06)),
        tokens_mean=tokens,
        tokens_median=tokens,
        tokens_max=int(2 * tokens),
        truncated_share=0.0,
    )


def _summary(models: list[ModelResult]) -> EvalSummary:
    return summary_of_models(
        "charts",
        models,
        problems={"contamination": Contamination(checked=True, overlap=0, train_problems=5)},
        generation={"max_new_tokens": 256},
    )


# Ten checkpoints, most within a few tokens and points of each other, two at one point, the last near the
# right edge: the chart whose labels overlapped and ran off the image ("step 40, step 6…").
CROWDED_EVAL = _summary(
    [_model(None, 0.31, 240.0)]
    + [
        _model(step, accuracy, tokens)
        for step, accuracy, tokens in (
            (20, 0.42, 228.0),
            (40, 0.55, 201.0),
            (60, 0.55, 201.0),
            (80, 0.58, 199.0),
            (100, 0.60, 196.5),
            (120, 0.61, 197.2),
            (140, 0.62, 195.0),
            (160, 0.62, 194.8),
            (180, 0.63, 193.9),
            (200, 0.63, 243.0),
        )
    ]
)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("chart", [REWARD, CROWDED_LEGEND], ids=["reward", "seven-curves"])
def test_the_legend_covers_no_data_point(chart):
    drawn = plots.training_canvas(chart)
    box = drawn.legend_box
    assert box is not None and not _overlap(box, drawn.plot)  # under the plot area, where no data is
    assert len(drawn.points) == sum(len(c.points) for c in chart.curves)
    for x, y in drawn.points:
        assert not (box[0] <= x <= box[2] and box[1] <= y <= box[3]), (x, y, box)


@pytest.mark.parametrize(
    "drawn",
    [
        lambda: plots.training_canvas(REWARD),
        lambda: plots.training_canvas(CROWDED_LEGEND),
        lambda: plots.accuracy_canvas(CROWDED_EVAL),
    ],
    ids=["reward", "seven-curves", "accuracy"],
)
def test_every_text_lies_inside_the_image_and_none_overlaps_another(drawn):
    """Title, axis labels, tick labels, legend and point labels: each inside the image, no two overlapping;
    the PNG's outermost pixels all white (nothing runs off it)."""
    chart = drawn()
    boxes = chart.text_boxes()
    assert len(boxes) > 10
    for text, (x0, y0, x1, y1) in boxes:
        assert x0 >= 0 and y0 >= 0 and x1 <= canvas_module.WIDTH and y1 <= canvas_module.HEIGHT, text
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not _overlap(box_a, box_b), (a, b)
    image = Image.open(io.BytesIO(chart.png())).convert("RGB")
    width, height = image.size
    edge = [(x, y) for x in range(width) for y in (0, height - 1)]
    edge += [(x, y) for y in range(height) for x in (0, width - 1)]
    assert {image.getpixel(xy) for xy in edge} == {(255, 255, 255)}


def test_point_labels_overlap_no_dot_and_stay_inside_the_plot():
    drawn = plots.accuracy_canvas(CROWDED_EVAL)
    left, top, right, bottom = drawn.plot
    dots = [(m.tokens_mean, 100 * m.accuracy) for m in CROWDED_EVAL.models]
    labels = [item for item in drawn.texts if item.size == canvas_module.SMALL_FONT and item.box[3] < bottom]
    for item in labels:
        x0, y0, x1, y1 = item.box
        assert left <= x0 and x1 <= right and top <= y0 and y1 <= bottom, item
        for x, y in (drawn.px(*dot) for dot in dots):
            assert not _overlap(item.box, (x - 4, y - 4, x + 4, y + 4)), (item.text, x, y)
    names = {item.text for item in labels}
    assert {"base", "step 200", "step 20", "steps 40, 60"} <= names  # the base and the newest first
    assert len(names) < len(dots)  # a crowded chart leaves some out rather than overlap them


def test_a_label_that_would_run_off_the_plot_goes_elsewhere():
    """Three checkpoints at the longest answers share one long label: to the right of them, where a label
    goes first, it would run off the plot."""
    edge = _summary([_model(None, 0.3, 100.0)] + [_model(s, 0.5, 300.0) for s in (100, 150, 200)])
    drawn = plots.accuracy_canvas(edge)
    (label,) = [item for item in drawn.texts if item.text == "steps 100, 150, 200"]
    left, top, right, bottom = drawn.plot
    x, _ = drawn.px(300.0, 50.0)
    assert x + 7 + (label.box[2] - label.box[0]) > right  # no room on the right
    assert left <= label.box[0] and label.box[2] <= right and top <= label.box[1] and label.box[3] <= bottom


def test_every_point_is_labelled_where_there_is_room():
    spread = _summary(
        [_model(None, 0.3, 300.0)] + [_model(s, 0.3 + s / 1000, 300.0 - s) for s in (50, 100, 200)]
    )
    drawn = plots.accuracy_canvas(spread)
    labels = {item.text for item in drawn.texts if item.size == canvas_module.SMALL_FONT}
    assert {"base", "step 50", "step 100", "step 200"} <= labels
    tiny = _summary([_model(None, 0.25, 40.0, 4), _model(1, 1.0, 21.5, 4), _model(3, 1.0, 21.5, 4)])
    labels = {
        item.text for item in plots.accuracy_canvas(tiny).texts if item.size == canvas_module.SMALL_FONT
    }
    assert {"base", "steps 1, 3"} <= labels


def test_models_at_one_point_share_a_label():
    assert plots.point_label([None]) == "base"
    assert plots.point_label([40]) == "step 40"
    assert plots.point_label([None, 40]) == "base, step 40"
    assert plots.point_label([60, 40]) == "steps 40, 60"
    assert plots.point_label([100, 20, 40, 60, 80]) == "5 steps, 20 to 100"
