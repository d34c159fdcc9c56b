"""The files of the Space repo: the app's modules as they are, `space_config.json`, requirements ZeroGPU
installs (a torch release it runs, packages that install on both of its Pythons) and the README whose
metadata the Hub reads (`sdk: gradio`, `sdk_version`, `python_version`, `suggested_hardware`, `models`).

    files = space_repo_files(config)        # {"app.py": b"...", ..., "README.md": b"..."}
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from hubkit.cards.render import render_card
from hubkit.errors import SpaceError
from hubkit.resources import space_dir
from hubkit.space.config import APP_NAME, SpaceConfig, app_config_module

APP_FILE = "app.py"
REQUIREMENTS_NAME = "requirements.txt"
# The app's own modules, copied as they are.
APP_MODULES = (
    "app.py",
    "checkpoints.py",
    "config.py",
    "engine.py",
    "grading.py",
    "hardware.py",
    "render.py",
    "streaming.py",
)
# ZeroGPU documents Python 3.10 and 3.12 only, and these torch releases.
ZEROGPU_PYTHONS = ("3.10", "3.12")
ZEROGPU_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")
PYTHON_VERSION = "3.12"
SHORT_DESCRIPTION = "Base model vs. each training checkpoint, side by side"
# Requirements given as a lower bound, not a pin: the Spaces runtime installs its own `spaces` (ZeroGPU's
# client, which follows the Hub's scheduler), and an older pin would downgrade it.
AT_LEAST = ("spaces",)


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
    """The torch release a Space pins (one of `ZEROGPU_TORCH`): the newest one ZeroGPU runs that is not newer
    than `installed` (the tested one, without a local tag: "2.13.0"), else ZeroGPU's oldest."""
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
    from huggingface_hub import SpaceCardData

    app = config.app
    models = [app.base_model, *(run.adapter_repo for run in app.runs)]
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
    context = {
        "app": app,
        "space_repo_id": config.space_repo_id,
        "hardware": config.hardware,
        "example": example,
    }
    return render_card(card_data, "space.md.j2", context)


def space_repo_files(config: SpaceConfig) -> dict[str, bytes]:
    """Every file of the Space repo, by path: the app's modules, `space_config.json`, pinned
    `requirements.txt` and `README.md`.

    Raises:
        SpaceError: gradio or a package the app needs is not installed (their versions are pinned).
    """
    app_dir = space_dir(APP_NAME)
    files = {name: (app_dir / name).read_bytes() for name in APP_MODULES}
    files[app_config_module().CONFIG_NAME] = config.to_json().encode()
    files[REQUIREMENTS_NAME] = pinned_requirements().encode()
    files["README.md"] = space_readme(config).encode()
    return files
