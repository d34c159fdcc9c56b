"""The adapter repo's plan, from a run: every chosen checkpoint under `checkpoints/global_step_N/`,
the newest one (and the tokenizer) at the root, the manifest, the metrics, the evaluation and the card.

    checkpoints/global_step_20/{adapter_model.safetensors, adapter_config.json}
    checkpoints/global_step_40/{...}
    adapter_model.safetensors, adapter_config.json, tokenizer files   (= step 40)
    hubkit.json, metrics.jsonl, runs/ (the metrics for TensorBoard), eval/, train_problems.sha256, README.md, assets/

Adapters are validated (and verl's rebuilt) and vetted by `hubkit.adapters.prepare_adapters`, and every
other file the run gives is vetted by `plan_run_files` (`hubkit.safety`: known kinds only, each read
through its format and written out from what was read), all before any connection: a bad checkpoint
or a file that must not be published stops the push before anything is sent or created.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.adapters.prepare import PreparedAdapter, PublishedForm
from hubkit.formats import tokenizer
from hubkit.formats.peft import ADAPTER_CONFIG, ADAPTER_FILES, ADAPTER_WEIGHTS
from hubkit.formats.tensorboard import write_scalars
from hubkit.hub.hashing import FileHashCache
from hubkit.hub.remote import RemoteFile
from hubkit.publish.plan import PlannedFile, RepoPlan, check_repo_id
from hubkit.publish.vetted import Vetter
from hubkit.release.layout import (
    CHECKPOINTS_DIR,
    METRICS_NAME,
    TRAINING_EVENTS_NAME,
    checkpoint_dir,
    steps_in_paths,
)
from hubkit.runs import Checkpoint, Run, refuse_no_checkpoint
from hubkit.runs.eval_results import EVAL_DIR, RESULTS_NAME, SAMPLES_NAME
from hubkit.runs.manifest import MANIFEST_NAME
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME
from hubkit.safety import (
    CheckpointsTree,
    Kind,
    LeftOut,
    VettedFile,
    check_checkpoint_folder,
    checkpoints_tree,
    kinds,
    refuse_duplicate_steps,
)
from hubkit.safety.kinds import TOKENIZER_KINDS, classify_folder

# Without one of these a tokenizer folder holds no tokenizer transformers can load: none is published.
_TOKENIZER_DEFINITIONS = (tokenizer.TOKENIZER_JSON, tokenizer.VOCAB_JSON)


def checked_checkpoints_tree(
    run: Run, chosen: Iterable[Checkpoint], named: Path | None = None
) -> CheckpointsTree:
    """Where the run's checkpoints are, refused (before anything is read, sent or created) when two folders
    claim one step, or a chosen checkpoint's folders lead outside the run unasked (`named`: the folder
    ``--checkpoints-dir`` named). The dry run says where they are.

    Raises:
        AmbiguousCheckpointError, ForeignCheckpointsError: as `hubkit.safety.checkpoints`.
    """
    refuse_duplicate_steps((c.step, c.path) for c in (*run.checkpoints, *run.pending))
    tree = checkpoints_tree(run.run_dir, run.manifest.checkpoints_dir, named=named)
    for checkpoint in chosen:
        for folder in (checkpoint.path, checkpoint.adapter_dir, checkpoint.tokenizer_dir):
            if folder is not None:
                check_checkpoint_folder(tree, folder)
    return tree


def check_adapters_against_base(
    run: Run, adapters: Sequence[PreparedAdapter], base: BaseConfig
) -> tuple[int, ...]:
    """Check every adapted module and shape against the base model's config, as the push downloaded it
    (the run directory remembers passing checks); the steps checked.

    Raises:
        BaseModelMismatchError: an adapter does not fit the base model.
    """
    labels = {c.step: c.label for c in run.checkpoints}
    for adapter in adapters:
        label = f"{labels.get(adapter.step, f'checkpoint {adapter.step}')} of run {run.manifest.run_id}"
        check_against_base(adapter.dir, base, label=label, run_dir=run.run_dir)
    return tuple(a.step for a in adapters)


def published_manifest(run: Run, has_metrics: bool) -> bytes:
    """`hubkit.json` as published: its local-layout fields rewritten to describe the Hub repo. A run
    without hyperparameters in its manifest (a plain TRL run) publishes those its trainer saved, so that
    a release read back (`hubkit eval --repo-id`, a Space made from the repo) knows them too."""
    manifest = run.manifest
    settings = run.trainer_settings
    hyperparameters = manifest.hyperparameters
    if not hyperparameters and settings is not None:
        hyperparameters = dict(settings.values)
    published = replace(
        manifest,
        checkpoints_dir=CHECKPOINTS_DIR,
        metrics_file=METRICS_NAME if has_metrics else None,
        hyperparameters=hyperparameters,
    )
    return (json.dumps(published.to_dict(), indent=2) + "\n").encode()


@dataclass(frozen=True)
class LeftOutOf:
    """The files of one run folder a push does not publish, and why (for the dry run).

    Args:
        folder: the folder, relative to the run directory (``checkpoints/checkpoint-20``).
        files: each file left out, with its reason.
    """

    folder: str
    files: tuple[LeftOut, ...]


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()  # a dangling link is vetted (and refused), not skipped


def _vetted_if_there(path: Path, kind: Kind, vetter: Vetter) -> VettedFile | None:
    return vetter.file(path, kind) if _exists(path) else None


def published_forms(checkpoints: Iterable[Checkpoint], vetter: Vetter) -> dict[int, PublishedForm]:
    """Each saved adapter's config and weights' header vetted, before the adapter is prepared: how its
    files are to be published (the vetted config, and whether the weights need a new header), by step, for
    each checkpoint with a saved adapter folder.

    Raises:
        UnsafeFileError: a file that must not be published (`hubkit.safety.vet_file`).
    """
    forms = {}
    for checkpoint in checkpoints:
        if checkpoint.adapter_dir is None:
            continue  # verl saved none: rebuilt from its shards, by hubkit
        config = _vetted_if_there(checkpoint.adapter_dir / ADAPTER_CONFIG, kinds.ADAPTER_CONFIG, vetter)
        weights = _vetted_if_there(checkpoint.adapter_dir / ADAPTER_WEIGHTS, kinds.ADAPTER_WEIGHTS, vetter)
        forms[checkpoint.step] = PublishedForm(
            config=json.loads(config.data) if config is not None and config.data is not None else None,
            header_kept=weights is None
            or (weights.weights is not None and weights.weights.saved_header_kept),
        )
    return forms


def _saved_changes(checkpoint: Checkpoint, vetter: Vetter) -> list[str]:
    """What vetting changed in a checkpoint's saved adapter files (vetted before it was prepared: the
    session's vetting has them, nothing is read again)."""
    if checkpoint.adapter_dir is None:
        return []
    changes = []
    for name, kind in ((ADAPTER_CONFIG, kinds.ADAPTER_CONFIG), (ADAPTER_WEIGHTS, kinds.ADAPTER_WEIGHTS)):
        vetted = _vetted_if_there(checkpoint.adapter_dir / name, kind, vetter)
        notes = vetted.notes if vetted is not None else ()
        changes += [f"{checkpoint_dir(checkpoint.step)}/{name}: {note}" for note in notes]
    return changes


def _adapter_files(adapter: PreparedAdapter, vetter: Vetter, hashes: FileHashCache) -> list[PlannedFile]:
    """A prepared adapter's weights (hashed in the read that checked them; their header vetted here) and
    config (vetted as preparing wrote it), under `checkpoints/global_step_N/`."""
    prefix, label = f"{checkpoint_dir(adapter.step)}/", f"checkpoint global_step_{adapter.step}"
    weights = vetter.file(
        adapter.dir / ADAPTER_WEIGHTS, kinds.ADAPTER_WEIGHTS, label=f"{ADAPTER_WEIGHTS} of {label}"
    )
    if weights.weights is None or not weights.weights.saved_header_kept:
        raise ValueError(
            f"{label}: preparing wrote a header vetting would change"
        )  # prepare writes vetted ones
    config = vetter.file(
        adapter.dir / ADAPTER_CONFIG, kinds.ADAPTER_CONFIG, label=f"{ADAPTER_CONFIG} of {label}"
    )
    return [
        PlannedFile(
            prefix + ADAPTER_WEIGHTS,
            kinds.ADAPTER_WEIGHTS,
            adapter.weights,
            local_path=adapter.dir / ADAPTER_WEIGHTS,
            step=adapter.step,
        ),
        PlannedFile.from_vetted(config, hashes, path_in_repo=prefix + ADAPTER_CONFIG, step=adapter.step),
    ]


@dataclass(frozen=True)
class RunFiles:
    """The files the adapter repo takes from the run, vetted once, before any connection."""

    checkpoints: tuple[PlannedFile, ...]  # every adapter under `checkpoints/global_step_N/`
    root: tuple[PlannedFile, ...]  # the newest adapter (`root_step`) again at the root
    tokenizer: tuple[PlannedFile, ...]  # the run's for `root_step`, at the root too (and in the merged repo)
    run: tuple[PlannedFile, ...]  # the manifest, the metrics, the evaluation, the training-problem hashes
    root_step: int
    left_out: tuple[LeftOutOf, ...] = ()  # what the chosen checkpoints' folders hold unpublished, and why
    changes: tuple[str, ...] = ()  # what vetting changed on the way, one line per file ("hubkit.json: ...")

    def for_repo(self, published_steps: Collection[int]) -> tuple[PlannedFile, ...]:
        """The files as the repo gets them: without the root ones when it already holds a newer step (a
        push never moves the root back)."""
        newest = self.root_step >= max(published_steps, default=self.root_step)
        root = (*self.root, *self.tokenizer) if newest else ()
        return (*self.checkpoints, *root, *self.run)


@dataclass
class _Planning:
    """The files `plan_run_files` has vetted so far, and what vetting changed in them."""

    vetter: Vetter
    hashes: FileHashCache
    changes: list[str]

    def file(self, path: Path, kind: Kind, path_in_repo: str | None = None) -> PlannedFile:
        vetted = self.vetter.file(path, kind, path_in_repo=path_in_repo)
        self.changes += [f"{vetted.path_in_repo}: {note}" for note in vetted.notes]
        return PlannedFile.from_vetted(vetted, self.hashes)

    def data(self, path_in_repo: str, kind: Kind, content: bytes) -> PlannedFile:
        vetted = self.vetter.data(path_in_repo, kind, content)
        self.changes += [f"{path_in_repo}: {note}" for note in vetted.notes]
        return PlannedFile.from_vetted(vetted, self.hashes)


def _tokenizer_files(
    run: Run, checkpoint: Checkpoint, planning: _Planning
) -> tuple[tuple[PlannedFile, ...], tuple[LeftOut, ...]]:
    """The run's tokenizer files for `checkpoint`, each vetted as its kind; and those left out."""
    tokenizer_dir = run.tokenizer_dir(checkpoint)
    if tokenizer_dir is None:
        return (), ()
    present = [name for name in TOKENIZER_KINDS if _exists(tokenizer_dir / name)]
    if not any(name in present for name in _TOKENIZER_DEFINITIONS):
        reason = "no tokenizer.json or vocab.json beside it (the card loads the base's tokenizer)"
        return (), tuple(LeftOut(name, reason) for name in present)
    return tuple(planning.file(tokenizer_dir / name, TOKENIZER_KINDS[name]) for name in present), ()


def _left_out(
    checkpoints: Sequence[Checkpoint], vetter: Vetter, tokenizer: tuple[Path, tuple[LeftOut, ...]] | None
) -> tuple[LeftOutOf, ...]:
    """What each checkpoint's folder holds that is of no kind a push publishes (none of it is read), and
    `tokenizer`: the tokenizer folder and what of it is left out."""
    found = {
        folder: list(classify_folder(folder).left_out)
        for folder in (c.adapter_dir or c.path for c in checkpoints)
    }
    if tokenizer is not None:
        found.setdefault(tokenizer[0], []).extend(tokenizer[1])
    return tuple(
        LeftOutOf(vetter.context.label(folder), tuple(sorted(items, key=lambda i: i.name)))
        for folder, items in found.items()
        if items
    )


def _run_files(run: Run, planning: _Planning) -> list[PlannedFile]:
    """The manifest (as published), the metrics, and the evaluation and training-problem hashes the run
    directory holds."""
    has_metrics = bool(run.metrics.rows)
    files = [planning.data(MANIFEST_NAME, kinds.MANIFEST, published_manifest(run, has_metrics))]
    if has_metrics:
        files.append(planning.data(METRICS_NAME, kinds.METRICS, run.metrics.to_jsonl().encode()))
        points = {name: run.metrics.series(name) for name in run.metrics.names}
        events = write_scalars(points)
        files.append(planning.data(TRAINING_EVENTS_NAME, kinds.TRAINING_EVENTS, events))
    results = f"{EVAL_DIR}/{RESULTS_NAME}"
    evaluated = _exists(run.run_dir / results)
    for path, kind in (
        (results, kinds.EVAL_RESULTS),
        (f"{EVAL_DIR}/{SAMPLES_NAME}", kinds.EVAL_SAMPLES),
        (TRAIN_PROBLEM_HASHES_NAME, kinds.TRAIN_PROBLEM_HASHES),
    ):
        if (evaluated or path == TRAIN_PROBLEM_HASHES_NAME) and _exists(run.run_dir / path):
            files.append(planning.file(run.run_dir / path, kind, path_in_repo=path))
    return files


def plan_run_files(
    run: Run, adapters: Sequence[PreparedAdapter], *, vetter: Vetter, hashes: FileHashCache
) -> RunFiles:
    """The run's files for the adapter repo (from its prepared adapters, at least one), each vetted
    (`hubkit.safety`): the one check of them a push makes, before any connection; with what was left out of
    the checkpoints' folders, and what vetting changed.

    Raises:
        CheckpointError: no adapters (the run has no complete checkpoint yet).
        UnsafeFileError: a file that must not be published: a secret, a local path, a link to anything but a
            regular file, too large for its kind, or not of its kind (`hubkit.safety.vet_file`).
    """
    if not adapters:
        refuse_no_checkpoint(run)
    ordered = sorted(adapters, key=lambda a: a.step)
    by_step = {adapter.step: _adapter_files(adapter, vetter, hashes) for adapter in ordered}
    newest = ordered[-1]
    planning = _Planning(vetter, hashes, [])
    for adapter in ordered:
        planning.changes += _saved_changes(run.checkpoint(adapter.step), vetter)
    tokenizer_files, tokenizer_left_out = _tokenizer_files(run, run.checkpoint(newest.step), planning)
    tokenizer_dir = run.tokenizer_dir(run.checkpoint(newest.step))
    left_out = _left_out(
        [run.checkpoint(a.step) for a in ordered],
        vetter,
        (tokenizer_dir, tokenizer_left_out) if tokenizer_dir is not None and tokenizer_left_out else None,
    )
    run_files = _run_files(run, planning)
    return RunFiles(
        checkpoints=tuple(f for adapter in ordered for f in by_step[adapter.step]),
        root=tuple(
            replace(f, path_in_repo=PurePosixPath(f.path_in_repo).name, step=None)
            for f in by_step[newest.step]
        ),
        tokenizer=tokenizer_files,
        run=tuple(run_files),
        root_step=newest.step,
        left_out=left_out,
        changes=tuple(planning.changes),
    )


def plan_adapter_repo(
    run: Run,
    repo_id: str,
    run_files: RunFiles,
    *,
    private: bool = False,
    published_steps: Collection[int] = (),
) -> RepoPlan:
    """The adapter repo's desired files but its card (added once the release's other repos are known:
    `hubkit.publish.repos.build_adapter_repo`), vetted when they were planned. `published_steps`: the
    steps already in the repo (a push never removes them): the root keeps the newest of them.

    Raises:
        PublishError: an invalid repo id.
    """
    check_repo_id(repo_id)
    return RepoPlan(
        repo_id=repo_id,
        files=run_files.for_repo(published_steps),
        private=private,
        title=f"hubkit push {run.manifest.run_id}",
    )


def adapter_bytes_in_repo(files: Mapping[str, RemoteFile]) -> dict[int, int]:
    """Bytes of each published checkpoint's adapter (weights and config), by step, from a repo listing."""
    sizes: dict[int, int] = {}
    for step in steps_in_paths(files):
        for name in ADAPTER_FILES:
            remote = files.get(f"{checkpoint_dir(step)}/{name}")
            if remote is not None and remote.size >= 0:
                sizes[step] = sizes.get(step, 0) + remote.size
    return sizes
