"""What the command line prints from a run or a release reaches the terminal with its control characters
escaped: a run id holding an OSC 52 clipboard write, rich markup or a bidi override is shown, not obeyed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import push_argv, run_cli

from hubkit.cli.output import VisibleFormatter
from hubkit.runs.manifest import Manifest
from hubkit.visible import visible
from tests.support.runs import TINY_SHAPES, make_run

CLIPBOARD_WRITE = "\x1b]52;c;aGVsbG8=\x07"
HOSTILE_ID = f"run{CLIPBOARD_WRITE}[bold]x[link=evil]y\u202eevil\x9b2J"


def _no_control_characters(text: str) -> None:
    assert not [c for c in text if (ord(c) < 32 and c not in "\n") or 0x7F <= ord(c) <= 0x9F], repr(text)
    assert "\u202e" not in text


def test_visible_writes_control_characters_out() -> None:
    assert visible("a\x1bb\x07c\x9bd\u202ee\nf\tg") == "a\\x1bb\\x07c\\x9bd\\u202ee\nf\tg"
    assert visible("a\nb\tc", one_line=True) == "a\\x0ab\\x09c"
    assert visible("plain: /x [bold]y[/bold]") == "plain: /x [bold]y[/bold]"


def test_a_hostile_run_id_is_shown_not_obeyed(tmp_path: Path, tiny_qwen3, local_hub, capsys) -> None:
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    Manifest.load(run_dir).with_updates(run_id=HOSTILE_ID).save(run_dir)
    assert run_cli([*push_argv(run_dir, "hubkit-test/hostile-id", local_hub.endpoint), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    _no_control_characters(out + err)
    assert visible(HOSTILE_ID) in out  # shown as written, markup included


def test_an_error_quoting_a_hostile_name_is_one_visible_line(tmp_path: Path, capsys) -> None:
    missing = tmp_path / f"runs{CLIPBOARD_WRITE}\nsecond line"
    assert run_cli(["push", "--run-dir", str(missing), "--dry-run"]) == 1
    err = capsys.readouterr().err
    _no_control_characters(err.rstrip("\n"))
    assert err.count("\n") == 1 and err.startswith("Error: ")


def test_warnings_are_formatted_visible_on_one_line() -> None:
    record = logging.LogRecord("hubkit", logging.WARNING, __file__, 1, "repo %s", (HOSTILE_ID + "\nx",), None)
    shown = VisibleFormatter("%(message)s").format(record)
    _no_control_characters(shown)
    assert "\n" not in shown


@pytest.mark.parametrize("argv", [["reward", "show", f"me/r{CLIPBOARD_WRITE}"]])
def test_a_hostile_repo_id_in_an_error_is_escaped(argv: list[str], capsys) -> None:
    assert run_cli(argv) == 1
    captured = capsys.readouterr()
    _no_control_characters((captured.out + captured.err).rstrip("\n"))
