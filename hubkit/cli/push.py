"""`hubkit push`: options → `PushRequest` → `hubkit.publish.push_run` (or `watch_run`) → printed report."""

from __future__ import annotations

import contextlib
import functools
import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from hubkit.cli.options import RUN, Target, command, endpoint_option, options_of, quiet_option
from hubkit.cli.output import command_console

if TYPE_CHECKING:
    from hubkit.publish import PushProgress, PushReport, PushRequest
    from hubkit.runs.manifest import SweepInfo


@contextlib.contextmanager
def progress_display(console: Console) -> Iterator[PushProgress]:
    """A `PushProgress` that shows stages as lines and merge/upload progress as rich bars."""
    from hubkit.publish import PushProgress

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(
        *columns, TransferSpeedColumn(), TimeRemainingColumn(), console=console, disable=console.quiet
    ) as bars:
        tasks: dict[str, object] = {}

        def bar(name: str) -> Callable[[int, int], None]:
            def update(done: int, total: int) -> None:
                if name not in tasks:
                    tasks[name] = bars.add_task(name, total=total)
                bars.update(tasks[name], completed=done, total=total)  # type: ignore[arg-type]

            return update

        def upload_started(total: int) -> None:
            if total:
                tasks["upload"] = bars.add_task("uploading", total=total)

        def uploaded(num_bytes: int) -> None:
            if "upload" in tasks:
                bars.advance(tasks["upload"], num_bytes)  # type: ignore[arg-type]

        yield PushProgress(
            stage=lambda message: console.print(message, highlight=False),
            merge=bar("merging"),
            gguf=bar("writing GGUF"),
            upload_started=upload_started,
            uploaded=uploaded,
        )


def _sweep(name: str | None, value: str | None, run_dir: Path) -> SweepInfo | None:
    """The sweep `--sweep` and `--sweep-value` name; the varied value from hubkit.json when not given."""
    from hubkit.runs.manifest import MANIFEST_NAME, Manifest, SweepInfo

    if name is None:
        if value is not None:
            raise click.UsageError("--sweep-value goes with --sweep NAME")
        return None
    if value is None:
        recorded = Manifest.load(run_dir).sweep if (run_dir / MANIFEST_NAME).is_file() else None
        if recorded is None:
            raise click.UsageError(
                "the run records no sweep: say what it varies, e.g. --sweep-value length_penalty_weight=0.25"
            )
        return SweepInfo(name, recorded.setting, recorded.value)
    setting, equals, text = value.partition("=")
    if not equals or not text:
        raise click.UsageError("--sweep-value is SETTING=VALUE, e.g. length_penalty_weight=0.25")
    try:
        number: float | str = float(text)
    except ValueError:
        number = text
    return SweepInfo(name, setting.strip(), number)


def _options() -> list[click.Option]:
    from hubkit.publish.request import PushRequest

    return options_of(PushRequest)


@command(
    target=(*RUN, "repo_id", "sweep"),
    repo_id="The adapter repo.  [default: the repo the recipe recorded (--push-to), else <token owner>/<run id>]",
    sweep="The run is one point of the sweep NAME: its repos join the Hub Collection NAME, each noted with "
    "the varied value, final accuracy and mean answer length. Without --run-id or --run-dir: every run "
    "under --runs-dir whose hubkit.json names the sweep, one after another.  "
    "[default: the sweep hubkit.json records]",
    options=_options,
)
@click.option(
    "--sweep-value",
    metavar="SETTING=VALUE",
    help="What this run varies in the sweep, e.g. length_penalty_weight=0.25 (with --sweep, for a run "
    "whose hubkit.json records no sweep).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Keep pushing new checkpoints until the run finishes (Ctrl-C stops); the run folder may not "
    "exist yet.",
)
@click.option(
    "--watch-interval",
    type=click.FloatRange(min=0.05),
    default=30.0,
    show_default=True,
    help="Seconds between looks.",
)
@click.option(
    "--watch-timeout",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="With --watch: give up (exit 1) after SECONDS without a new checkpoint, the first one included.  "
    "[default: wait as long as the run takes]",
)
@endpoint_option
@quiet_option
def push(
    target: Target,
    sweep_value: str | None,
    watch: bool,
    watch_interval: float,
    watch_timeout: float | None,
    endpoint: str,
    quiet: bool,
    **options: Any,
) -> None:
    """Publish a run: every chosen checkpoint as an adapter repo, the merged model, and a Space.

    Every chosen step goes to checkpoints/global_step_N/, the newest also to the root, with the
    tokenizer, hubkit.json, metrics.jsonl and a model card. Only files that differ from the remote
    are uploaded, in one commit per repo. Only known kinds of file are published, each read as its
    kind and written out from what was read; --dry-run lists what is left out and why.

    \b
        $ hubkit push --run-id RUN
        $ hubkit push --run-dir runs/RUN --repo-id me/qwen3-4b-grpo --every 100 --dry-run
        $ hubkit push --run-id RUN --gguf q8_0,bf16
        $ hubkit push --sweep deepscaler-length-penalty --no-merged   # every run of the sweep
    """
    from hubkit.publish import PushRequest, push_run, watch_run

    _check(target, sweep_value, watch, watch_timeout, options)
    console = command_console(quiet)
    folders = _folders(target, watch)
    request = PushRequest(
        run_dir=folders[0],
        repo_id=target.repo_id,
        base_model=target.base_model,
        endpoint=endpoint,
        sweep=None if target.whole_sweep else _sweep(target.sweep, sweep_value, folders[0]),
        **options,
    )
    show = functools.partial(_show, console, request)
    with progress_display(console) as progress:
        if watch:
            # A watcher started beside a trainer (recipes/verl_gdpo/launch.sh) is stopped with SIGTERM:
            # stop as on Ctrl-C, between two pushes' files, removing the staging folder.
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            watch_run(
                request, interval=watch_interval, timeout=watch_timeout, progress=progress, on_report=show
            )
        elif target.whole_sweep:
            for folder in folders:
                console.print(f"Run {folder.name} of the sweep {target.sweep!r}", highlight=False)
                show(push_run(replace(request, run_dir=folder), progress))
        else:
            show(push_run(request, progress))


def _show(console: Console, request: PushRequest, report: PushReport) -> None:
    from hubkit.publish.describe import describe_dry_run, describe_repo, describe_revisions

    if report.dry_run:
        console.print(describe_dry_run(report, request.max_files_per_commit), highlight=False)
        return
    if report.repo_id != request.repo_id:
        console.print(f"Publishing to {report.repo_id}", highlight=False)
    for note in report.notes:
        console.print(note, highlight=False)
    for repo in report.repos:
        console.print(describe_repo(repo), highlight=False)
    branches = describe_revisions(report.revisions)
    if branches:
        console.print(branches, highlight=False)


def _folders(target: Target, watch: bool) -> list[Path]:
    """The run directory, or every run directory of the sweep --sweep names alone."""
    if not target.whole_sweep:
        return [target.find(must_exist=not watch)]
    from hubkit.publish.sweep.collection import check_sweep_runs
    from hubkit.runs.locate import sweep_run_dirs

    folders = sweep_run_dirs(target.sweep, target.runs_dir)
    check_sweep_runs(target.sweep, folders)
    return folders


def _check(
    target: Target, sweep_value: str | None, watch: bool, watch_timeout: float | None, options: dict
) -> None:
    """One line for a combination a push cannot do. `--sweep NAME` alone pushes every run of the sweep:
    each to its own repos, each with its own value."""
    if options["dry_run"] and watch:
        raise click.UsageError("--dry-run and --watch cannot be combined")
    if watch_timeout is not None and not watch:
        raise click.UsageError("--watch-timeout needs --watch")
    if not target.whole_sweep:
        return
    if watch:
        raise click.UsageError("--watch follows one run: give --run-id or --run-dir with --sweep")
    if sweep_value is not None:
        raise click.UsageError("--sweep-value is one run's value: give --run-id or --run-dir with it")
    if target.repo_id or any(options[f"{repo}_repo_id"] for repo in ("merged", "gguf", "space", "samples")):
        raise click.UsageError(
            "every run of a sweep is pushed to repos named for it: drop the --*repo-id options, "
            "or push one run with --run-id"
        )
