"""A small chart drawn with Pillow: a plot area with its axes, ticks and grid, lines, markers, dashed
vertical lines, error bars, labels and a legend, saved as a PNG.

Every push draws its card's charts again, while its adapters upload. matplotlib took 0.5 s to import and
60-90 ms of interpreter time per chart, and the upload threads, which need the interpreter back after every
send, waited for it (docs/design.md, "Charts: drawn, not plotted"). These charts need none of its
generality: this draws one in 12-20 ms of CPU, mostly in Pillow's C code, which releases the interpreter.

Shapes are drawn `SCALE` times larger and reduced with a box filter, which smooths their edges; text is
drawn afterwards at the final size, with the FreeType font bundled in Pillow (Aileron), so every machine
draws the same glyphs. The same chart gives the same bytes.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 700, 360
# The plot area's distance to the image's edges (pixels): room for 9-character tick labels, the axis labels
# and the title.
LEFT, RIGHT, TOP, BOTTOM = 105, 15, 35, 55
SCALE = 3
TEXT_COLOR = "#222222"
FRAME_COLOR = "#444444"
GRID_COLOR = "#E6E6E6"
TICK_FONT, LABEL_FONT, TITLE_FONT, SMALL_FONT = 13, 14, 17, 12
_TICK_LENGTH = 4
_MOST_TICKS = 7


@dataclass(frozen=True)
class Axis:
    """One axis: the data range the plot area spans, and its ticks (inside that range) with their labels."""

    lo: float
    hi: float
    ticks: tuple[float, ...]
    labels: tuple[str, ...]


def nice_step(span: float, most: int = _MOST_TICKS, integer: bool = False) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that puts at most `most` ticks across `span`
    (whole numbers only when `integer`)."""
    raw = span / (most - 1)
    if integer and raw <= 1:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    if power * 10 <= raw:  # log10 of an exact power of ten rounded down by the C library
        power *= 10
    for multiple in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = multiple * power
        if step >= raw * (1 - 1e-9) and (not integer or step == round(step)):
            return step
    return 10.0 * power


def _decimals(step: float) -> int:
    """Decimal places that write every multiple of `step` exactly (0.25 → 2, 0.5 → 1, 20 → 0)."""
    for decimals in range(12):
        if abs(round(step, decimals) - step) <= step * 1e-9:
            return decimals
    return 12


def tick_labels(ticks: Sequence[float], step: float) -> tuple[str, ...]:
    """Tick labels with the same number of decimals, each one distinct; in scientific notation when that is
    shorter and the decimals take more than 9 characters (values of a million and more, steps below 1e-5)."""
    fixed = tuple(f"{t + 0.0:.{_decimals(step)}f}" for t in ticks)  # + 0.0: no "-0"
    longest = max((len(label) for label in fixed), default=0)
    if longest <= 9:
        return fixed
    biggest = max(abs(t) for t in ticks)
    step_exponent = math.floor(math.log10(step))
    # As many digits as tell the step apart at the biggest tick's exponent.
    digits = max(0, math.floor(math.log10(biggest or step)) - step_exponent) + _decimals(
        step / 10.0**step_exponent
    )
    scientific = tuple("0" if t == 0 else f"{t:.{digits}e}" for t in ticks)
    return scientific if max(len(label) for label in scientific) < longest else fixed


def axis_for(values: Sequence[float], *, margin: float = 0.05, integer: bool = False) -> Axis:
    """An axis spanning the finite `values` plus `margin` of their range on each side, ticked at a
    `nice_step` (0 to 1 when none is finite)."""
    finite = [v for v in values if math.isfinite(v)] or [0.0, 1.0]
    lo, hi = min(finite), max(finite)
    one_value_pad = 1.0 if integer else (abs(lo) * 0.05 or 0.5)  # one value: a range around it
    pad = (hi - lo) * margin if hi > lo else one_value_pad
    lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, integer=integer)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return Axis(lo=lo, hi=hi, ticks=tuple(ticks), labels=tick_labels(ticks, step))


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)  # type: ignore[return-value]


def lighter(color: str, amount: float) -> str:
    """`color` mixed with white: 0 keeps it, 1 gives white (a line drawn at partial opacity on white)."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb)


@dataclass(frozen=True)
class LegendEntry:
    """A legend row: a swatch drawn like its data (a line `width` pixels wide, dashed or not, with a dot
    `marker` pixels across unless 0) and its label."""

    label: str
    color: str
    width: float = 2.0
    dashed: bool = False
    marker: float = 0


class Canvas:
    """One chart being drawn: data coordinates on `x` and `y`, drawn in the order the methods are called
    (shapes under text; the frame, ticks, text and legend on top, in `png`).

    Args:
        x: the horizontal axis.
        y: the vertical axis.
    """

    def __init__(self, x: Axis, y: Axis) -> None:
        self.x, self.y = x, y
        self._shapes = Image.new("RGB", (WIDTH * SCALE, HEIGHT * SCALE), "white")
        self._draw = ImageDraw.Draw(self._shapes)
        self._texts: list[tuple[tuple[float, float], str, int, str]] = []  # at, text, size, anchor
        self._occupied: list[tuple[float, float]] = []  # data points in pixels, where a legend should not go
        self._grid()

    # --- coordinates ------------------------------------------------------------------------------

    def px(self, x: float, y: float) -> tuple[float, float]:
        """The pixel (final size) of a data point."""
        width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
        return (
            LEFT + (x - self.x.lo) / (self.x.hi - self.x.lo) * width,
            TOP + (self.y.hi - y) / (self.y.hi - self.y.lo) * height,
        )

    def _big(self, x: float, y: float) -> tuple[float, float]:
        px, py = self.px(x, y)
        return px * SCALE, py * SCALE

    # --- shapes (drawn now, under everything else) -----------------------------------------------

    def _tick_pixels(self) -> tuple[list[int], list[int]]:
        """The whole pixels (final size) of the x ticks' columns and the y ticks' rows: grid lines and tick
        marks both go there, so that they line up."""
        return (
            [round(self.px(tick, self.y.lo)[0]) for tick in self.x.ticks],
            [round(self.px(self.x.lo, tick)[1]) for tick in self.y.ticks],
        )

    def _grid(self) -> None:
        columns, rows = self._tick_pixels()
        for px in columns:
            self._draw.rectangle(
                (px * SCALE, TOP * SCALE, px * SCALE + SCALE - 1, (HEIGHT - BOTTOM) * SCALE), fill=GRID_COLOR
            )
        for py in rows:
            self._draw.rectangle(
                (LEFT * SCALE, py * SCALE, (WIDTH - RIGHT) * SCALE, py * SCALE + SCALE - 1), fill=GRID_COLOR
            )

    def line(
        self, points: Sequence[tuple[float, float]], color: str, width: float, *, marker: float = 0
    ) -> None:
        """A line through `points` (data coordinates), `width` pixels wide, with a dot of `marker` pixels
        across at each point (none when 0). A point with a NaN or infinite value leaves a gap."""
        run: list[tuple[float, float]] = []
        for x, y in [*points, (math.nan, math.nan)]:
            if math.isfinite(x) and math.isfinite(y):
                run.append((x, y))
                continue
            if len(run) > 1:
                self._draw.line(
                    [self._big(*p) for p in run], fill=color, width=round(width * SCALE), joint="curve"
                )
            if marker or len(run) == 1:  # a lone point shows as a dot
                for point in run:
                    self._disc(*point, color, marker or width + 2)
            self._occupy(run)
            run = []

    def dot(self, x: float, y: float, color: str, size: float) -> None:
        """A filled circle `size` pixels across at a data point."""
        self._disc(x, y, color, size)
        self._occupy([(x, y)])

    def _disc(self, x: float, y: float, color: str, size: float) -> None:
        px, py = self._big(x, y)
        radius = size * SCALE / 2
        self._draw.ellipse((px - radius, py - radius, px + radius, py + radius), fill=color)

    def vline(self, x: float, color: str, *, width: float = 1.0, dash: float = 4.0) -> None:
        """A dashed vertical line across the plot area at `x`, `dash` pixels on and off."""
        px, _ = self._big(x, self.y.lo)
        left = round(px - width * SCALE / 2)
        mask = _dashes(max(1, round(width * SCALE)), (HEIGHT - TOP - BOTTOM) * SCALE, round(dash * SCALE))
        self._shapes.paste(color, (left, TOP * SCALE, left + mask.width, TOP * SCALE + mask.height), mask)

    def error_bar(self, x: float, lo: float, hi: float, color: str, *, cap: float = 3.0) -> None:
        """A vertical error bar from `lo` to `hi` at `x`, with caps `cap` pixels to each side."""
        (px, top), (_, bottom) = self._big(x, hi), self._big(x, lo)
        width = SCALE
        self._draw.line((px, top, px, bottom), fill=color, width=width)
        for py in (top, bottom):
            self._draw.line((px - cap * SCALE, py, px + cap * SCALE, py), fill=color, width=width)

    def _occupy(self, points: Sequence[tuple[float, float]]) -> None:
        """Remember where data is drawn: each point, and three points along each segment."""
        pixels = [self.px(x, y) for x, y in points]
        self._occupied.extend(pixels)
        for (x0, y0), (x1, y1) in itertools.pairwise(pixels):
            self._occupied.extend((x0 + (x1 - x0) * f, y0 + (y1 - y0) * f) for f in (0.25, 0.5, 0.75))

    # --- text (drawn in `png`, over the shapes) ---------------------------------------------------

    def text(self, at: tuple[float, float], text: str, *, size: int = SMALL_FONT, anchor: str = "ld") -> None:
        """`text` at a pixel (final size), placed by a Pillow anchor (``ld``: its left end on the baseline)."""
        self._texts.append((at, text, size, anchor))

    def annotate(self, x: float, y: float, text: str, *, dx: float = 5, dy: float = 5) -> None:
        """`text` beside a data point: `dx` pixels right of it and `dy` above it."""
        px, py = self.px(x, y)
        self.text((px + dx, py - dy), text)

    def png(self, title: str, xlabel: str, ylabel: str, legend: Sequence[LegendEntry] = ()) -> bytes:
        """The finished chart: the shapes reduced to the final size, then the frame, ticks, title, axis
        labels, queued text and the legend."""
        image = self._shapes.reduce(SCALE)
        draw = ImageDraw.Draw(image)
        left, right, top, bottom = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM
        draw.rectangle((left, top, right, bottom), outline=FRAME_COLOR)
        font = _font(TICK_FONT)
        columns, rows = self._tick_pixels()
        for px, label in zip(columns, self.x.labels, strict=True):
            draw.line((px, bottom, px, bottom + _TICK_LENGTH), fill=FRAME_COLOR)
            draw.text((px, bottom + _TICK_LENGTH + 2), label, font=font, fill=TEXT_COLOR, anchor="mt")
        for py, label in zip(rows, self.y.labels, strict=True):
            draw.line((left - _TICK_LENGTH, py, left, py), fill=FRAME_COLOR)
            draw.text((left - _TICK_LENGTH - 3, py), label, font=font, fill=TEXT_COLOR, anchor="rm")
        draw.text(((left + right) / 2, top / 2), title, font=_font(TITLE_FONT), fill=TEXT_COLOR, anchor="mm")
        draw.text(
            ((left + right) / 2, bottom + _TICK_LENGTH + TICK_FONT + 10),
            xlabel,
            font=_font(LABEL_FONT),
            fill=TEXT_COLOR,
            anchor="mt",
        )
        widest = max((draw.textlength(label, font=font) for label in self.y.labels), default=0)
        # The y label, turned, just left of the tick labels (at the image's edge if they are long).
        label_centre = max(LABEL_FONT / 2 + 2, left - _TICK_LENGTH - 3 - widest - 8 - LABEL_FONT / 2)
        _vertical_text(image, (label_centre, (top + bottom) / 2), ylabel, _font(LABEL_FONT))
        for at, text, size, anchor in self._texts:
            draw.text(at, text, font=_font(size), fill=TEXT_COLOR, anchor=anchor)
        if legend:
            self._legend(draw, legend)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    def _legend(self, draw: ImageDraw.ImageDraw, entries: Sequence[LegendEntry]) -> None:
        """A boxed legend in the corner of the plot area where `legend_corner` puts it."""
        font = _font(SMALL_FONT)
        swatch, pad, row = 28, 6, SMALL_FONT + 5
        width = pad * 3 + swatch + max(round(draw.textlength(e.label, font=font)) for e in entries)
        height = pad * 2 + row * len(entries)
        x0, y0 = legend_corner(self._occupied, width, height)
        draw.rectangle((x0, y0, x0 + width, y0 + height), fill="white", outline="#CCCCCC")
        for index, entry in enumerate(entries):
            middle = y0 + pad + row * index + row / 2
            start, end = x0 + pad, x0 + pad + swatch
            line_width = max(1, round(entry.width))
            if entry.dashed:
                for dash in range(start, end, 8):
                    draw.line((dash, middle, min(dash + 4, end), middle), fill=entry.color, width=line_width)
            else:
                draw.line((start, middle, end, middle), fill=entry.color, width=line_width)
            if entry.marker:
                radius = entry.marker / 2
                centre = (start + end) / 2
                draw.ellipse(
                    (centre - radius, middle - radius, centre + radius, middle + radius), fill=entry.color
                )
            draw.text((end + pad, middle), entry.label, font=font, fill=TEXT_COLOR, anchor="lm")


def legend_corner(occupied: Sequence[tuple[float, float]], width: int, height: int) -> tuple[int, int]:
    """Where a legend of `width` × `height` pixels goes: the corner of the plot area, 8 pixels in, whose box
    holds the fewest of the `occupied` pixels (upper right, upper left, lower left, lower right on a tie).

    Returns:
        The box's upper left pixel.
    """
    inset = 8
    corners = (
        (WIDTH - RIGHT - inset - width, TOP + inset),
        (LEFT + inset, TOP + inset),
        (LEFT + inset, HEIGHT - BOTTOM - inset - height),
        (WIDTH - RIGHT - inset - width, HEIGHT - BOTTOM - inset - height),
    )

    def covered(corner: tuple[int, int]) -> int:
        x0, y0 = corner
        return sum(1 for px, py in occupied if x0 <= px <= x0 + width and y0 <= py <= y0 + height)

    return min(corners, key=covered)  # min keeps the first of equals


@lru_cache(maxsize=4)
def _dashes(width: int, height: int, dash: int) -> Image.Image:
    """A mask of a dashed vertical line: `dash` pixels on, `dash` off, from the top."""
    mask = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(mask)
    for top in range(0, height, 2 * dash):
        draw.rectangle((0, top, width - 1, min(top + dash, height) - 1), fill=255)
    return mask


def _vertical_text(
    image: Image.Image, centre: tuple[float, float], text: str, font: ImageFont.FreeTypeFont
) -> None:
    """`text` turned a quarter left (read bottom to top), centred on `centre`."""
    left, top, right, bottom = font.getbbox(text, anchor="lt")
    mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
    ImageDraw.Draw(mask).text((1 - left, 1 - top), text, font=font, fill=255, anchor="lt")
    mask = mask.rotate(90, expand=True)
    x, y = round(centre[0] - mask.width / 2), round(centre[1] - mask.height / 2)
    image.paste(TEXT_COLOR, (x, y, x + mask.width, y + mask.height), mask)
