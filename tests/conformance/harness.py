"""The harness that runs huggingface_hub's own tests against the local Hub (the conformance suite).

huggingface_hub's source package ships its tests without the conftest they import (`RepoFactory`, the
`api` and `repo_factory` fixtures, the `xet` / `no_xet` / `production` markers). This file is that
conftest, copied beside them by `tests/test_localhub_conformance.py`, which runs them in a pytest of their
own. It starts one local Hub for the run, with the users and tokens of the client's
`tests/testing_constants.py` in its users file (the accounts of huggingface.co's CI Hub, hub-ci), and
points the constants that name hub-ci's endpoint at it. Each test's outcome, and whether it sent the Hub
any request, is written as JSON to `$HUBKIT_CONFORMANCE_RESULTS`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from hubkit.localhub import LocalHub
from hubkit.localhub.accounts.access import load_users
from hubkit.localhub.accounts.limits import HubLimits
from hubkit.localhub.http.context import HubSettings

# hub-ci's user name starts with underscores, which huggingface.co refuses for a new account (and so does
# the local Hub): the suite's user gets a name the Hub accepts; its tokens stay those of the constants.
USER = "dummy-hub-user"


class RepoFactory(Protocol):
    """`repo_factory(repo_type=None, **create_repo_kwargs) -> RepoUrl`: a repo deleted after the test."""

    def __call__(self, repo_type: str | None = None, **kwargs: Any) -> Any: ...


_run: dict[str, Any] = {}


def _users_file(path: Path, constants: Any) -> Path:
    path.write_text(
        f'[users.{USER}]\ntokens = ["{constants.TOKEN}"]\norgs = ["valid_org_hub"]\nplan = "pro"\n\n'
        f'[users.{constants.OTHER_USER}]\ntokens = ["{constants.OTHER_TOKEN}"]\nplan = "pro"\n\n'
        f'[users.{constants.ENTERPRISE_USER}]\ntokens = ["{constants.ENTERPRISE_TOKEN}"]\n'
        f'orgs = ["{constants.ENTERPRISE_ORG}"]\nplan = "enterprise"\n'
    )
    return path


def pytest_configure(config: pytest.Config) -> None:
    for marker in (
        "api",
        "transfer",
        "inference",
        "xet",
        "no_xet",
        "production",
        "deprecated",
        "git_lfs",
        "vcr",
    ):
        config.addinivalue_line("markers", f"{marker}: huggingface_hub's suite marker")
    from . import testing_constants

    workdir = Path(tempfile.mkdtemp(prefix="hubkit-conformance-"))
    testing_constants.USER = USER
    users = load_users(_users_file(workdir / "users.toml", testing_constants))
    # Production's limits, but for the two a test suite of hundreds of repos passes on hub-ci only
    # because hub-ci has them off: API calls per window and repo creations per hour.
    limits = HubLimits().with_settings(
        ",".join(
            f"{plan}.{quota}=off"
            for plan in ("pro", "enterprise")
            for quota in ("api_calls", "repo_creations")
        )
    )
    hub = LocalHub(workdir / "hub", settings=HubSettings(users=users, limits=limits)).start()
    # Before huggingface_hub is first imported: it reads HF_ENDPOINT into a constant.
    os.environ.update(
        HF_ENDPOINT=hub.endpoint, HF_HOME=str(workdir / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1"
    )
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_CO_STAGING", "HF_HUB_OFFLINE"):
        os.environ.pop(name, None)
    testing_constants.ENDPOINT_STAGING = hub.endpoint
    _run.update(hub=hub, workdir=workdir, results={})


def pytest_unconfigure(config: pytest.Config) -> None:
    if "hub" in _run:
        _run["hub"].stop()
        shutil.rmtree(_run["workdir"], ignore_errors=True)
    out = os.environ.get("HUBKIT_CONFORMANCE_RESULTS")
    if out:
        Path(out).write_text(json.dumps(_run.get("results", {}), indent=1))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    log = _run["hub"].request_log
    before = len(log)
    _run["results"][item.nodeid] = {"outcome": "passed", "requests": 0}
    yield
    _run["results"][item.nodeid]["requests"] = len(log) - before


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    result = _run["results"].setdefault(report.nodeid, {"outcome": "passed", "requests": 0})
    if report.failed:
        result["outcome"] = "failed"
        crash = getattr(report.longrepr, "reprcrash", None)
        result.setdefault("error", (crash.message if crash else str(report.longrepr)).splitlines()[0][:300])
    elif report.skipped and result["outcome"] == "passed":
        result["outcome"] = "skipped"


@pytest.fixture(autouse=True)
def xet_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub's Xet policy by marker: `xet` forces Xet on; `no_xet` runs the client as it is
    without hf_xet installed (classic LFS); `production` needs huggingface.co and is skipped."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _runtime

    if request.node.get_closest_marker("production"):
        pytest.skip("runs against huggingface.co")
    if request.node.get_closest_marker("xet"):
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    if request.node.get_closest_marker("no_xet"):
        real = _runtime.is_package_available
        monkeypatch.setattr(_runtime, "is_package_available", lambda name: name != "hf_xet" and real(name))


@pytest.fixture(scope="session")
def api():
    from huggingface_hub import HfApi

    from .testing_constants import ENDPOINT_STAGING, TOKEN

    return HfApi(endpoint=ENDPOINT_STAGING, token=TOKEN)


@pytest.fixture
def repo_factory(api) -> Callable[..., Any]:
    from .testing_utils import repo_name

    created: list[tuple[str, str | None, str | None]] = []

    def create(repo_type: str | None = None, **kwargs: Any) -> Any:
        repo_id = kwargs.pop("repo_id", None) or repo_name()
        token = kwargs.get("token")
        url = api.create_repo(repo_id=repo_id, repo_type=repo_type, **kwargs)
        created.append((url.repo_id, repo_type, token))
        return url

    yield create
    for repo_id, repo_type, token in created:
        api.delete_repo(repo_id=repo_id, repo_type=repo_type, token=token, missing_ok=True)


@pytest.fixture
def new_repo_id() -> str:
    from .testing_constants import USER
    from .testing_utils import repo_name

    return f"{USER}/{repo_name()}"
