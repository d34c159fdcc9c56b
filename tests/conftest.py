"""Shared test setup. Fixtures live in one plugin module per area, registered here.

`make test` runs the suite on two pytest-xdist workers, each module whole on one of them (``--dist
loadscope``), the longest modules handed out first (``--no-loadscope-reorder`` keeps the order set here) so
that neither worker is left with a long tail. The costly session fixtures (verl's own run, a real TRL run)
are built once for both workers (`fixtures_runs.built_once`).
"""

import pytest

pytest_plugins = ["fixtures_hub", "fixtures_runs"]

# The modules that take minutes, longest first; the rest keep their collection order after them.
_LONG_MODULES = (
    "test_recipe_verl_run.py",
    "test_demo.py",
    "test_recipe_trl.py",
    "test_adapters.py",
    "test_cards.py",
    "test_gguf.py",
    "test_gguf_push.py",
    "test_eval.py",
    "test_hostile_bounds.py",
    "test_space_hardware.py",
    "test_push.py",
    "test_eval_release.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = {name: rank for rank, name in enumerate(_LONG_MODULES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))
