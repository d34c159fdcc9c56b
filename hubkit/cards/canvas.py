"""A small chart drawn with Pillow: a plot area with its axes, ticks and grid, lines, markers, dashed
vertical lines, error bars, labels and a legend, saved as a PNG.

Every push draws its card's charts again, while its adapters upload. matplotlib in the push's interpreter
took 0.5 s to import and 60-90 ms of interpreter time per chart, which the upload threads waited for; in a
process of its own it still took adding one seed checkpoint to the loopback Hub to 2.19× `hf upload`
(docs/design.md, "Charts: drawn, not plotted"). This draws a chart in 9-21 ms of CPU, mostly in Pillow's C
code, which releases the interpreter.

Nothing covers the data and nothing leaves the image: the legend sits under the plot, in as many columns as
fit; a label too long for the image is shortened; a tick label at an end of the x axis moves in; a point's
label goes only where it overlaps no dot and no other label (`Canvas.label_points`). `Canvas.texts` says
where each text lands.

Shapes are drawn `SCALE` times larger and reduced with a box filter, which smooths their edges; text is
drawn afterwards at the final size, with the FreeType font bundled in Pillow (Aileron), so every machine
draws the same glyphs. The same chart gives the same bytes.
"""

from __future__ import annotations

import io
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
# The legend, under the plot: rows of entries, each a swatch, a gap and its label; columns apart by a spacing.
_LEGEND_ROW, _LEGEND_PAD, _LEGEND_SWATCH, _LEGEND_GAP, _LEGEND_SPACING = SMALL_FONT + 6, 5, 28, 6, 18
# Where a point's label may go, in the order tried: its offset from the point (pixels) and a Pillow anchor
# (``lm``: the label's left middle there, so it sits to the right of the point).
LABEL_PLACES = (
    (7, 0, "lm"),
    (0, -7, "mb"),
    (-7, 0, "rm"),
    (0, 7, "mt"),
    (5, -5, "lb"),
    (5, 5, "lt"),
    (-5, -5, "rb"),
    (-5, 5, "rt"),
)


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
    """A legend row: a swatch drawn like its data (a line `width` pixels wide, dashed or not, none when 0,
    with a dot `marker` pixels across unless 0) and its label."""

    label: str
    color: str
    width: float = 2.0
    dashed: bool = False
    marker: float = 0


Box = tuple[float, float, float, float]  # left, top, right, bottom, in pixels of the final image


@dataclass(frozen=True)
class TextItem:
    """One text of a chart: where it is anchored (a Pillow anchor: ``mt`` puts its middle top there), and the
    box it covers."""

    text: str
    at: tuple[float, float]
    size: int
    anchor: str
    box: Box


class Canvas:
    """One chart being drawn: data coordinates on `x` and `y`, the plot area, and its texts.

    Shapes are drawn in the order the methods are called; the frame, tick marks, texts and legend go on top,
    in `png`. Every text is placed when it is added, so `texts` tells where each one lands: the title above
    the plot, the axis labels and tick labels beside it, the legend's rows under it (in as many columns as
    fit the image's width), and labels beside data points where they overlap nothing (`label_points`).

    Args:
        x: the horizontal axis.
        y: the vertical axis.
        title: the chart's title.
        xlabel: the horizontal axis's label.
        ylabel: the vertical axis's label (drawn turned a quarter left).
        legend: the legend's entries (none: no legend).
    """

    def __init__(
        self, x: Axis, y: Axis, *, title: str, xlabel: str, ylabel: str, legend: Sequence[LegendEntry] = ()
    ) -> None:
        self.x, self.y = x, y
        columns, labels = _legend_columns(legend)
        rows = math.ceil(len(labels) / columns) if labels else 0
        legend_height = rows * _LEGEND_ROW + (_LEGEND_PAD if rows else 0)
        self.plot: Box = (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM - legend_height)
        self.points: list[tuple[float, float]] = []  # every data point drawn, in pixels
        self.texts: list[TextItem] = []
        self._dots: list[Box] = []  # the dots drawn, where no point's label goes
        self._shapes = Image.new("RGB", (WIDTH * SCALE, HEIGHT * SCALE), "white")
        self._draw = ImageDraw.Draw(self._shapes)
        self._grid()
        self._axis_texts(title, xlabel)
        self._ylabel = _fit(ylabel, LABEL_FONT, HEIGHT - 10)
        self._legend = tuple(zip(legend, labels, strict=True))
        # Each legend entry's swatch: its left end, on its row's middle.
        self._legend_at: list[tuple[float, float]] = []
        self.legend_box: Box | None = self._place_legend(columns, rows) if legend else None

    # --- coordinates ------------------------------------------------------------------------------

    def px(self, x: float, y: float) -> tuple[float, float]:
        """The pixel (final size) of a data point."""
        left, top, right, bottom = self.plot
        return (
            left + (x - self.x.lo) / (self.x.hi - self.x.lo) * (right - left),
            top + (self.y.hi - y) / (self.y.hi - self.y.lo) * (bottom - top),
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
        left, top, right, bottom = (round(edge) * SCALE for edge in self.plot)
        columns, rows = self._tick_pixels()
        for px in columns:
            self._draw.rectangle((px * SCALE, top, px * SCALE + SCALE - 1, bottom), fill=GRID_COLOR)
        for py in rows:
            self._draw.rectangle((left, py * SCALE, right, py * SCALE + SCALE - 1), fill=GRID_COLOR)

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
            self.points.extend(self.px(*p) for p in run)
            run = []

    def dot(self, x: float, y: float, color: str, size: float) -> None:
        """A filled circle `size` pixels across at a data point (no point's label covers it)."""
        self._disc(x, y, color, size)
        px, py = self.px(x, y)
        self.points.append((px, py))
        reach = size / 2 + 1
        self._dots.append((px - reach, py - reach, px + reach, py + reach))

    def _disc(self, x: float, y: float, color: str, size: float) -> None:
        px, py = self._big(x, y)
        radius = size * SCALE / 2
        self._draw.ellipse((px - radius, py - radius, px + radius, py + radius), fill=color)

    def vline(self, x: float, color: str, *, width: float = 1.0, dash: float = 4.0) -> None:
        """A dashed vertical line across the plot area at `x`, `dash` pixels on and off."""
        _, top, _, bottom = (round(edge) * SCALE for edge in self.plot)
        px, _ = self._big(x, self.y.lo)
        left = round(px - width * SCALE / 2)
        mask = _dashes(max(1, round(width * SCALE)), bottom - top, round(dash * SCALE))
        self._shapes.paste(color, (left, top, left + mask.width, top + mask.height), mask)

    def error_bar(self, x: float, lo: float, hi: float, color: str, *, cap: float = 3.0) -> None:
        """A vertical error bar from `lo` to `hi` at `x`, with caps `cap` pixels to each side."""
        (px, top), (_, bottom) = self._big(x, hi), self._big(x, lo)
        width = SCALE
        self._draw.line((px, top, px, bottom), fill=color, width=width)
        for py in (top, bottom):
            self._draw.line((px - cap * SCALE, py, px + cap * SCALE, py), fill=color, width=width)

    # --- texts (placed now, drawn in `png` over the shapes) -----------------------------------------

    def _text(self, at: tuple[float, float], text: str, size: int, anchor: str) -> TextItem:
        left, top, right, bottom = _font(size).getbbox(text, anchor=anchor)
        item = TextItem(text, at, size, anchor, (at[0] + left, at[1] + top, at[0] + right, at[1] + bottom))
        self.texts.append(item)
        return item

    def _axis_texts(self, title: str, xlabel: str) -> None:
        """The title, the x label and the tick labels (a label at an end of the x axis is moved in as far as
        the image's edge needs)."""
        left, top, right, bottom = self.plot
        font = _font(TICK_FONT)
        columns, rows = self._tick_pixels()
        for px, label in zip(columns, self.x.labels, strict=True):
            half = font.getlength(label) / 2
            x = min(max(px, half + 2), WIDTH - half - 2)
            self._text((x, bottom + _TICK_LENGTH + 2), label, TICK_FONT, "mt")
        for py, label in zip(rows, self.y.labels, strict=True):
            self._text((left - _TICK_LENGTH - 3, py), label, TICK_FONT, "rm")
        self._text(((left + right) / 2, top / 2), _fit(title, TITLE_FONT, WIDTH - 10), TITLE_FONT, "mm")
        at = ((left + right) / 2, bottom + _TICK_LENGTH + TICK_FONT + 10)
        self._text(at, _fit(xlabel, LABEL_FONT, WIDTH - 10), LABEL_FONT, "mt")

    def label_points(self, labels: Sequence[tuple[float, float, str]]) -> None:
        """Label data points, in the order given: each at the first of `LABEL_PLACES` where it stays inside
        the plot area and overlaps no dot and no label placed before it. A label with no such place is
        left out (a crowded chart names the points it has room for)."""
        left, top, right, bottom = self.plot
        room = (left + 2, top + 2, right - 2, bottom - 2)  # 2 pixels off the frame
        taken = list(self._dots)
        for x, y, text in labels:
            px, py = self.px(x, y)
            for dx, dy, anchor in LABEL_PLACES:
                x0, y0, x1, y1 = _font(SMALL_FONT).getbbox(text, anchor=anchor)
                box = (px + dx + x0, py + dy + y0, px + dx + x1, py + dy + y1)
                inside = room[0] <= box[0] and box[2] <= room[2] and room[1] <= box[1] and box[3] <= room[3]
                if inside and not any(_overlap(box, other) for other in taken):
                    taken.append(self._text((px + dx, py + dy), text, SMALL_FONT, anchor).box)
                    break

    def _place_legend(self, columns: int, rows: int) -> Box:
        """The legend's entries under the x label, centred, filling each row left to right; its box."""
        font = _font(SMALL_FONT)
        width = max(_LEGEND_SWATCH + _LEGEND_GAP + font.getlength(label) for _, label in self._legend)
        x0 = (WIDTH - (columns * width + (columns - 1) * _LEGEND_SPACING)) / 2
        y0 = HEIGHT - _LEGEND_PAD - rows * _LEGEND_ROW
        for index, (_, label) in enumerate(self._legend):
            row, column = divmod(index, columns)
            start = x0 + column * (width + _LEGEND_SPACING)
            middle = y0 + row * _LEGEND_ROW + _LEGEND_ROW / 2
            self._legend_at.append((start, middle))
            self._text((start + _LEGEND_SWATCH + _LEGEND_GAP, middle), label, SMALL_FONT, "lm")
        return (x0, y0, x0 + columns * width + (columns - 1) * _LEGEND_SPACING, y0 + rows * _LEGEND_ROW)

    def _ylabel_box(self) -> tuple[tuple[float, float], Box]:
        """Where the turned y label goes: just left of the tick labels (at the image's edge if they are long)."""
        left, top, _, bottom = self.plot
        widest = max((_font(TICK_FONT).getlength(label) for label in self.y.labels), default=0)
        centre_x = max(LABEL_FONT / 2 + 2, left - _TICK_LENGTH - 3 - widest - 8 - LABEL_FONT / 2)
        x0, y0, x1, y1 = _font(LABEL_FONT).getbbox(self._ylabel, anchor="lt")
        half_length, half_height = (x1 - x0) / 2, (y1 - y0) / 2
        centre = (centre_x, (top + bottom) / 2)
        return centre, (
            centre_x - half_height,
            centre[1] - half_length,
            centre_x + half_height,
            centre[1] + half_length,
        )

    def text_boxes(self) -> list[tuple[str, Box]]:
        """Every text `png` draws and the box it covers: those placed so far and the turned y label."""
        _, box = self._ylabel_box()
        return [(item.text, item.box) for item in self.texts] + [(self._ylabel, box)]

    def png(self) -> bytes:
        """The finished chart: the shapes reduced to the final size, then the frame, tick marks, texts and the
        legend's swatches."""
        image = self._shapes.reduce(SCALE)
        draw = ImageDraw.Draw(image)
        left, top, right, bottom = self.plot
        draw.rectangle((left, top, right, bottom), outline=FRAME_COLOR)
        columns, rows = self._tick_pixels()
        for px in columns:
            draw.line((px, bottom, px, bottom + _TICK_LENGTH), fill=FRAME_COLOR)
        for py in rows:
            draw.line((left - _TICK_LENGTH, py, left, py), fill=FRAME_COLOR)
        for item in self.texts:
            draw.text(item.at, item.text, font=_font(item.size), fill=TEXT_COLOR, anchor=item.anchor)
        centre, _ = self._ylabel_box()
        _vertical_text(image, centre, self._ylabel, _font(LABEL_FONT))
        for (entry, _), at in zip(self._legend, self._legend_at, strict=True):
            _swatch(draw, entry, at)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()


def _swatch(draw: ImageDraw.ImageDraw, entry: LegendEntry, at: tuple[float, float]) -> None:
    """A legend entry's swatch, `_LEGEND_SWATCH` pixels wide, from `at` (its left end, on the row's middle)."""
    start, middle = at
    end = start + _LEGEND_SWATCH
    line_width = max(1, round(entry.width))
    if entry.dashed:
        for dash in range(round(start), round(end), 8):
            draw.line((dash, middle, min(dash + 4, end), middle), fill=entry.color, width=line_width)
    elif entry.width:
        draw.line((start, middle, end, middle), fill=entry.color, width=line_width)
    if entry.marker:
        radius, centre = entry.marker / 2, (start + end) / 2
        draw.ellipse((centre - radius, middle - radius, centre + radius, middle + radius), fill=entry.color)


def _legend_columns(entries: Sequence[LegendEntry]) -> tuple[int, list[str]]:
    """How many columns of legend entries fit the image's width (at most one per entry), and their labels
    (shortened with "…" where one alone is wider than the image)."""
    if not entries:
        return 1, []
    room = WIDTH - 2 * _LEGEND_PAD
    labels = [_fit(entry.label, SMALL_FONT, room - _LEGEND_SWATCH - _LEGEND_GAP) for entry in entries]
    font = _font(SMALL_FONT)
    width = max(_LEGEND_SWATCH + _LEGEND_GAP + font.getlength(label) for label in labels)
    fitting = int((room + _LEGEND_SPACING) // (width + _LEGEND_SPACING))
    return max(1, min(len(entries), fitting)), labels


def _fit(text: str, size: int, room: float) -> str:
    """`text`, shortened with "…" until it is at most `room` pixels wide."""
    font = _font(size)
    if font.getlength(text) <= room:
        return text
    while len(text) > 1 and font.getlength(text + "…") > room:
        text = text[:-1]
    return text.rstrip() + "…"


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


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
