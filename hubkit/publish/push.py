"""The push, as one library call: `push_run(PushRequest(...)) -> PushReport`, in four named stages, each
handing a plain record to the next:

    prepare locally   `Prepared`: the run loaded, its checkpoints chosen, the adapters and every other file
                      the run gives vetted and prepared (every refusal that needs no network)
    read the Hub      `HubState`: every repo and checkpoint branch of the release at once, the base's config
                      and card, the run's sweep (its Collection once, its page, the other runs and their cards)
    decide            `Decided`: the adapters against the base, the merge and GGUF decisions, the Space's
                      files, the merge's plan (the base fetched and its files vetted), the checkpoint
                      branches, the adapter repo's plan but its card: every check passes before any repo exists
    execute           `PushReport`: the adapter repo created if new and its weights sent while merging and
                      exporting, each repo's plan (a sweep's page and sibling cards too:
                      `hubkit.publish.sweep`), one commit per repo, then per checkpoint branch; then the
                      sweep's Collection changes

A dry run is the same prepare and decide, against the last recorded push instead of the Hub (it opens no
connection, so what needs the Hub, the base's checks and the merge, is left to the push), and the plan
without execute. `PushSession` keeps what one push (or a watch, or a training callback) has done already.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from huggingface_hub import HfApi

from hubkit.adapters.base_check import BaseConfig
from hubkit.adapters.prepare import PreparedAdapter, prepare_adapters
from hubkit.cards import BaseModelCard, read_base_model_card
from hubkit.errors import StorageQuotaError, UnsafeFileError
from hubkit.hub.auth import hub_client, resolve_token
from hubkit.hub.hashing import FileHashCache
from hubkit.hub.retry import DEFAULT_RETRY
from hubkit.publish.adapter_repo import (
    check_adapters_against_base,
    checked_checkpoints_tree,
    plan_adapter_repo,
    plan_run_files,
    published_forms,
)
from hubkit.publish.create import created_if_new
from hubkit.publish.diff import diff_repo
from hubkit.publish.gguf_repo import SessionExports, decide_gguf
from hubkit.publish.hub_reads import HubState, read_hub
from hubkit.publish.merge_decision import base_revision, decide_merge
from hubkit.publish.merged_repo import vet_base_files
from hubkit.publish.plan import PlannedFile, PushPlan
from hubkit.publish.push_commits import UploadsAhead, commit_plan
from hubkit.publish.push_record import load_record, records_of_plan, remote_from_record
from hubkit.publish.push_stages import Decided, Prepared, verified_gguf, verified_record
from hubkit.publish.quantized_base import check_quantized_base
from hubkit.publish.release_repos import ReleaseLinks, ReleaseRepos, open_space, remove_if_empty
from hubkit.publish.repos import BuildContext, build_repos, vet_base_card
from hubkit.publish.request import PushProgress, PushReport, PushRequest, adapter_repo_id
from hubkit.publish.revisions import plan_revisions
from hubkit.publish.samples_repo import plan_samples_files
from hubkit.publish.sweep.collection import in_sweep, planned_sweep, with_sweep
from hubkit.publish.sweep.plans import with_sweep_plan
from hubkit.publish.sweep.space import plan_space
from hubkit.publish.vetted import Vetter
from hubkit.release.layout import revision_name, steps_in_paths
from hubkit.runs import Checkpoint, Run, load_run, refuse_no_checkpoint, select_checkpoints
from hubkit.runs.completions import Completions, read_completions
from hubkit.runs.eval_results import load_eval
from hubkit.safety import VetContext

if TYPE_CHECKING:
    from hubkit.cards.gguf_record import GGUFRecord
    from hubkit.cards.merge_record import MergeRecord
    from hubkit.merge import MergePlan, MergeResult


class PushSession:
    """One push's working state, kept across pushes of the same run (watching, training callbacks).

    Use as a context manager: its staging folder (prepared adapters, merged models) is removed on exit.

        with PushSession(request) as session:
            report = session.push()

    What it keeps, each written only here: the prepared adapters, merges and steps checked against the base
    by step, the file hashes, the vetted files, the chosen repo id, the base model's card.
    """

    def __init__(self, request: PushRequest) -> None:
        self.request = request
        self._staging = tempfile.TemporaryDirectory(prefix="hubkit-push-")
        self.staging = Path(self._staging.name)
        self.hashes = FileHashCache()
        self.gguf_exports = SessionExports(self.staging)
        self._prepared: dict[int, PreparedAdapter] = {}
        self._merges: dict[int, MergeResult] = {}
        self._checked: set[int] = set()
        self._api: HfApi | None = None
        self._vetter: Vetter | None = None
        self._repo_id: str | None = None
        self._base: BaseModelCard | None = None

    def __enter__(self) -> PushSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._staging.cleanup()

    # --- the push --------------------------------------------------------------------------------

    def push(
        self,
        progress: PushProgress | None = None,
        *,
        run: Run | None = None,
        may_merge: bool = True,
        allow_missing_steps: bool = False,
    ) -> PushReport:
        """Publish the run's chosen checkpoints as the request says (the stages: the module docstring); the
        report has one entry per repo and branch with its commit (or none when unchanged).

        Args:
            run: the run, when the caller has loaded it already (a watch); else it is loaded.
            may_merge: whether this push may merge when the request asks for a merged model (a watching
                push merges only once the run has finished).
            allow_missing_steps: listed `steps` the run has not saved yet are skipped, not refused
                (a watching push waits for them).

        Raises:
            HubkitError: every refusal (run, checkpoint, adapter, base model, token, Hub) as its subclass.
        """
        progress = progress or PushProgress()
        prepared = self._prepare_locally(run, progress, allow_missing_steps)
        hub = self._recorded_hub(prepared) if self.request.dry_run else self._read_hub(prepared)
        decided = self._decide(prepared, hub, progress, may_merge=may_merge)
        if hub.api is None:
            return self._dry_run_report(prepared, hub, decided)
        api = hub.api
        new = [(r, kind) for r, kind in hub.repos.kinds().items() if not hub.remotes[r].exists]
        try:
            repos, refused_space = open_space(api, hub.repos, hub.remotes, self.request)
            if refused_space is not None:
                decided = replace(decided, notes=(*decided.notes, refused_space))
            report = self._execute(prepared, replace(hub, repos=repos), decided, progress)
        except (StorageQuotaError, UnsafeFileError) as refused:
            # Refused for what it holds: no repo left behind (a failure a rerun gets past keeps its uploads).
            removed = ", ".join(remove_if_empty(api, new))
            if removed and isinstance(refused, StorageQuotaError):
                raise StorageQuotaError(
                    f"{refused}; removed {removed}, created by this push with nothing committed"
                ) from refused
            raise
        return with_sweep(api, report, self.request)

    # --- the stages, in order --------------------------------------------------------------------

    def _prepare_locally(
        self, run: Run | None, progress: PushProgress, allow_missing_steps: bool
    ) -> Prepared:
        """Load, choose, vet and prepare: every refusal that needs no network."""
        request = self.request
        run = run or load_run(request.run_dir, base_model=request.base_model, steps=request.steps)
        run = in_sweep(run, request.sweep)
        chosen = select_checkpoints(run, request.steps, request.every, allow_missing=allow_missing_steps)
        tree = checked_checkpoints_tree(run, chosen, request.checkpoints_dir)
        # The token is resolved first: every file is checked not to contain it.
        token = request.token or resolve_token(request.endpoint, required=not request.dry_run)
        vetter = self._vetting(VetContext.for_run(run.run_dir, run.manifest.base_model, token))
        adapters = self._prepare(run, chosen, progress, vetter)
        run_files = plan_run_files(run, adapters, vetter=vetter, hashes=self.hashes)
        evaluation = load_eval(run.run_dir)  # its files were vetted with the run's
        completions = Completions()
        if request.samples:
            completions = read_completions(run.run_dir, run.manifest.framework, run.manifest.checkpoints_dir)
        return Prepared(run, tree, token, vetter, adapters, run_files, evaluation, completions)

    def _read_hub(self, prepared: Prepared) -> HubState:
        """Every repo and branch of the release read at once (and those this push does not write, which the
        cards link while they exist), the base model's config and card, the run's sweep (`read_hub`)."""
        api = self._client(prepared.token)
        repo_id = self._adapter_repo_id(prepared.run, api)
        repos = ReleaseRepos.of(self.request, repo_id, prepared.run.manifest.sweep)
        branches = [revision_name(a.step) for a in prepared.adapters]
        problems = prepared.evaluation.summary.problems if prepared.evaluation is not None else None
        benchmark = problems.source if problems is not None and problems.whole else None
        hub = read_hub(api, prepared.run, repos, branches, self._base, benchmark)
        self._base = hub.base_card
        return hub

    def _recorded_hub(self, prepared: Prepared) -> HubState:
        """The release as this run directory's records say the last push left it (a dry run's hub), and
        the base model's config and card as the client's cache holds them: no connection (a base never
        downloaded here has no config to check against and a card without a licence)."""
        request, endpoint, manifest = self.request, self.request.endpoint, prepared.run.manifest
        repos = ReleaseRepos.of(request, self._adapter_repo_id(prepared.run, None), manifest.sweep)
        ids = [repos.adapter, repos.merged, repos.gguf, repos.linked_space]
        ids += [repos.samples] if repos.samples is not None else []
        remotes = {r: remote_from_record(load_record(request.run_dir, endpoint, r), r) for r in ids}
        branches = {}
        for adapter in prepared.adapters:
            name = revision_name(adapter.step)
            record = load_record(request.run_dir, endpoint, repos.adapter, name)
            branches[name] = remote_from_record(record, repos.adapter)
        base_card = read_base_model_card(manifest.base_model, manifest.base_model_revision, cached_only=True)
        config = BaseConfig.cached(manifest.base_model, manifest.base_model_revision)
        return HubState(None, repos, remotes, branches, config, base_card)

    def _decide(
        self, prepared: Prepared, hub: HubState, progress: PushProgress, *, may_merge: bool
    ) -> Decided:
        """Every decision and every remaining check, before any repo is created: the adapters against the
        base, the merge and GGUF decisions, the Space's files, the merge's plan, the base files and card,
        the checkpoint branches. Against a recorded remote (a dry run) the check against the base and the
        merge's plan are left to the push."""
        request, run, vetter, repos = self.request, prepared.run, prepared.vetter, hub.repos
        config = hub.base_config
        notes = [*repos.notes]
        notes += check_quantized_base(
            run, config.config if config else None, merging=request.merged, space=repos.space is not None
        )
        if config is not None and hub.api is not None:  # a cached config may be stale: the push checks
            self._check_against_base(run, prepared.adapters, config)
        revision = base_revision(config.path) if config else None
        merging = decide_merge(
            prepared.adapters,
            hub.remotes[repos.adapter],
            hub.remotes[repos.merged],
            run,
            merging=request.merged,
            may_merge=may_merge,
            revision=revision,
        )
        gguf = decide_gguf(request, merging, prepared.adapters, hub.remotes[repos.gguf])
        notes += [n for n in (merging.note, gguf.note) if n]
        # The merged repo the Space names: the one the release has after this push.
        space_merged = repos.merged if request.merged or merging.adapter or merging.kept else None
        # Vetted now: everything the Space's files say is known before any repo exists (a sweep's: its runs).
        steps = (*steps_in_paths(hub.remotes[repos.adapter].files), *(a.step for a in prepared.adapters))
        space_files = plan_space(run, repos, hub.sweep, steps, space_merged, request, vetter, self.hashes)
        # The GGUF files are written from the newest merge: this push's, or one made for them when the
        # merged repo holds it already.
        to_merge = merging.adapter or gguf.export
        merge_plan = None
        if hub.api is not None:
            merge_plan = self._plan_merge(run, to_merge, prepared.token, progress)
        if merge_plan is not None:
            notes += vet_base_files(merge_plan, run.manifest.base_model, prepared.run_files, vetter)
        base_card = vet_base_card(hub.base_card, vetter)  # the cards' one input not from the run
        if gguf.export is not None and hub.api is not None:
            source = merge_plan.base_dir if merge_plan is not None else self._merges[gguf.export.step].out_dir
            self.gguf_exports.check(gguf, source, repos, base_card)
        branches = plan_revisions(run, repos.adapter, prepared.run_files, vetter=vetter, hashes=self.hashes)
        adapter_files = plan_adapter_repo(
            run,
            repos.adapter,
            prepared.run_files,
            private=request.private,
            published_steps=steps_in_paths(hub.remotes[repos.adapter].files),
        )
        samples = ()
        if repos.samples is not None:
            samples = plan_samples_files(
                repos.samples,
                repos.adapter,
                run,
                prepared.evaluation,
                prepared.completions,
                vetter,
                self.hashes,
            )
        return Decided(
            tuple(notes),
            revision,
            merging,
            gguf,
            space_files,
            to_merge,
            merge_plan,
            base_card,
            branches,
            adapter_files,
            samples,
        )

    def _execute(
        self, prepared: Prepared, hub: HubState, decided: Decided, progress: PushProgress
    ) -> PushReport:
        """Create the adapter repo if it is new and start its weights uploading, merge and export meanwhile,
        then one commit per repo, and one per checkpoint branch."""
        run, repos, remotes, api = prepared.run, hub.repos, hub.remotes, hub.api
        assert api is not None  # a recorded remote is a dry run's, which executes nothing
        remotes[repos.adapter] = created_if_new(api, remotes[repos.adapter], private=self.request.private)
        retry = replace(DEFAULT_RETRY, max_wait=self.request.max_wait)
        uploads_ahead = UploadsAhead(api, diff_repo(decided.adapter_files, remotes[repos.adapter]), retry)
        try:
            newest_merge = self._merge(decided.to_merge, decided.merge_plan, progress)
            merged = newest_merge if decided.merging.adapter is not None else None
            merge_record = verified_record(self.request, prepared, decided, merged, repos.merged, progress)
            exported = self.gguf_exports.publish(
                decided.gguf,
                newest_merge,
                merge_record,
                repos=repos,
                base=decided.base_card,
                run_files=prepared.run_files,
                vetter=prepared.vetter,
                hashes=self.hashes,
                progress=progress.gguf,
            )
            gguf_files, gguf_record = verified_gguf(
                self.request, prepared, decided, newest_merge, exported, repos.gguf
            )
            plan = self._plan(prepared, hub, decided, merged, merge_record, gguf_files, gguf_record)
            plan, sweep_notes = with_sweep_plan(
                plan, hub, prepared, decided.space_files, self.request.private
            )
            committed = commit_plan(
                api, plan, remotes, hub.branches, self.request, progress, uploads_ahead, retry
            )
        except (StorageQuotaError, UnsafeFileError):
            uploads_ahead.close(wait=True)  # the repos this push created are removed next
            raise
        finally:
            uploads_ahead.close()
        return PushReport(
            run_id=run.manifest.run_id,
            repo_id=repos.adapter,
            steps=tuple(a.step for a in prepared.adapters),
            repos=committed.repos,
            revisions=committed.branches,
            plan=plan,
            notes=(*decided.notes, *sweep_notes, *committed.notes),
            finished=run.finished and not run.pending,
        )

    def _dry_run_report(self, prepared: Prepared, hub: HubState, decided: Decided) -> PushReport:
        """The plan as far as it is known without the Hub, compared with the last recorded push, with what is
        left out and what vetting changed."""
        run, adapters, repos, request = prepared.run, prepared.adapters, hub.repos, self.request
        sweep = planned_sweep(run, repos.adapter, request.run_dir, request.endpoint, repos.space)
        notes = [*decided.notes, *sweep]
        if decided.to_merge is not None:
            gguf = (
                f", and written as GGUF ({', '.join(request.gguf)}) to {repos.gguf}" if request.gguf else ""
            )
            notes.append(
                f"{repos.merged}: step {decided.to_merge.step} would be merged into {run.manifest.base_model}"
                f"{', verified' * request.verify} and pushed{gguf} (a dry run does not merge)"
            )
        merge_record = decided.merging.kept
        if decided.merging.adapter is not None and hub.base_config is not None:
            # The merged card as the merge would make it (its weights are not planned: nothing is merged).
            dtype = hub.base_config.config.dtype
            merge_record = decided.merging.record_after(None, run, decided.base_revision, dtype=dtype)
        plan = self._plan(prepared, hub, decided, merge_record=merge_record)
        return PushReport(
            run_id=run.manifest.run_id,
            repo_id=repos.adapter,
            steps=tuple(a.step for a in adapters),
            repos=(),
            plan=plan,
            records=records_of_plan(plan, request.run_dir, request.endpoint),
            notes=tuple(notes),
            finished=run.finished and not run.pending,
            dry_run=True,
            checkpoints_from=prepared.tree.describe(),
            left_out=prepared.run_files.left_out,
            changes=prepared.run_files.changes,
        )

    # --- the steps, in order ---------------------------------------------------------------------

    def _vetting(self, context: VetContext) -> Vetter:
        """The session's vetting for `context` (what it vetted is kept while the context stays the same)."""
        if self._vetter is None or self._vetter.context != context:
            self._vetter = Vetter(context)
        return self._vetter

    def _prepare(
        self, run: Run, chosen: tuple[Checkpoint, ...], progress: PushProgress, vetter: Vetter
    ) -> list[PreparedAdapter]:
        """The chosen checkpoints' adapters, each vetted and prepared once per session (every local refusal)."""
        if not chosen:
            refuse_no_checkpoint(run)
        new = [c for c in chosen if c.step not in self._prepared]
        if new:
            progress.stage(f"Checking {len(new)} adapter(s) of run {run.manifest.run_id}")
            forms = published_forms(new, vetter)
            prepared = prepare_adapters(run, new, self.staging / "adapters", forms=forms)
            self._prepared.update({adapter.step: adapter for adapter in prepared})
        return [self._prepared[c.step] for c in chosen]

    def _client(self, token: str | None) -> HfApi:
        if self._api is None:
            self._api = hub_client(self.request.endpoint, token, self.request.max_wait)
        return self._api

    def _adapter_repo_id(self, run: Run, api: HfApi | None) -> str:
        if self._repo_id is None:
            self._repo_id = adapter_repo_id(self.request.repo_id or run.manifest.push_to, run, api)
        return self._repo_id

    def _check_against_base(self, run: Run, adapters: list[PreparedAdapter], base: BaseConfig) -> None:
        unchecked = [a for a in adapters if a.step not in self._checked]
        self._checked.update(check_adapters_against_base(run, unchecked, base))

    def _plan_merge(
        self, run: Run, adapter: PreparedAdapter | None, token: str | None, progress: PushProgress
    ) -> MergePlan | None:
        """Every check of the merge (the base fetched, each LoRA module matched to a base weight), before
        anything is sent; None when there is nothing to merge or this session merged that step already."""
        if adapter is None or adapter.step in self._merges:
            return None
        progress.stage(f"Merging step {adapter.step} into {run.manifest.base_model}")
        from hubkit.merge.checkpoint import plan_checkpoint_merge

        return plan_checkpoint_merge(run, adapter, endpoint=self.request.endpoint, token=token)

    def _merge(
        self, adapter: PreparedAdapter | None, plan: MergePlan | None, progress: PushProgress
    ) -> MergeResult | None:
        """The merge of `adapter` (written now from `plan`, or made earlier in this session), or None."""
        if adapter is None:
            return None
        if plan is not None:
            # Imported here: torch costs 0.9 s to import, paid only by a push that merges.
            from hubkit.merge import execute_plan

            out_dir = self.staging / f"merged-step-{adapter.step}"
            self._merges[adapter.step] = execute_plan(plan, out_dir, progress.merge)
        return self._merges[adapter.step]

    def _plan(
        self,
        prepared: Prepared,
        hub: HubState,
        decided: Decided,
        merged: MergeResult | None = None,
        merge_record: MergeRecord | None = None,
        gguf_files: tuple[PlannedFile, ...] | None = None,
        gguf_record: GGUFRecord | None = None,
    ) -> PushPlan:
        """Every repo's and branch's planned files, from the decisions and what executing them made (a dry
        run: nothing made). `gguf_files` is None when this push does not write the GGUF repo, empty when it
        refreshes only its card."""
        repos = hub.repos
        linked_space = hub.remotes.get(repos.linked_space)
        links = ReleaseLinks(
            merged=repos.merged if merge_record is not None else None,
            merged_step=merge_record.step if merge_record is not None else None,
            gguf=repos.gguf if gguf_record is not None else None,
            gguf_step=gguf_record.merge.step if gguf_record is not None else None,
            space=repos.space or (repos.linked_space if linked_space and linked_space.exists else None),
            samples=repos.samples if decided.samples_files else None,
            sweep_siblings=hub.sweep_siblings,
        )
        context = BuildContext(
            run=prepared.run,
            repos=repos,
            adapters=tuple(prepared.adapters),
            run_files=prepared.run_files,
            adapter_files=decided.adapter_files,
            remotes=hub.remotes,
            base_card=decided.base_card,
            hashes=self.hashes,
            vetter=prepared.vetter,
            links=links,
            eval=prepared.evaluation,
            benchmark_tasks=hub.benchmark_tasks,
            # The merged repo is written when this push merges, or to refresh the card of the merge it holds.
            writes_merged=decided.merging.card_only
            or (decided.merging.adapter is not None and merge_record is not None),
            merged=merged,
            merge_record=merge_record,
            space_files=decided.space_files,
            samples_files=decided.samples_files,
            writes_gguf=gguf_files is not None,
            gguf_files=gguf_files or (),
            gguf_record=gguf_record,
            private=self.request.private,
        )
        return PushPlan(repos=build_repos(context), branches=decided.branches)


def push_run(request: PushRequest, progress: PushProgress | None = None) -> PushReport:
    """Publish a run: adapters, merged model, and what the run's repos hold, in one commit per repo; every
    refusal is a `HubkitError`, raised before anything is sent when the cause is local.

        from hubkit.publish import PushRequest, push_run
        report = push_run(PushRequest(run_dir=Path("runs/RUN"), repo_id="me/qwen3-4b-grpo"))
    """
    with PushSession(request) as session:
        return session.push(progress)
