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
from dataclasses import dataclass, replace
from typing import NoReturn

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.adapters.prepare import PreparedAdapter
from hubkit.errors import CheckpointError
from hubkit.formats.peft import ADAPTER_CONFIG, ADAPTER_FILES, ADAPTER_WEIGHTS
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.plan import PlannedFile, RepoPlan, check_repo_id
from hubkit.publish.remote import RemoteFile
from hubkit.publish.safety import check_planned_files
from hubkit.runs import Run
from hubkit.runs.manifest import MANIFEST_NAME, Manifest

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


def check_adapters_against_base(
    run: Run, adapters: Sequence[PreparedAdapter], base: BaseConfig
) -> tuple[int, ...]:
    """Check every adapted module and shape against the base model's config.

    Args:
        run: the run (the adapters' run directory remembers passing checks).
        adapters: prepared adapters.
        base: the base model's config, as the push downloaded it.

    Returns:
        The steps checked.

    Raises:
        BaseModelMismatchError: an adapter does not fit the base model.
    """
    for adapter in adapters:
        label = f"checkpoint global_step_{adapter.step} of run {run.manifest.run_id}"
        check_against_base(adapter.dir, base, label=label, run_dir=run.run_dir)
    return tuple(a.step for a in adapters)


def published_manifest(manifest: Manifest, has_metrics: bool) -> bytes:
    """`hubkit.json` as published: its local-layout fields rewritten to describe the Hub repo."""
    published = replace(
        manifest, checkpoints_dir=CHECKPOINTS_DIR, metrics_file=METRICS_NAME if has_metrics else None
    )
    return (json.dumps(published.to_dict(), indent=2) + "\n").encode()


def has_tokenizer(run: Run, step: int) -> bool:
    """Whether the adapter repo's root gets the run's tokenizer along with `step`'s adapter."""
    tokenizer_dir = run.tokenizer_dir(run.checkpoint(step))
    return tokenizer_dir is not None and any((tokenizer_dir / n).is_file() for n in TOKENIZER_FILES)


def _tokenizer_files(run: Run, step: int, hashes: FileHashCache) -> list[PlannedFile]:
    tokenizer_dir = run.tokenizer_dir(run.checkpoint(step))
    if tokenizer_dir is None:
        return []
    return [
        PlannedFile.from_path(n, tokenizer_dir / n, hashes)
        for n in TOKENIZER_FILES
        if (tokenizer_dir / n).is_file()
    ]


def _adapter_files(
    adapter: PreparedAdapter, prefix: str, hashes: FileHashCache, step: int | None
) -> list[PlannedFile]:
    """An adapter's weights (hashed in the read that checked them) and config, under `prefix`."""
    weights = adapter.dir / ADAPTER_WEIGHTS
    return [
        PlannedFile(f"{prefix}{ADAPTER_WEIGHTS}", adapter.weights, local_path=weights, step=step),
        PlannedFile.from_path(f"{prefix}{ADAPTER_CONFIG}", adapter.dir / ADAPTER_CONFIG, hashes, step=step),
    ]


@dataclass(frozen=True)
class RunFiles:
    """The files the adapter repo takes from the run, checked once, before any connection.

    Args:
        checkpoints: every adapter under `checkpoints/global_step_N/`.
        root: the newest adapter (`root_step`) again at the root, with the run's tokenizer.
        run: the manifest and the metrics.
        root_step: the step the root files are of.
    """

    checkpoints: tuple[PlannedFile, ...]
    root: tuple[PlannedFile, ...]
    run: tuple[PlannedFile, ...]
    root_step: int

    def for_repo(self, published_steps: Collection[int]) -> tuple[PlannedFile, ...]:
        """The files as the repo gets them: without the root ones when it already holds a newer step (a
        push never moves the root back)."""
        root = self.root if self.root_step >= max(published_steps, default=self.root_step) else ()
        return (*self.checkpoints, *root, *self.run)


def plan_run_files(
    run: Run, adapters: Sequence[PreparedAdapter], *, token: str | None, hashes: FileHashCache
) -> RunFiles:
    """The run's files for the adapter repo, refused when one must never be published (see
    `hubkit.publish.safety`): the one check of them a push makes.

    Args:
        run: the run.
        adapters: its prepared adapters (at least one).
        token: the token in use, so that a file containing it is refused.
        hashes: the push's hash cache.

    Raises:
        CheckpointError: no adapters (the run has no complete checkpoint yet).
        UnsafeFileError: training state, a pickle, or a file holding a local path or the token.
    """
    if not adapters:
        refuse_no_checkpoint(run)
    ordered = sorted(adapters, key=lambda a: a.step)
    checkpoints = [
        planned
        for adapter in ordered
        for planned in _adapter_files(
            adapter, f"{CHECKPOINTS_DIR}/global_step_{adapter.step}/", hashes, adapter.step
        )
    ]
    newest = ordered[-1]
    root = _adapter_files(newest, "", hashes, None) + _tokenizer_files(run, newest.step, hashes)
    has_metrics = bool(run.metrics.rows)
    run_files = [PlannedFile.from_bytes(MANIFEST_NAME, published_manifest(run.manifest, has_metrics))]
    if has_metrics:
        run_files.append(PlannedFile.from_bytes(METRICS_NAME, run.metrics.to_jsonl().encode()))
    files = RunFiles(tuple(checkpoints), tuple(root), tuple(run_files), newest.step)
    check_planned_files(files.for_repo(()), run.run_dir, token)
    return files


def plan_adapter_repo(
    run: Run,
    repo_id: str,
    run_files: RunFiles,
    *,
    private: bool = False,
    token: str | None = None,
    published_steps: Collection[int] = (),
    card_files: Mapping[str, bytes] | None = None,
) -> RepoPlan:
    """The adapter repo's desired files: the run's (checked when they were planned) and the card's.

    Args:
        run: the run the adapters come from.
        repo_id: "owner/name".
        run_files: from `plan_run_files`.
        private: create the repo private (applies only when the push creates it).
        token: the token in use, so that a card file containing it is refused.
        published_steps: steps already in the repo (a push never removes them): the root keeps the
            newest of them.
        card_files: the card and its images (`hubkit.cards.adapter_card_files`), path in repo → bytes;
            None plans no card.

    Returns:
        The plan; nothing is read from or sent to the network.

    Raises:
        PublishError: an invalid repo id.
        UnsafeFileError: a card file holds a local path or the token.
    """
    check_repo_id(repo_id)
    card = [PlannedFile.from_bytes(path, content) for path, content in sorted((card_files or {}).items())]
    check_planned_files(card, run.run_dir, token)
    return RepoPlan(
        repo_id=repo_id,
        files=(*run_files.for_repo(published_steps), *card),
        private=private,
        title=f"hubkit push {run.manifest.run_id}",
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
