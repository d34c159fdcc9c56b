"""The options generated from the request dataclasses (`hubkit.cli.options`): each field's help is its
option's, parsing no option gives the dataclass's own defaults, and `hubkit --help` imports no library."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import click
import pytest

from hubkit.cli.eval import eval_command
from hubkit.cli.push import push
from hubkit.evaluate.evaluation import EvalRequest
from hubkit.publish import PushRequest
from tests.helpers import run_cli


@pytest.mark.parametrize(("command", "request_type"), [(push, PushRequest), (eval_command, EvalRequest)])
def test_every_field_with_a_help_is_an_option_with_that_help(command, request_type) -> None:
    helps = {p.name: p.help for p in command.params if isinstance(p, click.Option)}
    described = [f for f in fields(request_type) if "help" in f.metadata]
    assert described and all(helps[f.name] == f.metadata["help"] for f in described)


def _request_options(command: click.Command, request_type: type, argv: list[str]) -> dict:
    params = command.make_context(command.name, argv).params
    return {f.name: params[f.name] for f in fields(request_type) if "help" in f.metadata}


def test_no_option_given_is_the_request_s_own_defaults() -> None:
    assert PushRequest(Path("run"), **_request_options(push, PushRequest, [])) == PushRequest(Path("run"))
    assert EvalRequest(**_request_options(eval_command, EvalRequest, [])) == EvalRequest()


def test_options_become_the_request_s_field_types() -> None:
    argv = ["--steps", "20, 40", "--gguf", "q8_0,bf16", "--no-samples", "--max-files-per-commit", "7"]
    request = PushRequest(Path("run"), **_request_options(push, PushRequest, argv))
    assert (request.steps, request.gguf, request.samples, request.max_files_per_commit) == (
        (20, 40),
        ("Q8_0", "BF16"),
        False,
        7,
    )
    assert EvalRequest(**_request_options(eval_command, EvalRequest, ["--no-base"])).include_base is False
    for bad in ("20,x", "-20", ","):
        with pytest.raises(click.BadParameter):
            push.make_context("push", ["--steps", bad])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--sweep", "s", "--repo-id", "me/r"], "--repo-id cannot go with --sweep: "),
        (["eval", "--sweep", "s", "--run-id", "r"], "--run-id cannot go with --sweep: "),
        (["push", "--sweep", "s", "--gguf-repo-id", "me/r"], "drop the --*repo-id options"),
        (["gguf", "--model-dir", ".", "--run-id", "r", "--out", "o"], "give --model-dir or a run"),
    ],
)
def test_a_combination_a_command_cannot_read_is_one_line(argv, message, capsys) -> None:
    assert run_cli(argv) == 2
    lines = capsys.readouterr().err.splitlines()  # click's usage, then the error on one line
    assert any(line.startswith("Error: ") and message in line for line in lines)


def test_hubkit_help_imports_no_library() -> None:
    # hubkit.publish alone takes 0.28 s to import: the commands' options are generated when they are parsed.
    code = "import sys; from hubkit.cli import main; main(['--help']); print(sorted(sys.modules))"
    modules = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'hubkit.cli.push'" in modules
    assert "'hubkit.publish'" not in modules and "'hubkit.evaluate'" not in modules
