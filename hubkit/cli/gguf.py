"""`hubkit gguf`: a merged model, or a run's checkpoint merged on the way, as GGUF files in a local folder."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from hubkit.cli.options import Target, command, endpoint_option, quiet_option
from hubkit.cli.output import command_console

if TYPE_CHECKING:
    from hubkit.runs import Run


@command()
@click.option(
    "--model-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A merged model folder to export, instead of a run's checkpoint.",
)
@click.option(
    "--step", type=click.IntRange(min=0), help="The run's checkpoint to merge.  [default: the last]"
)
@click.option(
    "--types",
    default="q8_0",
    show_default=True,
    help="Comma-separated GGUF types: bf16, f16, q8_0, and with hubkit[gguf-quant] the k-quants "
    "q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q5_k_s.",
)
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="The folder for the files."
)
@click.option("--name", help="The files' name and general.name.  [default: the run id, or the folder's name]")
@endpoint_option
@quiet_option
def gguf(
    target: Target,
    model_dir: Path | None,
    step: int | None,
    types: str,
    out: Path,
    name: str | None,
    endpoint: str,
    quiet: bool,
) -> None:
    """Write GGUF files for llama.cpp, Ollama and LM Studio, one per type, streamed tensor by tensor.

    From a run, its checkpoint is first merged into the base model (fetched through the Hub cache) in a
    temporary folder. Every check (architecture, tokenizer, tensor names) is made before anything is
    written; each file appears complete or not at all, as OUT/NAME-TYPE.gguf.

    \b
        $ hubkit gguf --run-id RUN --types q8_0,bf16 --out gguf/
        $ hubkit gguf --model-dir merged/ --base-model Qwen/Qwen3-4B --out gguf/
        $ llama-cli -m gguf/RUN-Q8_0.gguf
    """
    from hubkit.publish.gguf_repo import require_gguf_py

    if model_dir is not None and target.run_given:
        raise click.UsageError("give --model-dir or a run (--run-id/--run-dir), not both")
    require_gguf_py()
    from hubkit.export import GGUFMetadata, export_gguf

    console = command_console(quiet)
    type_names = [part for part in types.split(",") if part.strip()]
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with (
        Progress(*columns, console=console, disable=quiet) as progress,
        tempfile.TemporaryDirectory(prefix="hubkit-gguf-") as staging,
    ):

        def bar(description: str) -> Callable[[int, int], None]:
            task = progress.add_task(description, total=None)
            return lambda done, total: progress.update(task, completed=done, total=total)

        base_model = target.base_model
        if model_dir is None:
            run = target.load()
            name, base_model = name or run.manifest.run_id, run.manifest.base_model
            model_dir = _merge_checkpoint(run, step, type_names, out, name, Path(staging), endpoint, bar)
        metadata = GGUFMetadata(name=name or model_dir.resolve().name, base_model=_hub_id(base_model))
        result = export_gguf(model_dir, out, type_names, metadata, progress=bar("writing GGUF"))
    for file in result.files:
        console.print(f"{file.file_type:>5}  {file.size / 1e9:6.2f} GB  {file.path}", highlight=False)


def _merge_checkpoint(
    run: Run,
    step: int | None,
    type_names: list[str],
    out: Path,
    name: str,
    staging: Path,
    endpoint: str,
    bar: Callable[[str], Callable[[int, int], None]],
) -> Path:
    """Merge the run's checkpoint into `staging` once the export is known to be possible from the base
    (the merged model has the base's architecture, tokenizer and tensor names); returns the merged folder."""
    from hubkit.export import GGUFMetadata, plan_gguf_export
    from hubkit.hub.auth import resolve_token
    from hubkit.merge.checkpoint import merge_checkpoint

    _, result = merge_checkpoint(
        run,
        step,
        staging / "adapters",
        staging / "merged",
        endpoint=endpoint,
        token=resolve_token(endpoint, required=False),
        # Every refusal of the export, from the base (same architecture, tokenizer and names), first.
        check=lambda plan: plan_gguf_export(plan.base_dir, out, type_names, GGUFMetadata(name=name)),
        progress=bar("merging"),
    )
    return result.out_dir


def _hub_id(base_model: str | None) -> str | None:
    # A run's base may be a local folder: its path must not reach the file.
    if base_model is None or Path(base_model).exists() or base_model.count("/") != 1:
        return None
    return base_model
