"""What two stages of a push hand to the next (`hubkit.publish.push.PushSession`): what was prepared on
this machine, and every decision taken before any repo is created (the read stage's: `hub_reads.HubState`);
and the last check before the commit, the merged model a push is about to publish against its adapter
(`verified_record`, `hubkit.verify.merged`): the merged repo's files as they will be published (the merged
folder's weights and configs, the run's tokenizer over the base's) against the prepared adapter on the base.
A mismatch refuses the push in one line; a pass is recorded in the merge record (the merged card's
``hubkit_merge.verified``), which the card shows."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.adapters.prepare import PreparedAdapter
from hubkit.cards import BaseModelCard
from hubkit.cards.gguf_record import GGUFRecord
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import VerificationError
from hubkit.publish.adapter_repo import RunFiles
from hubkit.publish.gguf_repo import GGUFDecision
from hubkit.publish.merge_decision import MergeDecision
from hubkit.publish.merged_repo import published_names
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.request import PushProgress, PushRequest
from hubkit.publish.vetted import Vetter
from hubkit.runs import Run
from hubkit.runs.completions import Completions
from hubkit.runs.eval_results import EvalResults
from hubkit.safety import CheckpointsTree

if TYPE_CHECKING:
    from hubkit.merge import MergePlan, MergeResult


@dataclass(frozen=True)
class Prepared:
    """What the push read and prepared on this machine (`PushSession._prepare_locally`)."""

    run: Run
    tree: CheckpointsTree
    token: str | None
    vetter: Vetter
    adapters: list[PreparedAdapter]
    run_files: RunFiles
    evaluation: EvalResults | None
    completions: Completions  # the training completions the framework saved (none with --no-samples)


@dataclass(frozen=True)
class Decided:
    """Every decision of the push, taken before any repo is created (`_decide`)."""

    notes: list[str]
    base_revision: str | None
    merging: MergeDecision
    gguf: GGUFDecision
    space_files: tuple[PlannedFile, ...]
    to_merge: PreparedAdapter | None
    merge_plan: MergePlan | None
    base_card: BaseModelCard
    branches: tuple[RepoPlan, ...]
    adapter_files: RepoPlan  # the adapter repo's plan but its card (planned once: its weights go ahead)
    samples_files: tuple[PlannedFile, ...] = ()  # the samples dataset's, vetted


def published_folder(merged: MergeResult, prepared: Prepared, folder: Path) -> Path:
    """`folder` holding what the merged repo will publish, but its card: links to the merged folder's files
    of a published kind, and the run's tokenizer files as vetting wrote them in place of the base's."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    names = sorted(p.name for p in merged.out_dir.iterdir() if p.is_file())
    for name, _kind in published_names(names, prepared.run_files)[0]:
        (folder / name).symlink_to(merged.out_dir / name)
    for planned in prepared.run_files.tokenizer:
        (folder / planned.path_in_repo).write_bytes(planned.read_bytes())
    return folder


def verified_record(
    request: PushRequest,
    prepared: Prepared,
    decided: Decided,
    merged: MergeResult | None,
    merged_repo_id: str,
    progress: PushProgress,
) -> MergeRecord | None:
    """The merged repo's record after this push, with the check of the merge it makes now (unless
    `request.verify` is off, or this push publishes no new merge).

    Raises:
        VerificationError: the merged model is not the adapter's, in one line naming it and by how much.
    """
    run = prepared.run
    record = decided.merging.record_after(merged, run, decided.base_revision)
    adapter, plan = decided.merging.adapter, decided.merge_plan
    if not request.verify or merged is None or record is None or adapter is None or plan is None:
        return record
    from hubkit.verify.merged import MergedCheckInput, check_merged, questions_of

    progress.stage(f"Verifying {merged_repo_id} against step {adapter.step}")
    checkpoint = next((c for c in run.checkpoints if c.step == adapter.step), None)
    tokenizer = run.tokenizer_dir(checkpoint) if checkpoint is not None else None
    folder = published_folder(merged, prepared, merged.out_dir.with_name(f"verify-step-{adapter.step}"))
    try:
        check = check_merged(
            MergedCheckInput(
                base_dir=plan.base_dir,
                adapter_dir=adapter.dir,
                adapter_tokenizer_dir=tokenizer or plan.base_dir,
                merged_dir=folder,
                questions=questions_of(prepared.evaluation.samples if prepared.evaluation else ()),
                system_prompt=run.manifest.system_prompt,
                artifact=merged_repo_id,
                adapter=f"step {adapter.step}",
            )
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not check.passed:
        raise VerificationError(
            f"{check.refusal()}; nothing was published (--no-verify publishes it unchecked)"
        )
    return replace(record, verified=check.to_dict())


def verified_gguf(
    request: PushRequest,
    prepared: Prepared,
    decided: Decided,
    merged: MergeResult | None,
    exported: tuple[tuple[PlannedFile, ...], GGUFRecord | None],
    repo_id: str,
) -> tuple[tuple[PlannedFile, ...] | None, GGUFRecord | None]:
    """The GGUF files this push writes to `repo_id` (None: it does not write that repo) and the repo's
    record, each file checked first against the merged folder it was written from (`hubkit.verify.gguf`;
    in llama.cpp too when llama-cpp-python is installed), the checks in the record, unless `request.verify`
    is off.

    Raises:
        VerificationError: a file's tokenizer, end token or top-1 agreement is not the merged model's, in one
            line.
    """
    files, record = exported
    if not decided.gguf.writes_repo:
        return None, record
    if not request.verify or merged is None or not files:
        return files, record
    from hubkit.verify.gguf import check_gguf, gguf_reference
    from hubkit.verify.merged import questions_of

    questions = questions_of(prepared.evaluation.samples if prepared.evaluation else ())
    system_prompt = prepared.run.manifest.system_prompt
    reference = gguf_reference(merged.out_dir, questions, system_prompt)
    verified = {}
    for planned in files:
        if "/" in planned.path_in_repo or planned.local_path is None:  # a GGUF LoRA is no whole model
            continue
        artifact = f"{repo_id}/{planned.path_in_repo}"
        check = check_gguf(planned.local_path, merged.out_dir, questions, system_prompt, artifact, reference)
        if not check.passed:
            raise VerificationError(
                f"{check.refusal()}; nothing was published (--no-verify publishes it unchecked)"
            )
        if check.gguf_type is not None:
            verified[check.gguf_type] = check.to_dict()
    return files, replace(record, verified=verified) if record is not None else None
