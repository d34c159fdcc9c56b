"""The adapter repo's plan, from a run: every chosen checkpoint under `checkpoints/global_step_N/`,
the newest one (and the tokenizer) at the root, the manifest, the metrics and the card.

    checkpoints/global_step_20/{adapter_model.safetensors, adapter_config.json}
    checkpoints/global_step_40/{...}
    adapter_model.safetensors, adapter_config.json, tokenizer files   (= step 40)
    hubkit.json, metrics.jsonl, README.md

Adapters are validated (and verl's rebuilt) by `hubkit.adapters.prepare_adapter` while the plan is
built, so a bad checkpoint stops the push before anything is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hubkit.errors import CheckpointError
from hubkit.manifest import MANIFEST_NAME, Manifest
from hubkit.peft_adapter import ADAPTER_FILES
from hubkit.publish.plan import PlannedFile, RepoPlan, check_repo_id
from hubkit.publish.safety import check_file_contents, check_file_names
from hubkit.runs import Checkpoint, Run

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.adapters import PreparedAdapter
    from hubkit.publish.remote import RemoteFile

# What `AutoTokenizer.from_pretrained(repo_id)` reads; anything else in a tokenizer dir stays local.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
METRICS_NAME = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"
_STEP_PATH_RE = re.compile(rf"^{CHECKPOINTS_DIR}/global_step_(\d+)/adapter_model\.safetensors$")


def refuse_no_checkpoint(run: Run) -> NoReturn:
    """Refuse a run with nothing to publish, saying why each checkpoint folder is not complete.

    Raises:
        CheckpointError: always.
    """
    run_id = run.manifest.run_id
    if not run.pending:
        raise CheckpointError(
            f"run {run_id} has no complete checkpoint to publish yet: it has no checkpoint folder "
            "(wait for the first save, or check --run-dir)"
        )
    reasons = "; ".join(f"{c.path.name}: {c.incomplete_reason or 'not complete'}" for c in run.pending)
    raise CheckpointError(
        f"run {run_id} has no complete checkpoint to publish yet ({reasons}): wait for the save to finish, "
        "or publish a run whose saves completed"
    )


def prepare_adapters(
    run: Run,
    checkpoints: Sequence[Checkpoint],
    staging_dir: Path,
    cache: dict[int, PreparedAdapter] | None = None,
) -> list[PreparedAdapter]:
    """Normalize and validate each checkpoint's adapter into `staging_dir/global_step_N/` (no network).

    Args:
        run: the run.
        checkpoints: from `select_checkpoints`.
        staging_dir: a scratch directory that lives until the push is done.
        cache: adapters already prepared in this directory (a watching push re-plans often).

    Returns:
        One prepared adapter per checkpoint, in the same order.

    Raises:
        AdapterError: whatever `prepare_adapter` refuses (empty, NaN, alpha 0 ...).
    """
    from hubkit.adapters import prepare_adapters as prepare  # needs torch/peft: imported only when publishing

    cache = {} if cache is None else cache
    new = [c for c in checkpoints if c.step not in cache]
    cache.update({adapter.step: adapter for adapter in prepare(run, new, staging_dir)})
    return [cache[c.step] for c in checkpoints]


def check_adapters_against_base(
    api: HfApi, run: Run, adapters: Sequence[PreparedAdapter], checked: set[int] | None = None
) -> None:
    """Check every adapted module and shape against the base model's config.

    The config is downloaded from the Hub the push goes to, so a dry run, which opens no connection,
    skips this; a push runs it after the plan is built and before anything is sent.

    Args:
        api: the client of the push (its endpoint and token are used for the download).
        run: the run (its manifest names the base model and revision).
        adapters: prepared adapters.
        checked: steps already checked (skipped, then added to).

    Raises:
        BaseModelMismatchError: an adapter does not fit the base model, or the base has no config.
    """
    from hubkit.adapters import check_against_base

    checked = set() if checked is None else checked
    manifest = run.manifest
    for adapter in adapters:
        if adapter.step not in checked:
            label = f"checkpoint global_step_{adapter.step} of run {manifest.run_id}"
            check_against_base(
                adapter.dir,
                manifest.base_model,
                manifest.base_model_revision,
                label=label,
                endpoint=api.endpoint,
                token=api.token,
                run_dir=run.run_dir,
            )
            checked.add(adapter.step)


def published_manifest(manifest: Manifest, has_metrics: bool) -> bytes:
    """`hubkit.json` as published: its local-layout fields rewritten to describe the Hub repo."""
    published = replace(
        manifest, checkpoints_dir=CHECKPOINTS_DIR, metrics_file=METRICS_NAME if has_metrics else None
    )
    return (json.dumps(published.to_dict(), indent=2) + "\n").encode()


def has_tokenizer(run: Run, step: int) -> bool:
    """Whether the adapter repo's root gets the run's tokenizer along with `step`'s adapter."""
    return bool(_tokenizer_files(run, step))


def _tokenizer_files(run: Run, step: int) -> list[PlannedFile]:
    tokenizer_dir = run.tokenizer_dir(run.checkpoint(step))
    if tokenizer_dir is None:
        return []
    return [
        PlannedFile.from_path(n, tokenizer_dir / n) for n in TOKENIZER_FILES if (tokenizer_dir / n).is_file()
    ]


def _run_files(run: Run, adapters: Sequence[PreparedAdapter], root_step: int | None) -> list[PlannedFile]:
    """The files the adapter repo takes from the run: adapters, tokenizer (at the root step), manifest, metrics."""
    files: list[PlannedFile] = []
    for adapter in adapters:
        for name in ADAPTER_FILES:
            path_in_repo = f"{CHECKPOINTS_DIR}/global_step_{adapter.step}/{name}"
            files.append(PlannedFile.from_path(path_in_repo, adapter.dir / name, step=adapter.step))
    root = next((a for a in adapters if a.step == root_step), None)
    if root is not None:
        files += [PlannedFile.from_path(name, root.dir / name) for name in ADAPTER_FILES]
        files += _tokenizer_files(run, root.step)
    has_metrics = bool(run.metrics.rows)
    files.append(PlannedFile.from_bytes(MANIFEST_NAME, published_manifest(run.manifest, has_metrics)))
    if has_metrics:
        files.append(PlannedFile.from_bytes(METRICS_NAME, run.metrics.to_jsonl().encode()))
    return files


def check_run_files(run: Run, adapters: Sequence[PreparedAdapter], token: str | None) -> None:
    """Refuse, before any connection, run files that must never be published (see `hubkit.publish.safety`).

    Raises:
        UnsafeFileError: training state, a pickle, or a file holding a local path or the token.
    """
    files = _run_files(run, adapters, max((a.step for a in adapters), default=None))
    check_file_names(files)
    check_file_contents(files, run.run_dir, Path.home(), token)


def plan_adapter_repo(
    run: Run,
    repo_id: str,
    adapters: Sequence[PreparedAdapter],
    *,
    private: bool = False,
    token: str | None = None,
    published_steps: Collection[int] = (),
    card_files: Mapping[str, bytes] | None = None,
) -> RepoPlan:
    """The adapter repo's desired files, checked for training state, local paths and tokens.

    Args:
        run: the run the adapters come from.
        repo_id: "owner/name".
        adapters: prepared adapters (at least one); the highest step goes to the root unless a
            newer step is already published.
        private: create the repo private (applies only when the push creates it).
        token: the token in use, so that a file containing it is refused.
        published_steps: steps already in the repo (a push never removes them): the root keeps the
            newest of them.
        card_files: the card and its images (`hubkit.cards.adapter_card_files`), path in repo → bytes;
            None plans no card (the card builder needs the base model's card from the Hub).

    Returns:
        The plan; nothing is read from or sent to the network.

    Raises:
        PublishError: an invalid repo id.
        CheckpointError: no adapters (the run has no complete checkpoint yet).
        UnsafeFileError: a planned file is training state, a pickle, or holds a local path or token.
    """
    check_repo_id(repo_id)
    if not adapters:
        refuse_no_checkpoint(run)
    ordered = sorted(adapters, key=lambda a: a.step)
    final = ordered[-1]
    root_step = final.step if final.step >= max(published_steps, default=final.step) else None
    files = _run_files(run, ordered, root_step)
    files += [PlannedFile.from_bytes(path, content) for path, content in sorted((card_files or {}).items())]
    check_file_names(files)
    check_file_contents(files, run.run_dir, Path.home(), token)
    return RepoPlan(
        repo_id=repo_id, files=tuple(files), private=private, title=f"hubkit push {run.manifest.run_id}"
    )


def adapter_bytes_in_repo(files: Mapping[str, RemoteFile]) -> dict[int, int]:
    """Bytes of each published checkpoint's adapter (weights and config), by step, from a repo listing."""
    sizes: dict[int, int] = {}
    for step in steps_in_paths(files):
        for name in ADAPTER_FILES:
            remote = files.get(f"{CHECKPOINTS_DIR}/global_step_{step}/{name}")
            if remote is not None and remote.size >= 0:
                sizes[step] = sizes.get(step, 0) + remote.size
    return sizes


def steps_in_paths(paths: Iterable[str]) -> tuple[int, ...]:
    """The checkpoint steps an adapter repo holds, from its file paths (`checkpoints/global_step_N/...`)."""
    steps = set()
    for path in paths:
        match = _STEP_PATH_RE.match(path)
        if match:
            steps.add(int(match.group(1)))
    return tuple(sorted(steps))
