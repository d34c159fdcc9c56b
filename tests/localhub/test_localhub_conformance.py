"""The conformance suite: huggingface_hub's own tests, for the client version hubkit pins, run against the
local Hub.

The tests come from the client's source package on PyPI (`make venv-conformance` downloads and unpacks it
under the environment; nothing is fetched here). `conformance/selected.txt` names the tests run, those
that exercise what a publishing client uses; `conformance/excluded.txt` names every one that is not
counted as passing, with why. `conformance/harness.py` is the harness (copied beside them as their conftest.py) (the local Hub with hub-ci's users,
the fixtures the package does not ship). It runs in a pytest of its own, one local Hub for the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import huggingface_hub

HERE = Path(__file__).parents[1] / "conformance"
REQUIRED = 0.97


def _lines(name: str) -> list[list[str]]:
    text = (HERE / name).read_text().splitlines()
    return [line.split("\t") for line in text if line.strip() and not line.startswith("#")]


def _suite(tmp_path: Path, selected: list[str]) -> Path:
    """huggingface_hub's test modules the selection names, the harness beside them, in a package."""
    source = Path(sys.prefix) / "conformance" / f"huggingface_hub-{huggingface_hub.__version__}" / "tests"
    assert source.is_dir(), (
        f"huggingface_hub's tests are not unpacked at {source}: run `make venv-conformance`."
    )
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    modules = {test.split("::")[0] for test in selected} | {"testing_constants.py", "testing_utils.py"}
    for module in modules:
        shutil.copy(source / module, suite / "tests" / module)
    (suite / "tests" / "__init__.py").write_text("")
    shutil.copy(HERE / "harness.py", suite / "tests" / "conftest.py")
    (suite / "pytest.ini").write_text("[pytest]\n")  # keeps hubkit's own pytest settings out
    return suite


def test_huggingface_hub_suite_passes_against_the_local_hub(tmp_path: Path) -> None:
    selected = [fields[0] for fields in _lines("selected.txt")]
    excluded = {fields[1]: (fields[0], fields[2]) for fields in _lines("excluded.txt")}
    assert not [t for t in selected if excluded.get(t, ("fails",))[0] == "out"], (
        "a test both selected and out"
    )
    suite = _suite(tmp_path, selected)
    results_file = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env["HUBKIT_CONFORMANCE_RESULTS"] = str(results_file)
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "--timeout", "120"]
        + [f"tests/{test}" for test in selected],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    seconds = time.monotonic() - started
    results = {k.removeprefix("tests/"): v for k, v in json.loads(results_file.read_text()).items()}
    passed = [t for t in selected if results.get(t, {}).get("outcome") == "passed"]
    print(f"conformance: {len(passed)}/{len(selected)} passed ({seconds:.0f} s)")
    unexpected = {
        t: results.get(t, {}).get("error", "not run")
        for t in selected
        if t not in passed and t not in excluded
    }
    assert not unexpected, f"failing and not in excluded.txt: {unexpected}\n{run.stdout[-3000:]}"
    assert len(passed) >= REQUIRED * len(selected), f"{len(passed)}/{len(selected)} passed"
    now_passing = [t for t in passed if t in excluded and excluded[t][0] != "racy"]
    assert not now_passing, f"these pass now: remove them from excluded.txt: {now_passing}"
