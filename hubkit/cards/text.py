"""How values are written in a card: numbers, sizes, durations, Markdown table cells and code blocks."""

from __future__ import annotations

import math
import re
from datetime import datetime

MISSING = "–"  # a value the run did not record at that place (never shown as 0)


def number(value: float | int | None) -> str:
    """A metric value: integers as integers, others to 4 significant digits; None as `MISSING`."""
    if value is None:
        return MISSING
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def setting(value: object) -> str:
    """A configuration value exactly as recorded (``5e-05`` stays ``5e-05``); lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return ", ".join(setting(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def percent(share: float) -> str:
    """A share in [0, 1] as a percentage with one decimal (``0.705`` → ``70.5 %``)."""
    return f"{100 * share:.1f} %"


def size(num_bytes: int | None) -> str:
    """A byte count as the Hub shows it (decimal units): ``840 B``, ``75.8 KB``, ``1.2 GB``."""
    if num_bytes is None:
        return MISSING
    if num_bytes < 1000:
        return f"{num_bytes} B"
    units = ("KB", "MB", "GB", "TB")
    power = min(len(units), int(math.log10(num_bytes) // 3))
    return f"{num_bytes / 1000**power:.1f} {units[power - 1]}"


def duration(seconds: float) -> str:
    """A wall time: ``45 s``, ``12 min``, ``3 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def parse_time(stamp: str | None) -> datetime | None:
    """An ISO 8601 time from the manifest (``2026-02-23T18:26:38Z``), or None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def prose(text: object) -> str:
    """Free text recorded by a run (a filter, a metric's description) safe in Markdown: ``<answer>`` would
    otherwise be read as an HTML tag and vanish."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", str(text))


def cell(text: object) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, line breaks as spaces."""
    return re.sub(r"\s*\n\s*", " ", str(text)).replace("|", "\\|")


# What can open inline markup (a link, an image, HTML, an entity, emphasis, code) or end a table cell.
_INLINE_MARKUP = re.compile(r"[\\`*_\[\]<>!&|~]")
# What a renderer turns into a link by itself: a URL's scheme, a www. host, an e-mail address.
_AUTOLINK = re.compile(r"(?i):(?=//)|(?<=\bwww)\.|@")
# What starts a block at a line's start: a heading, a list item, a quote.
_BLOCK_START = re.compile(r"^(?:\d*(?=[.)](?:\s|$))|(?=[#+=-]))")


def literal(text: object) -> str:
    """Text shown exactly as typed, in one line, wherever it lands (a list, a table cell, a sentence):
    every character that could start a link, an image, HTML or other markup is escaped. For what a card
    reads from outside the run (a Collection's notes, a sibling's card) and what a model wrote."""
    flat = " ".join(str(text).split())
    flat = _INLINE_MARKUP.sub(lambda m: "\\" + m[0], flat)
    flat = _AUTOLINK.sub(lambda m: "\\" + m[0], flat)
    start = _BLOCK_START.match(flat)
    return flat if start is None else flat[: start.end()] + "\\" + flat[start.end() :]


def code(text: object) -> str:
    """Inline code that survives backticks inside `text`."""
    text = str(text)
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str, language: str = "") -> str:
    """A fenced code block holding `text` verbatim, its fence longer than any backtick run inside."""
    ticks = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks}{language}\n{text.rstrip(chr(10))}\n{ticks}"
