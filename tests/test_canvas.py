"""The chart canvas: axis ranges and ticks a reader can trust, and where the legend goes."""

from __future__ import annotations

import io
import math
import random

import pytest
from PIL import Image

from hubkit.cards import canvas, plots
from hubkit.cards.canvas import axis_for, nice_step, tick_labels


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


def test_the_legend_goes_to_the_corner_the_data_leaves_free():
    plot_left, plot_top = canvas.LEFT, canvas.TOP
    plot_right, plot_bottom = canvas.WIDTH - canvas.RIGHT, canvas.HEIGHT - canvas.BOTTOM
    upper_right, upper_left, lower_left, lower_right = [
        (plot_right - 8 - 200, plot_top + 8),
        (plot_left + 8, plot_top + 8),
        (plot_left + 8, plot_bottom - 8 - 40),
        (plot_right - 8 - 200, plot_bottom - 8 - 40),
    ]
    assert canvas.legend_corner([], 200, 40) == upper_right
    rising = [(x, plot_bottom - (x - plot_left) * 0.5) for x in range(plot_left, plot_right, 5)]
    assert canvas.legend_corner(rising, 200, 40) == upper_left  # high on the right, low on the left
    falling = [(x, plot_top + (x - plot_left) * 0.5) for x in range(plot_left, plot_right, 5)]
    assert canvas.legend_corner(falling, 200, 40) == upper_right
    along_the_top = [(x, plot_top + 20) for x in range(plot_left, plot_right, 5)]
    assert canvas.legend_corner(along_the_top, 200, 40) == lower_left
    top_and_lower_left = [*along_the_top, (plot_left + 50, plot_bottom - 20)]
    assert canvas.legend_corner(top_and_lower_left, 200, 40) == lower_right


def _column_of_step(step: float) -> int:
    """The pixel column of `step` on a chart of steps 1 to 100: their range plus 5 % of it on each side."""
    lo, span = 1 - 99 * 0.05, 99 * 1.1
    return round(canvas.LEFT + (step - lo) / span * (canvas.WIDTH - canvas.LEFT - canvas.RIGHT))


def test_a_drawn_chart_is_the_png_the_card_shows():
    """Its size, white background, curve colour and dashed checkpoint lines (both on and off)."""
    curve = plots.Curve("reward [reward]", tuple((s, math.log(s)) for s in range(1, 101)))
    png = plots.draw_chart(plots.Chart("assets/reward.png", "Reward", "reward", (curve,), (50,)))
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (canvas.WIDTH, canvas.HEIGHT)
    assert image.getpixel((2, 2)) == (255, 255, 255)
    x = _column_of_step(50)
    column = [image.getpixel((x, y)) for y in range(canvas.TOP + 2, canvas.HEIGHT - canvas.BOTTOM - 2)]
    gray = {(0xBB, 0xBB, 0xBB)}
    assert gray & set(column) and (255, 255, 255) in column  # dashed: both the line's gray and gaps
    assert any(pixel == (0x00, 0x72, 0xB2) for pixel in image.getdata())


def test_a_nan_or_infinite_value_leaves_a_gap_and_does_not_stretch_the_axis():
    """A diverged step logs NaN (or inf): the curve is drawn around it, on the axis of the finite values."""
    assert axis_for([0.5, math.nan, 0.6, math.inf, -math.inf]) == axis_for([0.5, 0.6])
    assert axis_for([math.nan]) == axis_for([0.0, 1.0])
    points = tuple(
        (s, math.nan if s in (40, 41) else (math.inf if s == 70 else s / 100)) for s in range(1, 101)
    )
    png = plots.draw_chart(plots.Chart("assets/kl.png", "KL", "KL", (plots.Curve("kl [kl]", points),), ()))
    image = Image.open(io.BytesIO(png)).convert("RGB")
    blue = (0x00, 0x72, 0xB2)

    def column_has_curve(step: float) -> bool:
        x = _column_of_step(step)
        return blue in {image.getpixel((x, y)) for y in range(canvas.TOP, canvas.HEIGHT - canvas.BOTTOM)}

    assert column_has_curve(20) and column_has_curve(60) and column_has_curve(90)
    assert not column_has_curve(40.5)  # the gap between steps 39 and 42


def test_a_chart_needs_one_to_seven_curves():
    curve = plots.Curve("reward [reward]", ((1, 0.5),))
    with pytest.raises(ValueError, match="0 curves"):
        plots.draw_chart(plots.Chart("assets/reward.png", "Reward", "reward", (), (1,)))
    with pytest.raises(ValueError, match="8 curves"):
        plots.draw_chart(plots.Chart("assets/reward.png", "Reward", "reward", (curve,) * 8, (1,)))
