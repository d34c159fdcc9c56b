"""What the command line prints. Run ids, repo names, reward names, notes and messages come from run
directories and releases, which are untrusted (`hubkit.visible`): `echo` and `TerminalConsole` make
everything they print visible (and rich markup is off: ``[link=...]`` in a
run id stays text). Errors print on one line: their newlines are escaped too.
"""

from __future__ import annotations

import logging
from typing import Any

import click
from rich.console import Console

from hubkit.visible import visible


def echo(text: str, err: bool = False, one_line: bool = False) -> None:
    """`click.echo` of `text` made `visible`."""
    click.echo(visible(text, one_line), err=err)


class TerminalConsole(Console):
    """A rich `Console` that prints strings `visible` and without markup."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)


def command_console(quiet: bool) -> TerminalConsole:
    """A command's console; the Hub client's progress bars off, as hubkit shows its own (one bar per push,
    not one per file)."""
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    return TerminalConsole(quiet=quiet, soft_wrap=True)


class VisibleFormatter(logging.Formatter):
    """Log records (warnings quote repo ids and file names) formatted `visible`, one line each."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record), one_line=True)


def log_visibly() -> None:
    """Format the warnings this process prints by default (Python's last-resort handler, which writes to the
    current stderr when nothing else handles a record) through `VisibleFormatter`."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(VisibleFormatter("%(message)s"))
