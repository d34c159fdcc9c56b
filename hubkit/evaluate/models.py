"""Where the files of an evaluation's models are: each checkpoint's adapter folder and the tokenizer with the
run's chat template (checkpoints are chosen with `hubkit.runs.select_checkpoints`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hubkit.adapters.prepare import prepare_adapter
from hubkit.errors import CheckpointError, EvalError
from hubkit.runs import Checkpoint, Run


def adapter_dirs(
    run: Run, checkpoints: Sequence[Checkpoint], staging_dir: Path, *, published: bool = False
) -> dict[str, Path]:
    """Each checkpoint's PEFT adapter folder, by checkpoint name (``global_step_N``).

    TRL saves loadable adapters and they are read in place, as are a published release's (the push
    normalized them); verl's are normalized (or rebuilt from the FSDP shards) into `staging_dir` by
    `hubkit.adapters.prepare_adapter`, as the push does.

    Raises:
        CheckpointError, AdapterError: a checkpoint has no usable adapter.
    """
    found: dict[str, Path] = {}
    for checkpoint in checkpoints:
        if published:
            if checkpoint.adapter_dir is None:
                raise CheckpointError(f"{checkpoint.name} of {run.manifest.run_id} was not downloaded")
            found[checkpoint.name] = checkpoint.adapter_dir
        elif run.framework == "trl" and checkpoint.adapter_dir is not None:
            found[checkpoint.name] = checkpoint.adapter_dir
        else:
            found[checkpoint.name] = prepare_adapter(run, checkpoint, staging_dir / checkpoint.name).dir
    return found


def tokenizer_dir(run: Run, base_dir: Path) -> Path:
    """The tokenizer (and chat template) the run trained with: its newest checkpoint's, else the base's.

    Raises:
        EvalError: neither has a ``tokenizer_config.json``.
    """
    found = run.tokenizer_dir()
    if found is not None:
        return found
    if (base_dir / "tokenizer_config.json").is_file():
        return base_dir
    raise EvalError(
        f"run {run.manifest.run_id} saved no tokenizer and the base model {run.manifest.base_model} has none"
    )
