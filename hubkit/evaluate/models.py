"""Which models an evaluation answers with, and where their files are: the base's folder, each checkpoint's
adapter folder, and the tokenizer with the run's chat template."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hubkit.errors import CheckpointError, EvalError
from hubkit.runs import Checkpoint, Run


def select_checkpoints(
    run: Run, steps: Sequence[int] | None = None, every: int | None = None
) -> tuple[Checkpoint, ...]:
    """The complete checkpoints to evaluate: all of them, the listed steps, or the multiples of `every`.

    Args:
        run: the run.
        steps: exact steps; each must be a complete checkpoint.
        every: keep the steps that are multiples of this (with `steps`: of those).

    Returns:
        The checkpoints, by step.

    Raises:
        CheckpointError: a listed step is not a complete checkpoint, or `every` is not positive.
    """
    if every is not None and every <= 0:
        raise CheckpointError(f"--every must be a positive number of steps, got {every}")
    complete = {c.step: c for c in run.checkpoints}
    if steps:
        missing = sorted(set(steps) - set(complete))
        if missing:
            available = ", ".join(str(s) for s in complete) or "none"
            raise CheckpointError(
                f"run {run.manifest.run_id} has no complete checkpoint at step(s) "
                f"{', '.join(map(str, missing))} (complete: {available}): fix --steps"
            )
        chosen = [complete[s] for s in sorted(set(steps))]
    else:
        chosen = list(run.checkpoints)
    return tuple(c for c in chosen if every is None or c.step % every == 0)


def adapter_dirs(run: Run, checkpoints: Sequence[Checkpoint], staging_dir: Path) -> dict[str, Path]:
    """Each checkpoint's PEFT adapter folder, by checkpoint name (``global_step_N``).

    TRL saves loadable adapters and they are read in place; verl's are normalized (or rebuilt from the
    FSDP shards) into `staging_dir` by `hubkit.adapters.prepare_adapter`, as the push does.

    Raises:
        CheckpointError, AdapterError: a checkpoint has no usable adapter.
    """
    found: dict[str, Path] = {}
    for checkpoint in checkpoints:
        if run.framework == "trl" and checkpoint.adapter_dir is not None:
            found[checkpoint.name] = checkpoint.adapter_dir
        else:
            from hubkit.adapters import prepare_adapter  # torch: imported only when needed

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
