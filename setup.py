"""Packaging that pyproject.toml cannot say alone: the top-level `model_cards/`, `spaces/` and the TRL recipe
ship inside the wheel as `hubkit/_model_cards/`, `hubkit/_spaces/` and `hubkit/_recipes/` (found by
`hubkit.resources`)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["hubkit", "hubkit.*"]),
        "hubkit._model_cards",
        "hubkit._spaces.compare",
        "hubkit._recipes.trl_gsm8k",
        "hubkit.demo.data",
    ],
    package_dir={
        "hubkit._model_cards": "model_cards",
        "hubkit._spaces": "spaces",
        "hubkit._recipes": "recipes",
    },
    package_data={
        "hubkit": ["py.typed"],
        "hubkit.demo.data": ["*.jsonl"],
        "hubkit._recipes.trl_gsm8k": ["*.py", "*.txt", "*.md"],
        "hubkit._model_cards": ["*.j2"],
        "hubkit._spaces.compare": ["*.py", "*.txt", "*.json", "*.md"],
    },
)
