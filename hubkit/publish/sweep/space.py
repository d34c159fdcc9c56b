"""A sweep's one Space, `<owner>/<sweep>-demo` (named as its page is: `hubkit.release.layout`): the
comparison app over every run of the sweep, a visitor picking the run, then its checkpoint. A run of a
sweep gets no Space of its own; every card of the sweep links this one.

Its `space_config.json` lists every run as the sweep will be after the push: the other runs as the read
stage found them (their Collection items, their adapter repos' checkpoints), then this one with the
checkpoints it will hold, ordered by the varied value. The rest is the run's Space (`SpaceConfig.from_run`:
base, prompt, generation defaults), titled with the sweep's name, with the examples of the first run by
value that has an evaluation, and the chat template from the first run's repo when it holds a tokenizer:
what one run's push writes does not depend on which run was pushed last. The files are planned and vetted
in the push's decide stage, before any repo exists, and committed with the sweep's repos
(`hubkit.publish.sweep.plans`); unchanged, they make no commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hubkit.hub.hashing import FileHashCache
from hubkit.publish.plan import PlannedFile
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.repos import plan_space_files
from hubkit.publish.sweep.reads import SweepReads
from hubkit.publish.sweep.siblings import value_key
from hubkit.publish.vetted import Vetter
from hubkit.release.companions import ADAPTER, MERGED
from hubkit.release.layout import checkpoint_dir, steps_in_paths
from hubkit.runs.eval_results import load_eval
from hubkit.space.config import DEFAULT_HARDWARE, SpaceConfig, app_config_module, examples_of
from hubkit.space.files import space_repo_files
from hubkit.visible import visible

if TYPE_CHECKING:
    from hubkit.publish.request import PushRequest
    from hubkit.runs import Run
    from hubkit.runs.eval_results import EvalResults

TOKENIZER_CONFIG = "tokenizer_config.json"  # the app takes a repo's root tokenizer when it has this


def checkpoint_values(steps: Iterable[int], final: bool) -> tuple[str, ...]:
    """A run's checkpoints as the app names them: each step's folder by step, then "" (the root's adapter)."""
    return (*(checkpoint_dir(step) for step in sorted(set(steps))), *([""] if final else []))


def plan_space(
    run: Run,
    repos: ReleaseRepos,
    reads: SweepReads | None,
    steps: Sequence[int],
    merged_repo_id: str | None,
    request: PushRequest,
    vetter: Vetter,
    hashes: FileHashCache,
) -> tuple[PlannedFile, ...]:
    """The Space's files, vetted: the run's own Space, or its sweep's (with `reads`, the sweep as read;
    none for a dry run, which names the sweep's Space without planning it); none without a Space.

    Args:
        steps: the checkpoint steps the adapter repo holds after the push.
        merged_repo_id: the run's merged repo after the push, if any.

    Raises:
        SpaceError: a package the Space pins is not installed, or the run's adapters resized the vocabulary.
        UnsafeFileError: a file that must not be published.
    """
    if repos.space is None or (repos.sweep_space and reads is None):
        return ()
    hardware = request.space_hardware or DEFAULT_HARDWARE
    if not repos.sweep_space:
        return plan_space_files(
            run,
            repos.adapter,
            merged_repo_id=merged_repo_id,
            space_repo_id=repos.space,
            hardware=hardware,
            vetter=vetter,
            hashes=hashes,
        )
    assert reads is not None
    own = SpaceConfig.from_run(
        run, repos.adapter, merged_repo_id=merged_repo_id, space_repo_id=repos.space, hardware=hardware
    )
    config = sweep_space_config(own, reads, checkpoint_values(steps, final=True), load_eval(run.run_dir))
    return vetter.generated(space_repo_files(config), "space", hashes)


def sweep_space_config(
    own: SpaceConfig, reads: SweepReads, checkpoints: tuple[str, ...], evaluation: EvalResults | None
) -> SpaceConfig:
    """The sweep's Space from the run's own (`own`): every run of the sweep after the push, this one with
    `checkpoints` and `evaluation`."""
    module = app_config_module()
    sweep, value = reads.sweep, f"{reads.sweep.value}"
    this = own.app.runs[0]
    # (value, run, whether its repo's root holds a tokenizer, its evaluation)
    runs = [
        (
            value,
            replace(this, name=visible(f"{sweep.setting}={value}"), checkpoints=checkpoints),
            None,
            evaluation,
        )
    ]
    evaluations = {r.repo_id: r.evaluation for r in reads.published if r.repo_id}
    for sibling in reads.siblings[: module.MAX_RUNS - 1]:
        repos = {repo.kind: repo.repo_id for repo in sibling.repos}
        adapter = repos.get(ADAPTER.label)
        if adapter is None:
            continue
        read = reads.cards.get(adapter)
        files = read.remote.files if read is not None else {}
        listed = checkpoint_values(steps_in_paths(files), "adapter_config.json" in files)
        run = module.RunConfig(
            name=visible(f"{sweep.setting}={sibling.value}"),
            adapter_repo=adapter,
            merged_repo=repos.get(MERGED.label),
            checkpoints=listed,
        )
        runs.append((sibling.value, run, TOKENIZER_CONFIG in files, evaluations.get(adapter)))
    runs.sort(key=lambda r: value_key(r[0]))
    first_has_tokenizer = runs[0][2]
    template = (
        own.app.chat_template
        if first_has_tokenizer is None
        else ("adapter" if first_has_tokenizer else "base")
    )
    evaluated = next((e for *_, e in runs if e is not None), None)
    examples = own.app.examples
    if evaluated is not None and (pairs := examples_of(evaluated)):
        examples = tuple(module.Example(problem, answer) for problem, answer in pairs)
    app = replace(
        own.app,
        title=sweep.name,
        runs=tuple(run for _, run, _, _ in runs),
        chat_template=template,
        examples=examples,
    )
    return replace(own, app=app)
