"""`hubkit push`: options → `PushRequest` → `hubkit.publish.push_run` (or `watch_run`) → printed report."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

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

from hubkit.cli.options import endpoint_option, quiet_option, run_options, step_options
from hubkit.cli.output import TerminalConsole

if TYPE_CHECKING:
    from hubkit.publish import PushProgress
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


def _also_to_its_repo(name: str, help: str, repo: str, suffix: str | None = None) -> Callable:
    """``--NAME/--no-NAME`` (on by default) and ``--NAME-repo-id``: one more repo of the release."""

    def decorate(command: Callable) -> Callable:
        default = f"<repo-id>-{suffix or name}"
        command = click.option(
            f"--{name}-repo-id", metavar="OWNER/NAME", help=f"{repo}.  [default: {default}]"
        )(command)
        return click.option(f"--{name}/--no-{name}", default=True, show_default=True, help=help)(command)

    return decorate


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


@click.command()
@run_options
@click.option(
    "--repo-id",
    metavar="OWNER/NAME",
    help="The adapter repo.  [default: the repo the recipe recorded (--push-to), else <token owner>/<run id>]",
)
@step_options("Publish")
@click.option("--private", is_flag=True, help="Create the repos private (if the push creates them).")
@click.option("--dry-run", is_flag=True, help="Print the plan (repos, files, sizes); send nothing.")
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
@_also_to_its_repo(
    "merged",
    "Also merge the newest pushed checkpoint into the base model and push it to its own repo "
    "(with --watch: once the run has finished).",
    "The merged model's repo",
)
@click.option(
    "--gguf",
    metavar="TYPES",
    help="Also write the merged model as GGUF files of these comma-separated types (q8_0, bf16, f16; "
    "the k-quants q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s/m/l, q4_k_s, q5_k_s with hubkit[gguf-quant]) "
    "and push them to their own repo, for llama.cpp, Ollama and LM Studio.",
)
@click.option("--gguf-repo-id", metavar="OWNER/NAME", help="The GGUF files' repo.  [default: <repo-id>-GGUF]")
@click.option(
    "--gguf-lora",
    is_flag=True,
    help="Also write every pushed checkpoint as a GGUF LoRA (lora/) beside the base model's GGUF files of the "
    "--gguf types (base/), for llama.cpp's --lora and Ollama's ADAPTER.",
)
@_also_to_its_repo(
    "space",
    "Also create or update the Gradio Space comparing the base model with every checkpoint.",
    "The Space's repo",
    suffix="demo",
)
@click.option(
    "--space-hardware",
    metavar="FLAVOR",
    help="The Space's suggested hardware (e.g. cpu-basic, t4-small).  [default: zero-a10g (ZeroGPU)]",
)
@_also_to_its_repo(
    "samples",
    "Also publish the samples dataset: every evaluated answer and the training completions the "
    "framework saved (when the run has any).",
    "The samples dataset",
)
@click.option(
    "--checkpoints-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Publish checkpoints from outside the run directory: the folder the run's checkpoints_dir "
    "links to (a scratch disk). Without it such a run is refused.",
)
@click.option(
    "--sweep",
    "sweep_name",
    metavar="NAME",
    help="The run is one point of the sweep NAME: its repos join the Hub Collection NAME, each noted with "
    "the varied value, final accuracy and mean answer length. Without --run-id or --run-dir: every run "
    "under --runs-dir whose hubkit.json names the sweep, one after another.  "
    "[default: the sweep hubkit.json records]",
)
@click.option(
    "--sweep-value",
    metavar="SETTING=VALUE",
    help="What this run varies in the sweep, e.g. length_penalty_weight=0.25 (with --sweep, for a run "
    "whose hubkit.json records no sweep).",
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    default=15 * 60.0,
    show_default=True,
    metavar="SECONDS",
    help="The longest the push waits for the Hub's rate limit to reset (it says until when); a later "
    "reset stops it in one line saying how many commits are left and when to run it again.",
)
@click.option(
    "--max-files-per-commit",
    type=click.IntRange(min=1),
    default=100,  # hubkit.publish.split.MAX_FILES_PER_COMMIT
    show_default=True,
    metavar="N",
    help="The most files one commit holds (the Hub recommends at most 100): a first push of many "
    "checkpoints is split into several commits, the checkpoint folders first, the card and hubkit.json last.",
)
@click.option(
    "--verify/--no-verify",
    default=True,
    help="Before committing the merged model, load it and the adapter as users do and compare their prompt "
    "ids, end tokens and logits on a few held-out prompts; a mismatch refuses the push.  [default: verify]",
)
@endpoint_option
@quiet_option
def push(
    run_id: str | None,
    runs_dir: Path | None,
    run_dir: Path | None,
    base_model: str | None,
    repo_id: str | None,
    steps: tuple[int, ...] | None,
    every: int | None,
    private: bool,
    dry_run: bool,
    watch: bool,
    watch_interval: float,
    watch_timeout: float | None,
    merged: bool,
    merged_repo_id: str | None,
    gguf: str | None,
    gguf_repo_id: str | None,
    gguf_lora: bool,
    space: bool,
    space_repo_id: str | None,
    space_hardware: str | None,
    samples: bool,
    samples_repo_id: str | None,
    checkpoints_dir: Path | None,
    sweep_name: str | None,
    sweep_value: str | None,
    max_wait: float,
    max_files_per_commit: int,
    verify: bool,
    endpoint: str,
    quiet: bool,
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
    from huggingface_hub.utils import disable_progress_bars

    from hubkit.publish import PushRequest, push_run, watch_run
    from hubkit.publish.describe import describe_dry_run, describe_repo, describe_revisions
    from hubkit.publish.sweep.collection import check_sweep_runs
    from hubkit.runs import find_run_dir
    from hubkit.runs.locate import sweep_run_dirs

    if dry_run and watch:
        raise click.UsageError("--dry-run and --watch cannot be combined")
    if watch_timeout is not None and not watch:
        raise click.UsageError("--watch-timeout needs --watch")
    whole_sweep = sweep_name is not None and run_id is None and run_dir is None
    if whole_sweep:
        _check_sweep_options(watch, sweep_value, repo_id, merged_repo_id, gguf_repo_id, space_repo_id)
    console = TerminalConsole(quiet=quiet, soft_wrap=True)
    disable_progress_bars()  # hubkit shows its own progress (one bar per push, not one per file)
    if whole_sweep:
        folders = sweep_run_dirs(sweep_name, runs_dir)
        check_sweep_runs(sweep_name, folders)
    else:
        folders = [find_run_dir(run_id, runs_dir, run_dir, must_exist=not watch)]
    found = folders[0]
    request = PushRequest(
        run_dir=found,
        repo_id=repo_id,
        base_model=base_model,
        steps=steps,
        every=every,
        private=private,
        merged=merged,
        merged_repo_id=merged_repo_id,
        gguf=tuple(part for part in (gguf or "").split(",") if part.strip()),
        gguf_repo_id=gguf_repo_id,
        gguf_lora=gguf_lora,
        space=space,
        space_repo_id=space_repo_id,
        space_hardware=space_hardware,
        samples=samples,
        samples_repo_id=samples_repo_id,
        endpoint=endpoint,
        dry_run=dry_run,
        checkpoints_dir=checkpoints_dir,
        sweep=None if whole_sweep else _sweep(sweep_name, sweep_value, found),
        max_wait=max_wait,
        verify=verify,
        max_files_per_commit=max_files_per_commit,
    )

    def show(report) -> None:
        if report.dry_run:
            console.print(describe_dry_run(report, request.max_files_per_commit), highlight=False)
            return
        if report.repo_id != repo_id:
            console.print(f"Publishing to {report.repo_id}", highlight=False)
        for note in report.notes:
            console.print(note, highlight=False)
        for repo in report.repos:
            console.print(describe_repo(repo), highlight=False)
        branches = describe_revisions(report.revisions)
        if branches:
            console.print(branches, highlight=False)

    with progress_display(console) as progress:
        if watch:
            # A watcher started beside a trainer (recipes/verl_gdpo/launch.sh) is stopped with SIGTERM:
            # stop as on Ctrl-C, between two pushes' files, removing the staging folder.
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            watch_run(
                request, interval=watch_interval, timeout=watch_timeout, progress=progress, on_report=show
            )
        elif whole_sweep:
            for folder in folders:
                console.print(f"Run {folder.name} of the sweep {sweep_name!r}", highlight=False)
                show(push_run(replace(request, run_dir=folder), progress))
        else:
            show(push_run(request, progress))


def _check_sweep_options(watch: bool, sweep_value: str | None, *repo_ids: str | None) -> None:
    """`--sweep NAME` alone pushes every run of the sweep: each to its own repos, each with its own value."""
    if watch:
        raise click.UsageError("--watch follows one run: give --run-id or --run-dir with --sweep")
    if sweep_value is not None:
        raise click.UsageError("--sweep-value is one run's value: give --run-id or --run-dir with it")
    if any(repo_ids):
        raise click.UsageError(
            "every run of a sweep is pushed to repos named for it: drop the --*repo-id options, "
            "or push one run with --run-id"
        )
