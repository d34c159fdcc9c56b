"""Whether a push merges, and what the merged repo holds afterwards.

A merge of a Qwen3-4B-sized base takes half a minute and rewrites 8 GB, so it is made only when the
merged repo does not already hold it: the merged repo's card records what was merged (`MergeRecord`:
the adapter's sha256, its config's, the base model and the commit it was read at), the push's one read
of that repo returns the record, and a push whose newest adapter and base match it merges nothing and
refreshes only the card.

The merged repo is read even when the push does not merge (``--no-merged``, a watch before the run
ends): the adapter card keeps linking the merged model while the Hub holds it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.cards.merge_record import MergeRecord
from hubkit.formats.peft import ADAPTER_CONFIG
from hubkit.hub.remote import RemoteRepo
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.release.layout import steps_in_paths

if TYPE_CHECKING:
    from hubkit.adapters.prepare import PreparedAdapter
    from hubkit.merge import MergeResult
    from hubkit.runs import Run

_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class MergeDecision:
    """What one push does about the merged model.

    Args:
        adapter: the adapter this push merges, or None.
        kept: the merge the merged repo already holds and keeps (None when it holds none, or this push
            replaces it).
        note: why nothing is merged, when the user should know.
        card_only: the merged repo holds this push's merge already: only its card is refreshed.
    """

    adapter: PreparedAdapter | None
    kept: MergeRecord | None = None
    note: str | None = None
    card_only: bool = False
    adapter_repo: str = ""

    def record_after(
        self, merged: MergeResult | None, run: Run, revision: str | None, *, dtype: str | None = None
    ) -> MergeRecord | None:
        """What the merged repo holds after the push: the merge it made (`merged`), else the one kept. A dry
        run, which makes no merge, gives the base's `dtype` instead: the record the merge would make, every
        module the adapter adapts merged."""
        if self.adapter is None or (merged is None and dtype is None):
            return self.kept
        return merge_record(
            self.adapter,
            self.adapter_repo,
            run,
            revision,
            dtype=merged.dtype if merged is not None else dtype,  # type: ignore[arg-type]
            merged_modules=merged.merged_modules if merged is not None else self.adapter.num_modules,
        )


def base_revision(config_path: Path) -> str | None:
    """The commit of the base model a downloaded file was read at, from where the Hub client's cache keeps
    it (``.../snapshots/<commit>/config.json``); None for a file outside that cache."""
    folder = config_path.parent
    if folder.parent.name == "snapshots" and _COMMIT_RE.match(folder.name):
        return folder.name
    return None


def _config_sha256(adapter: PreparedAdapter) -> str:
    return hashlib.sha256((adapter.dir / ADAPTER_CONFIG).read_bytes()).hexdigest()


def merge_record(
    adapter: PreparedAdapter,
    repo_id: str,
    run: Run,
    revision: str | None,
    *,
    dtype: str,
    merged_modules: int,
) -> MergeRecord:
    """The record of merging `adapter` (of adapter repo `repo_id`) into the run's base at `revision`,
    with what the merge made (or what a published merge of it made, to compare the two)."""
    return MergeRecord(
        adapter_repo=repo_id,
        step=adapter.step,
        adapter_sha256=adapter.weights.sha256,
        adapter_config_sha256=_config_sha256(adapter),
        base_model=run.manifest.base_model,
        base_revision=revision,
        dtype=dtype,
        merged_modules=merged_modules,
    )


def decide_merge(
    adapters: Sequence[PreparedAdapter],
    adapter_remote: RemoteRepo,
    merged_remote: RemoteRepo | None,
    run: Run,
    *,
    merging: bool,
    may_merge: bool,
    revision: str | None,
) -> MergeDecision:
    """The one merge decision of a push.

    The newest adapter is merged unless the request wants no merge (``--no-merged``), this push may not
    merge yet (a watch before the run finished), the adapter repo already holds a newer step (the merged
    model follows the adapter at the root), or the merged repo already holds this very merge (of
    `revision`, the base's commit this push reads: `base_revision`).
    """
    repo_id = adapter_remote.repo_id
    published = (
        MergeRecord.from_card_data(merged_remote.card_data)
        if merged_remote and merged_remote.exists
        else None
    )
    if published is not None and published.adapter_repo != repo_id:
        published = None  # a merged repo of another adapter repo: not this release's
    if not merging or not may_merge:
        return MergeDecision(None, kept=published, adapter_repo=repo_id)
    newest = adapters[-1]
    newest_published = max(steps_in_paths(adapter_remote.files), default=-1)
    if newest.step < newest_published:
        return MergeDecision(
            None,
            kept=published,
            note=(
                f"The adapter repo already holds step {newest_published}, newer than this push's steps: "
                "the merged model is left as it is"
            ),
            adapter_repo=repo_id,
        )
    if published is not None and published.step == newest.step:
        candidate = merge_record(
            newest,
            repo_id,
            run,
            revision,
            dtype=published.dtype,
            merged_modules=published.merged_modules,
        )
        if candidate.is_merge_of(published):
            merged_repo = merged_remote.repo_id if merged_remote else "the merged repo"
            return MergeDecision(
                None,
                kept=published,
                note=f"{merged_repo} already holds step {newest.step} merged into this base: not merged again",
                card_only=True,
                adapter_repo=repo_id,
            )
    return MergeDecision(newest, adapter_repo=repo_id)


def plan_merged_card(run: Run, repo_id: str, card: Sequence[PlannedFile], *, private: bool) -> RepoPlan:
    """The merged repo's plan when it already holds this push's merge: only its card (vetted as it was
    planned), refreshed (the weights, config and tokenizer stay as they are: a push never deletes)."""
    return RepoPlan(
        repo_id=repo_id,
        files=tuple(card),
        private=private,
        title=f"hubkit push {run.manifest.run_id} (merged)",
    )
