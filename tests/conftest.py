"""Shared test setup. Fixtures live in one plugin module per area, registered here.

`make test` runs the suite on two pytest-xdist workers (``--dist loadgroup``). A session fixture is built
once per worker, so the tests of one costly fixture (verl's own run, a real TRL run) are kept on one worker,
every other module stays whole on one worker (its module fixtures built once), and the longest groups are
handed out first so that neither worker is left with a long tail.
"""

import pytest

pytest_plugins = ["fixtures_hub", "fixtures_runs"]

# The costly session fixtures, each naming the group its tests share; a test needing two joins the first.
_SHARED_FIXTURES = ("verl_run_dir", "trl_run_dir")
# Groups that take minutes, handed out longest first (`--no-loadscope-reorder`; the rest keep their order).
_LONG_GROUPS = (
    "verl_run_dir",
    "trl_run_dir",
    "test_demo.py",
    "test_recipe_trl.py",
    "test_gguf.py",
    "test_gguf_push.py",
    "test_eval.py",
    "test_hostile_bounds.py",
    "test_space_hardware.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    groups: dict[pytest.Item, str] = {}
    for item in items:
        needed = getattr(item, "fixturenames", ())
        groups[item] = next((f for f in _SHARED_FIXTURES if f in needed), item.path.name)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    first = {name: rank for rank, name in enumerate(_LONG_GROUPS)}
    items.sort(key=lambda item: first.get(groups[item], len(first)))
