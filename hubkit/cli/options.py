"""Click options shared by the commands that read a run and talk to a Hub (push, merge, eval)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hubkit.hub.repo_types import HUB_ENDPOINT

F = TypeVar("F", bound=Callable[..., Any])


def run_options(command: F) -> F:
    """`--run-id`, `--runs-dir`, `--run-dir`, `--base-model`: which run to read (`hubkit.runs.find_run_dir`)."""
    for option in reversed(
        [
            click.option("--run-id", help="The run's id: a directory under --runs-dir."),
            click.option(
                "--runs-dir",
                type=click.Path(file_okay=False, path_type=Path),
                envvar="HUBKIT_RUNS_DIR",
                help="Where runs live.  [default: $HUBKIT_RUNS_DIR or runs/]",
            ),
            click.option(
                "--run-dir",
                type=click.Path(file_okay=False, path_type=Path),
                help="The run directory itself, instead of --run-id.",
            ),
            click.option(
                "--base-model",
                metavar="ORG/NAME",
                help="The base model's Hub id, for runs without hubkit.json whose adapters do not name one.",
            ),
        ]
    ):
        command = option(command)
    return command


def step_options(verb: str) -> Callable[[F], F]:
    """`--steps N,M,...` and `--every N`: which checkpoints a command works on (`select_checkpoints`).

    Args:
        verb: what the command does with them, for the help ("Publish", "Evaluate").
    """

    def decorate(command: F) -> F:
        command = click.option(
            "--every", type=click.IntRange(min=1), help=f"{verb} only steps that are multiples of N."
        )(command)
        return click.option(
            "--steps", callback=parse_steps, metavar="N,M,...", help=f"{verb} only these steps."
        )(command)

    return decorate


def endpoint_option(command: F) -> F:
    """`--endpoint`: the Hub to talk to (`HF_ENDPOINT`, else huggingface.co)."""
    return click.option(
        "--endpoint",
        envvar="HF_ENDPOINT",
        default=HUB_ENDPOINT,
        show_default=True,
        help="The Hub URL (also read from HF_ENDPOINT), e.g. a local `hubkit hub serve`.",
    )(command)


def quiet_option(command: F) -> F:
    """`--quiet`: no progress bars or summaries, only errors."""
    return click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")(command)


def parse_steps(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """Click callback for `--steps N,M,...`: the step numbers, or None when the option is not given."""
    if value is None:
        return None
    message = f"expected comma-separated step numbers like 20,40, got {value!r}"
    try:
        steps = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(message) from None
    if not steps or min(steps) < 0:
        raise click.BadParameter(message)
    return steps
