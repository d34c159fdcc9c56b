"""The order modules are handed to the workers in: longest first, by what the last runs measured.

Each run of the whole suite adds up every module's setup, call and teardown seconds (on the controller, from the workers'
reports) and saves them in the user's cache (`~/.cache/hubkit/test-durations.json`, or
`$HUBKIT_TEST_DURATIONS`), merged with what earlier runs saved for modules this run did not reach. The next
run hands the longest modules out first, so that neither worker is left with a long tail. On a machine with
no saved durations the ones of tests/durations.json (a full run's file, saved the same way) are used; a
module neither names keeps its collection order, after the others.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

COMMITTED = Path(__file__).with_name("durations.json")


def _saved_path() -> Path:
    default = Path.home() / ".cache" / "hubkit" / "test-durations.json"
    return Path(os.environ.get("HUBKIT_TEST_DURATIONS", default))


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def saved_durations() -> dict[str, float]:
    return _read(_saved_path()) or _read(COMMITTED)


_measured: defaultdict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = saved_durations()
    items.sort(key=lambda item: -seconds.get(item.path.name, 0.0))  # stable: the rest keep their order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[Path(report.nodeid.split("::")[0]).name] += report.duration


def _whole_suite(config: pytest.Config) -> bool:
    """A run of every test (`make test`): a run of a few would save a long module as short."""
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    return not (named or config.option.keyword or config.option.markexpr or config.option.lf)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A worker's measures reach the controller, which saves them.
    if hasattr(session.config, "workerinput") or not _measured or not _whole_suite(session.config):
        return
    path = _saved_path()
    merged = _read(path) | {name: round(seconds, 2) for name, seconds in _measured.items()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(merged.items(), key=lambda kv: -kv[1])), indent=0) + "\n")
    except OSError:
        pass  # a read-only home: the next run orders by the committed file
