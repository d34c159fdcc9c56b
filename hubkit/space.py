"""The comparison Space of a published run: its configuration, the files of its repo, and running it locally.

The app itself lives in the top-level `spaces/compare/` (shipped in the wheel) and never imports hubkit;
this module writes what it reads, `space_config.json`, from the run:

    config = SpaceConfig.from_run(run, "me/qwen3-4b-grpo", merged_repo_id="me/qwen3-4b-grpo-merged")
    files = space_repo_files(config)        # {"app.py": b"...", ..., "README.md": b"..."}

The Space repo (`<repo_id>-demo` by default) holds the app's files, the config, pinned requirements and a
README whose metadata the Hub reads (`sdk: gradio`, `sdk_version`, `python_version`, `suggested_hardware`,
`models`, ...). The suggested hardware is ZeroGPU, so the requirements are ones it installs: a torch release
it runs and packages that install on both of its Pythons.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hubkit.errors import SpaceError
from hubkit.evaluate.results import EVAL_DIR, RESULTS_NAME, SAMPLES_NAME, load_eval
from hubkit.hub.download import download_repo_file
from hubkit.release.manifest import read_release_manifest
from hubkit.resources import model_cards_dir, space_dir
from hubkit.runs.manifest import Manifest

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.runs import Run

SPACE_SUFFIX = "-demo"
APP_NAME = "compare"
APP_FILE = "app.py"
REQUIREMENTS_NAME = "requirements.txt"
# The app's own modules, copied as they are.
APP_MODULES = ("app.py", "config.py", "engine.py", "grading.py", "hardware.py")
# ZeroGPU documents Python 3.10 and 3.12 only, and these torch releases.
ZEROGPU_PYTHONS = ("3.10", "3.12")
ZEROGPU_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")
PYTHON_VERSION = "3.12"
SHORT_DESCRIPTION = "Base model vs. each training checkpoint, side by side"
# The README's `suggested_hardware` (a suggestion the Hub shows; the owner picks the hardware): ZeroGPU,
# free for its visitors. The app also runs on a CPU Space (in bfloat16, one adapter at a time).
DEFAULT_HARDWARE = "zero-a10g"
# Requirements given as a lower bound, not a pin: the Spaces runtime installs its own `spaces` (ZeroGPU's
# client, which follows the Hub's scheduler), and an older pin would downgrade it.
AT_LEAST = ("spaces",)
EXAMPLES_FROM_EVAL = 5
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


def default_space_repo_id(repo_id: str) -> str:
    """The default Space beside an adapter repo: `<repo_id>-demo`."""
    return repo_id + SPACE_SUFFIX


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
        adapter_revision: str | None = None,
        tokenizer_published: bool = True,
        examples: Sequence[tuple[str, str | None]] = (),
        hardware: str = DEFAULT_HARDWARE,
    ) -> SpaceConfig:
        """The Space of a run described by its manifest (what the adapter repo's `hubkit.json` holds).

        Args:
            manifest: the run's manifest.
            repo_id: the adapter repo.
            merged_repo_id: the merged model's repo, if one is published.
            space_repo_id: the Space repo; default `<repo_id>-demo`.
            adapter_revision: pin the adapters to this revision (default: the repo's main branch, so that
                the checkpoint list follows later pushes).
            tokenizer_published: whether the adapter repo's root holds the run's tokenizer and chat
                template (else the base model's are used).
            examples: (problem, reference answer or None) pairs; default a few general math problems.
            hardware: the README's `suggested_hardware`.

        Returns:
            The configuration.

        Raises:
            SpaceError: `hardware` is not one of the Hub's flavors.
        """
        module = app_config_module()
        trained_length = manifest.hyperparameters.get("max_completion_length")
        defaults = {}
        if isinstance(trained_length, int) and trained_length > 0:
            # On a GPU the app answers as long as the run trained (a CPU keeps its own shorter default).
            defaults["max_new_tokens"] = min(trained_length, module.AppConfig.max_new_tokens_limit)
        app = module.AppConfig(
            title=manifest.run_id,
            base_model=manifest.base_model,
            base_revision=manifest.base_model_revision,
            adapter_repo=repo_id,
            adapter_revision=adapter_revision,
            merged_repo=merged_repo_id,
            system_prompt=manifest.system_prompt,
            chat_template="adapter" if tokenizer_published else "base",
            examples=tuple(module.Example(p, a) for p, a in (examples or FALLBACK_EXAMPLES)),
            **defaults,
        )
        return cls(app=app, space_repo_id=space_repo_id or default_space_repo_id(repo_id), hardware=hardware)

    @classmethod
    def from_run(
        cls,
        run: Run,
        repo_id: str,
        *,
        merged_repo_id: str | None = None,
        space_repo_id: str | None = None,
        adapter_revision: str | None = None,
        hardware: str = DEFAULT_HARDWARE,
    ) -> SpaceConfig:
        """The Space of a run about to be (or already) published to `repo_id`.

        Examples are held-out problems from the run's evaluation (`hubkit eval`) when it has one, those
        that the best checkpoint answers better than the base first; else a few general math problems.

        Args:
            run: the run.
            repo_id: the adapter repo.
            merged_repo_id: the merged model's repo, if the push publishes one.
            space_repo_id: the Space repo; default `<repo_id>-demo`.
            adapter_revision: see `from_manifest`.
            hardware: the README's `suggested_hardware`.

        Returns:
            The configuration.

        Raises:
            EvalError: the run's evaluation files are corrupt.
            SpaceError: `hardware` is not one of the Hub's flavors.
        """
        return cls.from_manifest(
            run.manifest,
            repo_id,
            merged_repo_id=merged_repo_id,
            space_repo_id=space_repo_id,
            adapter_revision=adapter_revision,
            tokenizer_published=run.tokenizer_dir() is not None,
            examples=eval_examples(run.run_dir),
            hardware=hardware,
        )

    def to_json(self) -> str:
        """`space_config.json`."""
        return self.app.to_json()


def eval_examples(run_dir: Path, limit: int = EXAMPLES_FROM_EVAL) -> tuple[tuple[str, str], ...]:
    """Held-out problems from the run's evaluation, the telling ones first (none without an evaluation).

    Args:
        run_dir: the run directory.
        limit: at most this many.

    Returns:
        (problem, reference answer) pairs; empty when the run has no `eval/`.

    Raises:
        EvalError: the evaluation files are corrupt.
    """
    results = load_eval(run_dir)
    if results is None:
        return ()
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
    whether its root has the run's tokenizer, and examples from its `eval/` when there is one.

    Args:
        api: a client bound to the Hub the repo is on.
        repo_id: the adapter repo.
        space_repo_id: the Space repo; default `<repo_id>-demo`.

    Returns:
        The configuration.

    Raises:
        SpaceError: no such repo, or a repo without `hubkit.json`.
    """
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        root = {entry.path for entry in api.list_repo_tree(repo_id)}
    except RepositoryNotFoundError as e:
        raise SpaceError(
            f"no repo {repo_id} on {api.endpoint}: check --repo-id (and the token, if private)"
        ) from e
    manifest = read_release_manifest(repo_id, endpoint=api.endpoint, token=api.token, error=SpaceError)
    examples: tuple[tuple[str, str], ...] = ()
    if EVAL_DIR in root:
        results = download_repo_file(
            repo_id,
            f"{EVAL_DIR}/{RESULTS_NAME}",
            revision=None,
            endpoint=api.endpoint,
            token=api.token,
            error=SpaceError,
        )
        download_repo_file(
            repo_id,
            f"{EVAL_DIR}/{SAMPLES_NAME}",
            revision=None,
            endpoint=api.endpoint,
            token=api.token,
            error=SpaceError,
        )
        if results is not None:
            # The client's cache lays a revision's files out as in the repo: its folder reads as a run's.
            examples = eval_examples(results.parents[1])
    return SpaceConfig.from_manifest(
        manifest,
        repo_id,
        space_repo_id=space_repo_id,
        tokenizer_published="tokenizer_config.json" in root,
        examples=examples,
    )


def _version(package: str) -> str:
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError as e:
        raise SpaceError(
            f"{package} is not installed, so the Space cannot be pinned to a tested version: "
            "pip install 'hubkit[space]' (or push without the Space)"
        ) from e
    return version.split("+", 1)[0]  # a local build tag such as "+cpu" is not on PyPI


def zerogpu_torch(installed: str) -> str:
    """The torch release a Space pins: the newest one ZeroGPU runs that is not newer than `installed`
    (the tested one), else ZeroGPU's oldest.

    Args:
        installed: the torch version installed here, without a local tag ("2.13.0").

    Returns:
        One of `ZEROGPU_TORCH`.
    """
    from packaging.version import Version

    older = [v for v in ZEROGPU_TORCH if Version(v) <= Version(installed)]
    return older[-1] if older else ZEROGPU_TORCH[0]


def _pin(package: str, version: str) -> str:
    """`package==version`; `package<=version` where that release dropped one of ZeroGPU's Pythons (its
    Requires-Python excludes it), so that there the newest earlier release installs. pip prefers the newest
    release a requirement allows, so on the Pythons the release supports it installs that one. (No environment
    markers: `pip install --python-version` evaluates them for the Python running pip, not the target.)"""
    from packaging.specifiers import SpecifierSet

    requires = SpecifierSet(importlib.metadata.metadata(package).get("Requires-Python") or "")
    if all(requires.contains(python) for python in ZEROGPU_PYTHONS):
        return f"{package}=={version}"
    return f"{package}<={version}"


def pinned_requirements() -> str:
    """The app's `requirements.txt`: each package pinned to the version installed here (the tested one),
    as ZeroGPU accepts it.

    gradio is not listed: the README's `sdk_version` installs it. torch is pinned to a release ZeroGPU
    runs (`zerogpu_torch`); `spaces` gets a lower bound (`AT_LEAST`); a package whose tested release dropped
    one of ZeroGPU's Pythons gets an upper bound (`_pin`).

    Raises:
        SpaceError: a package the app needs is not installed.
    """
    lines = (space_dir(APP_NAME) / REQUIREMENTS_NAME).read_text(encoding="utf-8").splitlines()
    packages = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    tested_torch = _version("torch")
    requirements = []
    for package in packages:
        version = _version(package)
        if package == "torch":
            requirements.append(f"torch=={zerogpu_torch(version)}")
        elif package in AT_LEAST:
            requirements.append(f"{package}>={version}")
        else:
            requirements.append(_pin(package, version))
    return (
        "# Pinned to the versions hubkit tested the app with; gradio comes from sdk_version.\n"
        f"# torch: the newest release ZeroGPU runs ({', '.join(ZEROGPU_TORCH)}) up to the tested {tested_torch}.\n"
        "# <=: the tested release dropped Python 3.10 (ZeroGPU runs 3.10 and 3.12); 3.10 gets an earlier one.\n"
        + "\n".join(requirements)
        + "\n"
    )


def space_readme(config: SpaceConfig) -> str:
    """The Space's README.md: the metadata the Hub reads, then what the Space does and its API.

    Raises:
        SpaceError: gradio is not installed (its version is the Space's `sdk_version`).
    """
    from huggingface_hub import SpaceCard, SpaceCardData

    app = config.app
    models = [app.base_model, app.adapter_repo]
    card_data = SpaceCardData(
        title=app.title,
        sdk="gradio",
        sdk_version=_version("gradio"),
        python_version=PYTHON_VERSION,
        app_file=APP_FILE,
        models=models,
        tags=["hubkit", "lora", "peft", "checkpoints"],
        emoji="⚖️",
        colorFrom="indigo",
        colorTo="green",
        short_description=SHORT_DESCRIPTION,
        suggested_hardware=config.hardware,
        pinned=False,
    )
    example = app.examples[0].prompt if app.examples else "What is 12 * 13?"
    card = SpaceCard.from_template(
        card_data,
        template_path=str(model_cards_dir() / "space.md.j2"),
        app=app,
        space_repo_id=config.space_repo_id,
        hardware=config.hardware,
        example=example,
    )
    return str(card)


def space_repo_files(config: SpaceConfig) -> dict[str, bytes]:
    """Every file of the Space repo, by path: the app's modules, `space_config.json`, pinned
    `requirements.txt` and `README.md`.

    Args:
        config: the Space's configuration.

    Returns:
        Path in the repo -> content.

    Raises:
        SpaceError: gradio or a package the app needs is not installed (their versions are pinned).
    """
    app_dir = space_dir(APP_NAME)
    files = {name: (app_dir / name).read_bytes() for name in APP_MODULES}
    files[app_config_module().CONFIG_NAME] = config.to_json().encode()
    files[REQUIREMENTS_NAME] = pinned_requirements().encode()
    files["README.md"] = space_readme(config).encode()
    return files


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def serve_locally(config: SpaceConfig, *, port: int, endpoint: str | None = None) -> None:
    """Run the Space's app (the copy shipped with hubkit) on 127.0.0.1 until it exits or Ctrl-C stops it.

    Args:
        config: the configuration (as the push would write it).
        port: the port to serve on.
        endpoint: the Hub the app loads the models from (default: `HF_ENDPOINT`, else huggingface.co).

    Raises:
        SpaceError: the app exited with an error (its output says why).
    """
    env = dict(os.environ)
    if endpoint:
        env["HF_ENDPOINT"] = endpoint.rstrip("/")
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    with tempfile.TemporaryDirectory(prefix="hubkit-space-") as workdir:
        config_path = Path(workdir) / app_config_module().CONFIG_NAME
        config_path.write_text(config.to_json(), encoding="utf-8")
        command = [
            sys.executable,
            str(space_dir(APP_NAME) / APP_FILE),
            f"--config={config_path}",
            "--host=127.0.0.1",
            f"--port={port}",
        ]
        process = subprocess.Popen(command, env=env)
        # Stopped with SIGTERM as with Ctrl-C, so that the app never outlives this process.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
            process.wait()
            return
        finally:
            signal.signal(signal.SIGTERM, previous)
    if status != 0:
        raise SpaceError(f"the Space app exited with status {status}: see its output above")
