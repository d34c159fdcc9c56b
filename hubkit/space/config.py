"""The comparison Space's configuration: `SpaceConfig` (what the app's `space_config.json` holds), from a
run directory or from a published release: one run, whose checkpoints the app lists from its repo. A
sweep's Space lists every run of the sweep (`hubkit.publish.sweep.space`, from this one's).

    config = SpaceConfig.from_run(run, "me/qwen3-4b-grpo", merged_repo_id=MERGED.default_repo_id(...))
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hubkit.errors import SpaceError
from hubkit.hub.download import download_repo_file
from hubkit.release.companions import SPACE
from hubkit.release.read import read_release
from hubkit.resources import space_dir
from hubkit.runs.answer_length import answer_length, manifest_length
from hubkit.runs.eval_results import EVAL_DIR, RESULTS_NAME, SAMPLES_NAME, EvalResults, load_eval
from hubkit.runs.manifest import Manifest
from hubkit.visible import visible

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.runs import Run

APP_NAME = "compare"
# The README's `suggested_hardware` (a suggestion the Hub shows; the owner picks the hardware): ZeroGPU,
# free for its visitors. The app also runs on a CPU Space (in bfloat16, one adapter at a time).
DEFAULT_HARDWARE = "zero-a10g"
EXAMPLES_FROM_EVAL = 5
# A release's eval samples larger than this are not read for examples: the whole file is parsed (~1 s a
# MB) before the app serves, for five examples (the fallback ones are used instead).
MAX_EXAMPLE_SAMPLES_BYTES = 16_000_000
_APP_CONFIG_MODULE = "hubkit._space_app_config"
# Problems shown when the run has no evaluation to take held-out problems from (written for hubkit,
# so they are in no training set).
FALLBACK_EXAMPLES = (
    (
        "A baker makes 12 trays of 24 cookies and sells all but 30 of them. How many cookies does she sell?",
        "258",
    ),
    ("What is the sum of the first 20 positive odd numbers?", "400"),
    ("A train covers 180 km in 2.5 hours. What is its average speed in km/h?", "72"),
    ("Solve for x: 3x + 7 = 22.", "5"),
)


def _refuse_resized_vocabulary(run: Run) -> None:
    """The app loads each adapter onto the base as the base is: an adapter that resized the vocabulary (tokens
    added) does not load there. Read off the base's config as the push downloaded it (a dry run's cache)."""
    from hubkit.adapters.base_check import BaseConfig, resized_rows

    latest = run.latest
    base = BaseConfig.cached(run.manifest.base_model, run.manifest.base_model_revision)
    if latest is None or latest.adapter_dir is None or base is None:
        return
    rows = resized_rows(latest.adapter_dir, base)
    if rows is not None:
        raise SpaceError(
            f"the adapters resized the vocabulary to {rows} rows (tokens were added), which the Space's base model "
            "does not have: pass --no-space (the merged model serves the added tokens)"
        )


def app_config_module() -> ModuleType:
    """The app's own `config.py` (`AppConfig`, `Example`): the one schema of `space_config.json`.

    The app cannot import hubkit, so hubkit loads the app's module (once, under a private name) rather
    than keeping a second copy of the schema.
    """
    module = sys.modules.get(_APP_CONFIG_MODULE)
    if module is None:
        spec = importlib.util.spec_from_file_location(_APP_CONFIG_MODULE, space_dir(APP_NAME) / "config.py")
        if spec is None or spec.loader is None:
            raise SpaceError(
                f"the Space app's config.py is missing from {space_dir(APP_NAME)}: reinstall hubkit"
            )
        module = importlib.util.module_from_spec(spec)
        sys.modules[_APP_CONFIG_MODULE] = module  # dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class SpaceConfig:
    """A Space: what its app loads and how it answers (`app`, written as `space_config.json`), and what
    only its README says.

    Args:
        app: the app's `AppConfig` (fields: see `spaces/compare/config.py`).
        space_repo_id: the Space repo (`<repo_id>-demo` by default), named in the README's API example.
        hardware: the README's `suggested_hardware`, one of the Hub's flavors (`huggingface_hub.SpaceHardware`:
            "zero-a10g" is ZeroGPU, "cpu-basic", "l4x1", ...).

    Raises:
        SpaceError: `hardware` is not one of the Hub's flavors.
    """

    app: Any
    space_repo_id: str
    hardware: str = DEFAULT_HARDWARE

    def __post_init__(self) -> None:
        from huggingface_hub import SpaceHardware

        flavors = [flavor.value for flavor in SpaceHardware]
        if self.hardware not in flavors:
            raise SpaceError(
                f"unknown Space hardware {self.hardware!r}: use one of {', '.join(flavors)} "
                f"(default {DEFAULT_HARDWARE}, ZeroGPU)"
            )

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        repo_id: str,
        *,
        merged_repo_id: str | None = None,
        space_repo_id: str | None = None,
        tokenizer_published: bool = True,
        examples: Sequence[tuple[str, str | None]] = (),
        hardware: str = DEFAULT_HARDWARE,
        trained_length: int | None = None,
    ) -> SpaceConfig:
        """The Space of a run described by its manifest (what the adapter repo's `hubkit.json` holds).

        Args:
            repo_id: the adapter repo.
            merged_repo_id: the merged model's repo, if one is published.
            space_repo_id: the Space repo; default `<repo_id>-demo`.
            tokenizer_published: whether the adapter repo's root holds the run's tokenizer and chat
                template (else the base model's are used).
            examples: (problem, reference answer or None) pairs; default a few general math problems.
            hardware: the README's `suggested_hardware`.
            trained_length: the answer length the run trained with; default: what the manifest records
                (`manifest_length`).

        Raises:
            SpaceError: `hardware` is not one of the Hub's flavors.
        """
        module = app_config_module()
        if trained_length is None:
            recorded = manifest_length(manifest)
            trained_length = recorded.tokens if recorded is not None else None
        defaults = {}
        if trained_length is not None:
            # On a GPU the app answers as long as the run trained (a CPU keeps its own shorter default).
            defaults["max_new_tokens"] = min(trained_length, module.AppConfig.max_new_tokens_limit)
        # The run id is the manifest's (untrusted): shown, its control characters written out.
        run = module.RunConfig(
            name=visible(manifest.run_id),
            adapter_repo=repo_id,
            merged_repo=merged_repo_id,
        )
        app = module.AppConfig(
            title=visible(manifest.run_id),
            base_model=manifest.base_model,
            base_revision=manifest.base_model_revision,
            runs=(run,),
            system_prompt=manifest.system_prompt,
            chat_template="adapter" if tokenizer_published else "base",
            examples=tuple(module.Example(p, a) for p, a in (examples or FALLBACK_EXAMPLES)),
            **defaults,
        )
        return cls(app=app, space_repo_id=space_repo_id or SPACE.default_repo_id(repo_id), hardware=hardware)

    @classmethod
    def from_run(
        cls,
        run: Run,
        repo_id: str,
        *,
        merged_repo_id: str | None = None,
        space_repo_id: str | None = None,
        hardware: str = DEFAULT_HARDWARE,
    ) -> SpaceConfig:
        """The Space of a run about to be (or already) published to `repo_id`.

        Examples are held-out problems from the run's evaluation (`hubkit eval`) when it has one, those
        that the best checkpoint answers better than the base first; else a few general math problems.

        Arguments as `from_manifest`.

        Raises:
            EvalError: the run's evaluation files are corrupt.
            SpaceError: `hardware` is not one of the Hub's flavors, or the run's adapter resized the
                vocabulary (the app loads every adapter onto the base as it is).
        """
        _refuse_resized_vocabulary(run)
        # A plain TRL run records its length in the trainer's files, not in a manifest.
        length = answer_length(run, None)
        return cls.from_manifest(
            run.manifest,
            repo_id,
            merged_repo_id=merged_repo_id,
            space_repo_id=space_repo_id,
            tokenizer_published=run.tokenizer_dir() is not None,
            examples=eval_examples(run.run_dir),
            hardware=hardware,
            trained_length=length.tokens if length.recorded else None,
        )

    def to_json(self) -> str:
        """`space_config.json`."""
        return self.app.to_json()


def eval_examples(run_dir: Path, limit: int = EXAMPLES_FROM_EVAL) -> tuple[tuple[str, str], ...]:
    """Held-out problems from the run's evaluation, the telling ones first (none without an evaluation).

    Returns:
        At most `limit` (problem, reference answer) pairs; empty when the run has no `eval/`.

    Raises:
        EvalError: the evaluation files are corrupt.
    """
    results = load_eval(run_dir)
    return () if results is None else examples_of(results, limit)


def examples_of(results: EvalResults, limit: int = EXAMPLES_FROM_EVAL) -> tuple[tuple[str, str], ...]:
    """Held-out problems from an evaluation, the ones its best checkpoint answers better than the base
    first; (problem, reference answer) pairs, at most `limit`."""
    best = results.best()
    if best is not None and best.step is not None:
        samples = [after for _before, after in results.before_after(best.step, limit)]
    else:
        samples = []
    if not samples:  # no base to compare with: the problems in order
        samples = sorted(results.samples, key=lambda s: s.problem_index)
    examples: dict[str, str] = {}
    for sample in samples:
        examples.setdefault(sample.problem, sample.reference)
    return tuple(examples.items())[:limit]


def space_config_from_hub(api: HfApi, repo_id: str, *, space_repo_id: str | None = None) -> SpaceConfig:
    """The Space of an adapter repo published by `hubkit push`, from what the repo holds: its `hubkit.json`,
    whether its root has the run's tokenizer, and examples from its `eval/` when there is one (and its
    samples are at most `MAX_EXAMPLE_SAMPLES_BYTES`: five examples are not worth reading more).

    Every adapter the repo publishes is checked against the base model first, from the files' headers
    (`hubkit.release.adapters`): the app loads them all as it starts.

    Raises:
        HubError: no such repo, or the Hub failed (`hubkit.hub.failures`).
        ReleaseError: a repo without `hubkit.json` or checkpoints, or an adapter the base cannot load.
        AdapterError, BaseModelMismatchError: an adapter whose config or weights do not fit the base.
    """
    from hubkit.release.adapters import check_published_adapters

    release = read_release(repo_id, endpoint=api.endpoint, token=api.token)
    check_published_adapters(release, endpoint=api.endpoint, token=api.token)
    examples: tuple[tuple[str, str], ...] = ()
    results_path, samples_path = f"{EVAL_DIR}/{RESULTS_NAME}", f"{EVAL_DIR}/{SAMPLES_NAME}"
    if results_path in release.files and release.sizes.get(samples_path, 0) <= MAX_EXAMPLE_SAMPLES_BYTES:
        where = {"revision": release.commit, "endpoint": api.endpoint, "token": api.token}
        results = download_repo_file(repo_id, results_path, **where)
        download_repo_file(repo_id, samples_path, **where)
        if results is not None:
            # The client's cache lays a revision's files out as in the repo: its folder reads as a run's.
            examples = eval_examples(results.parents[1])
    return SpaceConfig.from_manifest(
        release.manifest,
        repo_id,
        space_repo_id=space_repo_id,
        tokenizer_published=release.has_tokenizer,
        examples=examples,
    )
