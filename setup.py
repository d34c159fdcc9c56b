"""Packaging that pyproject.toml cannot say alone: the top-level `model_cards/` and `spaces/` folders
ship inside the wheel as `hubkit/_model_cards/` and `hubkit/_spaces/` (found by `hubkit.resources`)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["hubkit", "hubkit.*"]),
        "hubkit._model_cards",
        "hubkit._spaces.compare",
    ],
    package_dir={"hubkit._model_cards": "model_cards", "hubkit._spaces": "spaces"},
    package_data={
        "hubkit": ["py.typed"],
        "hubkit._model_cards": ["*.j2"],
        "hubkit._spaces.compare": ["*.py", "*.txt", "*.json", "*.md"],
    },
)
