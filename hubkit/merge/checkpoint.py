"""One checkpoint of a run merged into its base model: the one orchestration `hubkit push`, `hubkit merge`
and `hubkit gguf` share (the step chosen, its adapter prepared, every check of the merge planned, then the
merge written).

    step, result = merge_checkpoint(run, 200, staging, out_dir, endpoint=..., token=...)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hubkit.adapters.prepare import PreparedAdapter, prepare_adapters
from hubkit.merge.base_files import fetch_base_snapshot
from hubkit.merge.lora_adapter import load_lora_adapter
from hubkit.merge.plan import MergePlan, plan_merge
from hubkit.merge.stream import MergeResult, ProgressCallback, execute_plan
from hubkit.merge.vocabulary import checkpoint_tokenizer
from hubkit.runs import Run, refuse_no_checkpoint, select_checkpoints
from hubkit.safety import VetContext


def plan_checkpoint_merge(
    run: Run, adapter: PreparedAdapter, *, endpoint: str | None = None, token: str | None = None
) -> MergePlan:
    """Every check of merging a prepared adapter into the run's base model (fetched through the Hub
    cache), made before anything is written.

    Raises:
        MergeError, BaseModelMismatchError, AdapterError: as `hubkit.merge.plan_merge`.
        UnsafeFileError: the checkpoint's tokenizer, which a resized vocabulary's merge takes, must not be
            published.
    """
    manifest = run.manifest
    base_dir = fetch_base_snapshot(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    modules = load_lora_adapter(adapter.dir)
    folder = run.tokenizer_dir(run.checkpoint(adapter.step))
    context = VetContext.for_run(run.run_dir, manifest.base_model, token)
    return plan_merge(base_dir, modules, lambda: checkpoint_tokenizer(folder, context))


def merge_checkpoint(
    run: Run,
    step: int | None,
    staging: Path,
    out_dir: Path,
    *,
    endpoint: str | None,
    token: str | None,
    check: Callable[[MergePlan], object] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[int, MergeResult]:
    """Merge the run's checkpoint `step` (default the newest complete one) into its base, in `out_dir`;
    returns the step merged and the merge.

    Args:
        staging: where the prepared adapter is written (a folder that lives until the merge is done).
        check: called with the plan before anything is written (the GGUF export's refusals).
        progress: called with (bytes done, total bytes).

    Raises:
        CheckpointError: no such complete checkpoint.
        MergeError, BaseModelMismatchError, AdapterError: as `plan_checkpoint_merge`.
    """
    chosen = select_checkpoints(run, None if step is None else [step], option="--step")[-1:]
    if not chosen:
        refuse_no_checkpoint(run)
    (adapter,) = prepare_adapters(run, chosen, staging)
    plan = plan_checkpoint_merge(run, adapter, endpoint=endpoint, token=token)
    if check is not None:
        check(plan)
    return adapter.step, execute_plan(plan, out_dir, progress)
