"""What the command line prints. Run ids, repo names, reward names, notes and messages come from run
directories and releases, which are untrusted: a string holding terminal escapes (an OSC 52 clipboard write,
a cursor move, a bidi override) must reach the terminal as visible text, not as a command to it.

`visible` escapes control characters (C0, DEL, C1 and Unicode's bidi controls) as ``\\xNN`` / ``\\uNNNN``;
`echo` and `TerminalConsole` apply it to everything they print (and rich markup is off: ``[link=...]`` in a
run id stays text). Errors print on one line: their newlines are escaped too.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import click
from rich.console import Console

_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile(f"[{_CONTROL}]")
_CONTROL_OR_NEWLINE_RE = re.compile(f"[{_CONTROL}\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, one_line: bool = False) -> str:
    """`text` with every control character written out (also tabs and newlines when `one_line`)."""
    return (_CONTROL_OR_NEWLINE_RE if one_line else _CONTROL_RE).sub(_escape, text)


def echo(text: str, err: bool = False, one_line: bool = False) -> None:
    """`click.echo` of `text` made `visible`."""
    click.echo(visible(text, one_line), err=err)


class TerminalConsole(Console):
    """A rich `Console` that prints strings `visible` and without markup."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)


class VisibleFormatter(logging.Formatter):
    """Log records (warnings quote repo ids and file names) formatted `visible`, one line each."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record), one_line=True)


def log_visibly() -> None:
    """Format the warnings this process prints by default (Python's last-resort handler, which writes to the
    current stderr when nothing else handles a record) through `VisibleFormatter`."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(VisibleFormatter("%(message)s"))
