"""A published release, made ready for `plan_eval`: read at the head of its main branch, the chosen steps'
adapters downloaded with what the evaluation reads beside them (the manifest, the tokenizer and chat
template at the root, the training-problem hashes). The base model is fetched by `execute_eval`, as for a
run directory.

    release, run = open_release("me/qwen3-4b-grpo", steps=(100, 200), endpoint=..., token=...)
    plan = plan_eval(run, request, published=True)
"""

from __future__ import annotations

from collections.abc import Sequence

from hubkit.release.base_files import check_base_files, check_tokenizer_files
from hubkit.release.read import Release, download_release, read_release
from hubkit.runs import Run, select_checkpoints
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME


def open_release(
    repo_id: str,
    steps: Sequence[int] | None = None,
    every: int | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> tuple[Release, Run]:
    """Read `repo_id` (an adapter repo `hubkit push` published) and download what evaluating the chosen
    steps needs (default every published one): the release (the commit read) and the run read back from
    it, the chosen steps with their adapters. `endpoint`: default ``HF_ENDPOINT``, else huggingface.co.

    Raises:
        HubError: the repo cannot be read (`hubkit.hub.failures`).
        ReleaseError: it is not a release of `hubkit push`, or its base model, tokenizer or an adapter's
            target modules are refused.
        AdapterError, BaseModelMismatchError: an adapter's rank or weights do not fit the base.
        MergeError: the base model cannot be fetched.
        CheckpointError: a requested step is not published.
    """
    from hubkit.adapters.base_check import BaseConfig
    from hubkit.merge.base_files import fetch_base_snapshot
    from hubkit.release.adapters import check_adapters_against_base

    release = read_release(repo_id, endpoint=endpoint, token=token)
    where = {"extra": (TRAIN_PROBLEM_HASHES_NAME,), "endpoint": endpoint, "token": token}
    # The listing alone, to choose the steps as for a run directory (same rules, same messages).
    listed = download_release(release, (), read_metrics=False, **where)
    chosen = tuple(c.step for c in select_checkpoints(listed, steps, every))
    run = download_release(release, chosen, **where)
    manifest = release.manifest
    base_dir = fetch_base_snapshot(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    vocab_size = check_base_files(base_dir, manifest.base_model)
    check_tokenizer_files(base_dir, vocab_size, f"base model {manifest.base_model}")
    if release.has_tokenizer:
        check_tokenizer_files(run.run_dir, vocab_size, repo_id)
    chosen_dirs = {c.name: c.adapter_dir for c in run.checkpoints if c.adapter_dir is not None}
    check_adapters_against_base(chosen_dirs, BaseConfig.of(manifest.base_model, base_dir / "config.json"))
    return release, run
