"""`hubkit merge`: merge one checkpoint of a run into its base model, into a local folder."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from hubkit.cli.options import Target, command, endpoint_option, quiet_option
from hubkit.cli.output import command_console


@command()
@click.option("--step", type=click.IntRange(min=0), help="The checkpoint to merge.  [default: the last]")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The merged model's folder (must not exist or be empty).",
)
@endpoint_option
@quiet_option
def merge(target: Target, step: int | None, out: Path, endpoint: str, quiet: bool) -> None:
    """Merge a checkpoint's LoRA adapter into the base model's weights.

    The base's safetensors shards are fetched through the Hub cache and merged one tensor at a
    time; the folder also gets the base's config, generation config and tokenizer. It appears only
    once complete.

    \b
        $ hubkit merge --run-id RUN --out merged/
        $ hubkit merge --run-dir runs/RUN --step 200 --out merged-200/
    """
    from hubkit.hub.auth import resolve_token
    from hubkit.merge.checkpoint import merge_checkpoint

    console = command_console(quiet)
    run = target.load(steps=None if step is None else [step])
    token = resolve_token(endpoint, required=False)
    with tempfile.TemporaryDirectory(prefix="hubkit-merge-") as staging:
        columns = (TextColumn("merging"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, disable=quiet) as progress:
            task = progress.add_task("merge", total=None)
            merged_step, result = merge_checkpoint(
                run,
                step,
                Path(staging),
                out,
                endpoint=endpoint,
                token=token,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
    console.print(
        f"Merged step {merged_step} of {run.manifest.run_id} into {run.manifest.base_model}: "
        f"{result.merged_modules} modules, {len(result.shards)} shard(s), {result.dtype} -> {result.out_dir}",
        highlight=False,
    )
