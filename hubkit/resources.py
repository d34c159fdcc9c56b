"""Where the files that ship beside the code are: the model card templates (`model_cards/`), the
Space apps (`spaces/`) and the TRL recipe (`recipes/trl_gsm8k/`, which the demo runs).

In a checkout (or an editable install) they are the repository's top-level folders; a wheel maps them
into the package as `hubkit/_model_cards/`, `hubkit/_spaces/` and `hubkit/_recipes/` (see setup.py).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _shipped(installed_name: str, checkout_name: str) -> Path:
    installed = _PACKAGE_DIR / installed_name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / checkout_name


def model_cards_dir() -> Path:
    """The folder of card templates (`adapter.md.j2`, `merged.md.j2`, `space.md.j2`)."""
    return _shipped("_model_cards", "model_cards")


def space_dir(name: str = "compare") -> Path:
    """The folder of one Space app (`app.py`, `requirements.txt`, ...)."""
    return _shipped("_spaces", "spaces") / name


def recipe_dir(name: str = "trl_gsm8k") -> Path:
    """The folder of one training recipe (`train.py`, `requirements.txt`, ...)."""
    return _shipped("_recipes", "recipes") / name
