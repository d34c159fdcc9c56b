"""An evaluation of a published release, pushed back into its adapter repo (`hubkit eval --repo-id --push`):
``eval/results.json`` and ``eval/samples.jsonl``, and the adapter card rendered again from what the release
publishes (manifest, metrics, steps) with the evaluation, in one commit.

The card is written as a push writes it, from the release read back as a run (`hubkit.release.read`): the
evaluation table and chart, each step's accuracy, the before/after answers. The merged model's section is
kept when ``<repo>-merged`` exists and its card's merge record names a step of this repo, and the Space's
link while ``<repo>-demo`` exists.
The merged card and the Space are left as they are.
"""

from __future__ import annotations

from huggingface_hub import HfApi

from hubkit.cards import CardInputs, adapter_card_files, read_base_model_card
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import PublishError
from hubkit.evaluate.problems import TRAIN_PROBLEM_HASHES_NAME
from hubkit.evaluate.results import EvalResults, eval_file_bytes
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.adapter_repo import adapter_bytes_in_repo
from hubkit.publish.commit import CommitResult, commit_repo, hub_errors
from hubkit.publish.diff import diff_repo
from hubkit.publish.merged_repo import default_merged_repo_id
from hubkit.publish.plan import RepoPlan
from hubkit.publish.remote import read_remote
from hubkit.publish.vetted import Vetter
from hubkit.release.layout import checkpoint_files
from hubkit.release.read import Release, download_release, read_release
from hubkit.safety import VetContext, kinds
from hubkit.space.config import default_space_repo_id


def merged_step_on_hub(api: HfApi, adapter_repo_id: str) -> int | None:
    """The step of `adapter_repo_id` its merged repo (``<repo>-merged``) holds, from the merge record in the
    merged card's metadata; None when there is no merged repo, or it records no merge of this repo."""
    record = MergeRecord.from_card_data(read_remote(api, default_merged_repo_id(adapter_repo_id)).card_data)
    return record.step if record is not None and record.adapter_repo == adapter_repo_id else None


def _check_same_adapters(evaluated: Release, now: Release, steps: tuple[int, ...]) -> None:
    changed = [
        s for s in steps if any(evaluated.files.get(p) != now.files.get(p) for p in checkpoint_files(s))
    ]
    if changed:
        raise PublishError(
            f"{now.repo_id} changed step(s) {', '.join(map(str, changed))} since they were evaluated: "
            "evaluate again, then push"
        )


def push_release_eval(
    api: HfApi, evaluated: Release, results: EvalResults, *, token: str | None
) -> CommitResult:
    """Commit `results` and the card rendered again with them to the release's adapter repo.

    Args:
        api: a client bound to the release's Hub, with a token that can write to the repo.
        evaluated: the release as it was read for the evaluation.
        results: the evaluation of (some of) its steps.
        token: the token in use, so that a file holding it is refused.

    Returns:
        The commit (`commit_sha` None when the repo already held exactly these files).

    Raises:
        PublishError: the evaluated steps changed on the Hub since, the repo moved while pushing, or the
            Hub refused.
        AuthError: the token cannot write to the repo.
        UnsafeFileError: a file that must not be published (a secret, a local path: `hubkit.safety`).
    """
    endpoint = api.endpoint
    repo_id = evaluated.repo_id
    now = read_release(repo_id, endpoint=endpoint, token=token, error=PublishError)
    _check_same_adapters(evaluated, now, tuple(m.step for m in results.summary.checkpoints))
    run = download_release(
        now,
        (),
        extra=(TRAIN_PROBLEM_HASHES_NAME,),
        endpoint=endpoint,
        token=token,
        error=PublishError,
        max_bytes=kinds.max_bytes_of,
    )
    with hub_errors(repo_id, endpoint):
        remote = read_remote(api, repo_id)
        merged_repo_id = default_merged_repo_id(repo_id)
        merged_step = merged_step_on_hub(api, repo_id)
        space = read_remote(api, default_space_repo_id(repo_id), "space")
    if merged_step not in now.steps:
        merged_step = None  # the merged repo holds none of this release's steps: not this release's
    if remote.head_sha != now.commit:
        raise PublishError(f"{repo_id} changed on the Hub while pushing; nothing was committed, run it again")
    manifest = now.manifest
    inputs = CardInputs(
        run=run,
        repo_id=repo_id,
        steps=now.steps,
        base=read_base_model_card(
            manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
        ),
        adapter_bytes=adapter_bytes_in_repo(remote.files),
        has_tokenizer=now.has_tokenizer,
        merged_repo_id=merged_repo_id if merged_step is not None else None,
        merged_step=merged_step,
        space_repo_id=space.repo_id if space.exists else None,
        eval=results,
    )
    files = {**eval_file_bytes(results.summary, results.samples), **adapter_card_files(inputs)}
    vetter = Vetter(VetContext.for_run(run.run_dir, manifest.base_model, token))
    planned = vetter.generated(files, "model", FileHashCache())
    plan = RepoPlan(repo_id=repo_id, files=planned, title=f"hubkit eval {manifest.run_id}")
    return commit_repo(api, diff_repo(plan, remote))
