"""An evaluation of a published release, pushed back into its adapter repo (`hubkit eval --repo-id --push`):
``eval/results.json`` and ``eval/samples.jsonl``, and the adapter card rendered again from what the release
publishes (manifest, metrics, steps) with the evaluation, and the Hub's record of a registered benchmark's
score (`hubkit.publish.benchmark_results`), in one commit.

The card is written as a push writes it, from the release read back as a run (`hubkit.release.read`): the
evaluation table and chart, each step's accuracy, the before/after answers. The release's other repos are
those its adapter card names (``hubkit_release`` in its metadata; each one's default name,
`hubkit.release.companions`, for a card that names none): the merged model's and the GGUF files'
sections are kept while their repo's record names a step of this repo, the Space's link while it exists.
The merged card, the GGUF card and the Space are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from huggingface_hub import HfApi

from hubkit.cards import adapter_card_files, read_base_model_card
from hubkit.cards.gguf_record import GGUFRecord
from hubkit.cards.merge_record import MergeRecord
from hubkit.cards.metadata import RELEASE_KEY
from hubkit.errors import PublishError
from hubkit.hub.failures import hub_errors
from hubkit.hub.hashing import FileHashCache
from hubkit.hub.remote import RemoteRepo, read_remote
from hubkit.publish.benchmark_results import eval_results_files, read_benchmark_tasks
from hubkit.publish.commit import commit_repo
from hubkit.publish.diff import diff_repo
from hubkit.publish.plan import RepoPlan, is_repo_id
from hubkit.publish.release_repos import ReleaseLinks, release_card_inputs
from hubkit.publish.request import RepoReport
from hubkit.publish.sweep.siblings import read_siblings
from hubkit.publish.vetted import Vetter
from hubkit.release.companions import COMPANIONS, GGUF, MERGED, SAMPLES, SPACE
from hubkit.release.layout import checkpoint_files
from hubkit.release.read import Release, download_release, release_of
from hubkit.runs.eval_results import EvalResults, eval_file_bytes
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME
from hubkit.safety import VetContext


def linked_repos(api: HfApi, adapter: RemoteRepo, steps: tuple[int, ...]) -> ReleaseLinks:
    """The repos the adapter card names (its ``hubkit_release`` metadata, read as untrusted: a value that is
    no repo id is ignored), else the default ones, each read to see what it holds of this release."""
    named = adapter.card_data.get(RELEASE_KEY) if isinstance(adapter.card_data, Mapping) else None
    named = named if isinstance(named, Mapping) else {}
    repo_id = adapter.repo_id
    repos = {
        c: value if is_repo_id(value := named.get(c.kind)) else c.default_repo_id(repo_id) for c in COMPANIONS
    }
    merged, gguf, space, samples = repos[MERGED], repos[GGUF], repos[SPACE], repos[SAMPLES]
    merge = MergeRecord.from_card_data(read_remote(api, merged).card_data)
    exported = GGUFRecord.from_card_data(read_remote(api, gguf).card_data)
    merged_step = merge.step if merge is not None and merge.adapter_repo == repo_id else None
    gguf_step = (
        exported.merge.step if exported is not None and exported.merge.adapter_repo == repo_id else None
    )
    merged_step = merged_step if merged_step in steps else None
    gguf_step = gguf_step if gguf_step in steps else None
    return ReleaseLinks(
        merged=merged if merged_step is not None else None,
        merged_step=merged_step,
        gguf=gguf if gguf_step is not None else None,
        gguf_step=gguf_step,
        merged_verified=merge.verified if merge is not None and merged_step is not None else None,
        space=space if read_remote(api, space, SPACE.repo_type).exists else None,
        samples=samples if read_remote(api, samples, SAMPLES.repo_type).exists else None,
    )


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
) -> RepoReport:
    """Commit `results` (of some of its steps) and the card rendered again with them to the release's adapter
    repo, as it was read for the evaluation (`commit_sha` None: it already held exactly these files). A file
    holding `token` is refused.

    Raises:
        PublishError: the evaluated steps changed on the Hub since, the repo moved while pushing, or the
            Hub refused.
        AuthError: the token cannot write to the repo.
        UnsafeFileError: a file that must not be published (a secret, a local path: `hubkit.safety`).
    """
    endpoint = api.endpoint
    repo_id = evaluated.repo_id
    # One listing: the release read again, the diff and the commit's parent are the same state of the repo.
    with hub_errors(repo_id, endpoint):
        remote = read_remote(api, repo_id)
    now = release_of(remote, endpoint=endpoint, token=token)
    _check_same_adapters(evaluated, now, tuple(m.step for m in results.summary.checkpoints))
    run = download_release(
        now,
        (),
        extra=(TRAIN_PROBLEM_HASHES_NAME,),
        endpoint=endpoint,
        token=token,
    )
    with hub_errors(repo_id, endpoint):
        linked = replace(
            linked_repos(api, remote, now.steps), sweep_siblings=read_siblings(api, run, repo_id)
        )
    manifest = now.manifest
    base = read_base_model_card(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    inputs = release_card_inputs(
        run, repo_id, remote.files, base=base, has_tokenizer=now.has_tokenizer, links=linked, eval=results
    )
    problems = results.summary.problems
    tasks = read_benchmark_tasks(problems.source, endpoint=endpoint, token=token) if problems.whole else ()
    files = {
        **eval_file_bytes(results.summary, results.samples),
        **adapter_card_files(inputs),
        **eval_results_files(results, tasks, step_on_main=inputs.root_step, repo_id=repo_id),
    }
    vetter = Vetter(VetContext.for_run(run.run_dir, manifest.base_model, token))
    planned = vetter.generated(files, "model", FileHashCache())
    plan = RepoPlan(repo_id=repo_id, files=planned, title=f"hubkit eval {manifest.run_id}")
    return commit_repo(api, diff_repo(plan, remote))
