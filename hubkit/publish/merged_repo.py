"""The merged-model repo: one checkpoint's adapter merged into the base, planned like any other repo.

model-00001-of-00002.safetensors, ..., model.safetensors.index.json   (or model.safetensors)
config.json, generation_config.json                                   (the base's)
tokenizer files, chat template                                        (the run's, else the base's)
README.md                                                             (the merged card)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.hub.hashing import FileHashCache
from hubkit.publish.adapter_repo import TOKENIZER_FILES
from hubkit.publish.plan import PlannedFile, RepoPlan, check_repo_id
from hubkit.publish.safety import check_planned_files
from hubkit.runs import Run

if TYPE_CHECKING:
    from hubkit.adapters.prepare import PreparedAdapter
    from hubkit.merge import MergePlan, MergeResult
    from hubkit.merge.stream import ProgressCallback

MERGED_SUFFIX = "-merged"


def default_merged_repo_id(adapter_repo_id: str) -> str:
    """The default merged repo beside an adapter repo: `<repo_id>-merged`."""
    return adapter_repo_id + MERGED_SUFFIX


def plan_prepared_merge(
    run: Run, adapter: PreparedAdapter, *, endpoint: str | None = None, token: str | None = None
) -> MergePlan:
    """Every check of merging a prepared adapter into the run's base model (fetched from the Hub cache),
    made before anything is written.

    Args:
        run: the run (its manifest names the base model and revision).
        adapter: from `hubkit.adapters.prepare_adapter`.
        endpoint: the Hub to fetch the base from; default `HF_ENDPOINT`, else huggingface.co.
        token: the Hub token, for a private or gated base.

    Returns:
        The plan, for `hubkit.merge.execute_plan`.

    Raises:
        MergeError, BaseModelMismatchError, AdapterError: as `hubkit.merge.plan_merge`.
    """
    from hubkit.merge import fetch_base_snapshot, load_lora_adapter, plan_merge

    manifest = run.manifest
    base_dir = fetch_base_snapshot(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    return plan_merge(base_dir, load_lora_adapter(adapter.dir))


def merge_prepared_adapter(
    run: Run,
    adapter: PreparedAdapter,
    out_dir: Path,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    progress: ProgressCallback | None = None,
) -> MergeResult:
    """Merge a prepared adapter into the run's base model (fetched from the Hub cache) in `out_dir`.

    Args:
        run: the run (its manifest names the base model and revision).
        adapter: from `hubkit.adapters.prepare_adapter`.
        out_dir: must not exist or be empty.
        endpoint: the Hub to fetch the base from; default `HF_ENDPOINT`, else huggingface.co.
        token: the Hub token, for a private or gated base.
        progress: called with (bytes done, total bytes).

    Returns:
        The merge result.

    Raises:
        MergeError, BaseModelMismatchError, AdapterError: as `hubkit.merge.merge_adapter`.
    """
    from hubkit.merge import execute_plan

    return execute_plan(plan_prepared_merge(run, adapter, endpoint=endpoint, token=token), out_dir, progress)


def plan_merged_repo(
    run: Run,
    repo_id: str,
    step: int,
    result: MergeResult,
    card_files: Mapping[str, bytes],
    *,
    hashes: FileHashCache,
    private: bool = False,
    token: str | None = None,
) -> RepoPlan:
    """The merged repo's desired files: the merged folder, the run's tokenizer over the base's, a card.

    Args:
        run: the run the merged checkpoint comes from.
        repo_id: the merged repo, "owner/name".
        step: the merged checkpoint's step.
        result: the merge, from `merge_prepared_adapter` (its folder must live until the push ends).
        card_files: the card (`hubkit.cards.merged_card_files`), path in repo → bytes.
        hashes: the push's hash cache (a merged folder is hashed once per push session).
        private: create the repo private (applies only when the push creates it).
        token: the token in use, so that a file containing it is refused.

    Returns:
        The plan; nothing is read from or sent to the network.

    Raises:
        PublishError: an invalid repo id.
        UnsafeFileError: a planned file holds a local path or a token.
    """
    check_repo_id(repo_id)
    files = {p.name: p for p in sorted(result.out_dir.iterdir()) if p.is_file()}
    # Training may have changed the tokenizer or chat template: the run's own set replaces the base's
    # whole (mixing the two could pair the base's chat_template.jinja with the run's tokenizer).
    tokenizer_dir = run.tokenizer_dir(run.checkpoint(step))
    run_tokenizer = {
        n: tokenizer_dir / n for n in TOKENIZER_FILES if tokenizer_dir and (tokenizer_dir / n).is_file()
    }
    if run_tokenizer:
        files = {n: p for n, p in files.items() if n not in TOKENIZER_FILES} | run_tokenizer
    planned = [PlannedFile.from_path(name, path, hashes, step=step) for name, path in sorted(files.items())]
    planned += [
        PlannedFile.from_bytes(path, content, step=step) for path, content in sorted(card_files.items())
    ]
    check_planned_files(planned, run.run_dir, token)
    return RepoPlan(
        repo_id=repo_id,
        files=tuple(planned),
        private=private,
        title=f"hubkit push {run.manifest.run_id} (merged)",  # the commit adds ": steps N"
    )
