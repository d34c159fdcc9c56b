"""Every published checkpoint also as a branch of the adapter repo, named `step-N`, holding that
checkpoint's adapter at its root:

    PeftModel.from_pretrained(base, "me/run", revision="step-200")
    PeftModel.from_pretrained(base, "me/run", subfolder="checkpoints/global_step_200")   # the same adapter

The convention of Pythia's and OLMo's `stepN` revisions and open-r1's per-save branches, which TGI loads as
`me/run@step-200`. A branch starts from the repo's first commit (`.gitattributes` only) and holds the
adapter's weights and config and a short card pointing at the main branch. Its weights are the main
branch's LFS objects (same sha256), so the Hub already holds them: a branch costs a commit, no upload. Each
push commits only to the branches of its own checkpoints, and only what differs (an unchanged re-push
makes no commit on any branch).
"""

from __future__ import annotations

from dataclasses import replace

from hubkit.cards.revision import revision_card
from hubkit.formats.peft import ADAPTER_FILES
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.adapter_repo import RunFiles
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.vetted import Vetter
from hubkit.release.layout import checkpoint_dir, revision_name
from hubkit.runs import Run


def plan_revisions(
    run: Run, repo_id: str, run_files: RunFiles, *, vetter: Vetter, hashes: FileHashCache
) -> tuple[RepoPlan, ...]:
    """The branch of each checkpoint this push publishes: its adapter files at the root, and its card.

    Everything they hold is known before any repo is created, and so the push plans them then: one plan per
    step, in step order, the run files' checkpoint files placed again (not read again), each card vetted.

    Raises:
        UnsafeFileError: a branch's card holds a secret or a local path.
    """
    by_step: dict[int, list[PlannedFile]] = {}
    for planned in run_files.checkpoints:
        if planned.step is not None:
            by_step.setdefault(planned.step, []).append(planned)
    plans = []
    for step, files in sorted(by_step.items()):
        revision = revision_name(step)
        prefix = f"{checkpoint_dir(step)}/"
        placed = [replace(f, path_in_repo=f.path_in_repo.removeprefix(prefix)) for f in files]
        if {f.path_in_repo for f in placed} != set(ADAPTER_FILES):
            raise ValueError(
                f"step {step}'s planned files are not an adapter: {sorted(f.path_in_repo for f in placed)}"
            )
        card = revision_card(repo_id, run.manifest.base_model, step, revision)
        placed += vetter.generated({"README.md": card.encode()}, "model", hashes, step=step)
        plans.append(
            RepoPlan(
                repo_id=repo_id,
                files=tuple(placed),
                title=f"hubkit push {run.manifest.run_id} ({revision})",
                revision=revision,
            )
        )
    return tuple(plans)
