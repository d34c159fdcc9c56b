"""The comparison Space on the hardware it is put on: the dtype it loads in, how many adapters it keeps, its
default answer length, the ZeroGPU time each generate asks for, the suggested hardware, and requirements that
ZeroGPU's Pythons install (resolved by pip against PyPI)."""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import json
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fixtures_hub import TEST_NAMESPACE
from helpers import run_cli
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_space import app_modules  # noqa: F401  (the fixture: the app's config and engine modules)

from hubkit.errors import SpaceError
from hubkit.publish import PushRequest, push_run
from hubkit.resources import space_dir
from hubkit.runs.manifest import Manifest
from hubkit.space.config import SpaceConfig
from hubkit.space.files import (
    PYTHON_VERSION,
    ZEROGPU_PYTHONS,
    ZEROGPU_TORCH,
    pinned_requirements,
    space_readme,
    zerogpu_torch,
)
from tests.support.runs import TINY_SHAPES, make_run, write_checkpoint
from tests.support.tiny import publish_model

PYPI = "https://pypi.org/simple/"
PIP_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def bf16_release(tmp_path_factory: pytest.TempPathFactory, hub_api, tiny_qwen3) -> SimpleNamespace:
    """The tiny Qwen3 saved in bfloat16 (its config says so, as Qwen3-4B's does) and an adapter repo with
    two checkpoints for it, on the local Hub."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("bf16-release")
    base_dir = root / "base"
    shutil.copytree(tiny_qwen3.local_dir, base_dir)  # the tokenizer and generation config
    AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir).to(torch.bfloat16).save_pretrained(base_dir)
    assert json.loads((base_dir / "config.json").read_text())["dtype"] == "bfloat16"
    suffix = uuid.uuid4().hex[:8]
    base = publish_model(hub_api, base_dir, f"{TEST_NAMESPACE}/tiny-qwen3-bf16-{suffix}")
    adapter_repo = f"{TEST_NAMESPACE}/space-bf16-{suffix}"
    hub_api.create_repo(adapter_repo)
    for step in (1, 2):
        folder = write_checkpoint(root / "run", step, base_model=base.repo_id, shapes=TINY_SHAPES)
        hub_api.upload_folder(
            repo_id=adapter_repo,
            folder_path=folder,
            path_in_repo=f"checkpoints/global_step_{step}",
            allow_patterns=["adapter_*"],
        )
    return SimpleNamespace(base_model=base.repo_id, adapter_repo=adapter_repo)


# --- Loading on a CPU ------------------------------------------------------------------------------------


def test_a_cpu_loads_the_checkpoints_dtype_and_one_adapter_at_a_time(bf16_release, app_modules) -> None:  # noqa: F811
    config_module, engine_module = app_modules.config, app_modules.engine
    config = config_module.AppConfig(
        title="bf16",
        base_model=bf16_release.base_model,
        runs=(config_module.RunConfig("bf16", bf16_release.adapter_repo),),
        chat_template="base",
        max_new_tokens=1024,
    )
    assert config.dtype == "auto"
    engine = engine_module.Engine(config, device="cpu")
    assert engine.dtype == torch.bfloat16
    assert {parameter.dtype for parameter in engine.base.parameters()} == {torch.bfloat16}
    assert (engine.capacity, engine.default_max_new_tokens) == (1, 256)

    listed = app_modules.checkpoints.Checkpoints(config).list("bf16")
    assert listed == ("checkpoints/global_step_1", "checkpoints/global_step_2")
    values = [app_modules.checkpoints.Adapter("bf16", value) for value in listed]
    for value in (*values, values[0]):
        engine.ensure_loaded([value])
        assert engine.loaded == (value,)
        assert len(engine.model.peft_config) == 1  # the previous adapter's weights are gone
    # It answers in bfloat16, base and checkpoint side by side.
    prompt_ids = engine.encode("What is 7 + 5?")
    base, trained = engine.generate(prompt_ids, [None, values[1]], engine_module.Settings(max_new_tokens=8))
    assert base.tokens > 0 and trained.tokens > 0
    assert base.token_ids != trained.token_ids

    # The config's dtype, when it names one, is used as it is.
    engine = engine_module.Engine(dataclasses.replace(config, dtype="float32"), device="cpu")
    assert {parameter.dtype for parameter in engine.base.parameters()} == {torch.float32}


def test_auto_dtype_is_the_checkpoints_unless_the_hardware_cannot(app_modules, monkeypatch) -> None:  # noqa: F811
    resolve = app_modules.hardware.resolve_dtype
    assert resolve("auto", "cpu", torch.bfloat16) == torch.bfloat16
    assert resolve("auto", "cpu", torch.float32) == torch.float32
    assert resolve("auto", "cpu", None) == torch.float32  # transformers' default when a config names none
    assert resolve("float32", "cpu", torch.bfloat16) == torch.float32
    assert resolve("float64", "cuda", torch.bfloat16) == torch.float64
    # No GPU here: the compute capability is what a T4 (7.5) and an L4 (8.9) report. Only this is mocked.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert resolve("auto", "cuda", torch.bfloat16) == torch.float16
    assert resolve("auto", "cuda", torch.float32) == torch.float32
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    assert resolve("auto", "cuda", torch.bfloat16) == torch.bfloat16


def test_the_hardware_sets_the_adapters_kept_and_the_answer_length(app_modules) -> None:  # noqa: F811
    config_module, Limits = app_modules.config, app_modules.hardware.Limits
    run = config_module.RunConfig("t", "me/a")
    config = config_module.AppConfig(title="t", base_model="b", runs=(run,), max_new_tokens=2048)
    assert Limits.for_device(config, "cuda") == Limits(capacity=12, default_max_new_tokens=2048)
    assert Limits.for_device(config, "cuda:1") == Limits(capacity=12, default_max_new_tokens=2048)
    assert Limits.for_device(config, "cpu") == Limits(capacity=1, default_max_new_tokens=256)
    short = dataclasses.replace(config, max_new_tokens=100)  # a run that trained shorter than the CPU default
    assert Limits.for_device(short, "cpu").default_max_new_tokens == 100
    with pytest.raises(ValueError, match="cpu_max_new_tokens must be at least 1"):
        dataclasses.replace(config, cpu_max_new_tokens=0)


# --- ZeroGPU ----------------------------------------------------------------------------------------------


def test_the_gpu_time_asked_grows_with_the_request_and_is_bounded(app_modules) -> None:  # noqa: F811
    config = app_modules.config.AppConfig(
        title="t",
        base_model="b",
        runs=(app_modules.config.RunConfig("t", "me/a"),),
        gpu_overhead_seconds=10.0,
        gpu_seconds_per_token=0.02,
        gpu_max_seconds=120,
    )
    assert config.gpu_seconds(rows=2, max_new_tokens=256) == 21  # 10 + 256 x 2 x 0.02 = 20.24, rounded up
    assert config.gpu_seconds(rows=2, max_new_tokens=1024) == 51
    assert config.gpu_seconds(rows=4, max_new_tokens=1024) == 92
    assert config.gpu_seconds(rows=12, max_new_tokens=1024) == 120  # at most gpu_max_seconds
    assert config.gpu_seconds(rows=1, max_new_tokens=1) == 11
    # A trajectory is cut into calls that each fit: 5 rows x 1024 tokens x 0.02 s = 102.4 s <= 110 s.
    assert config.rows_per_gpu_call(1024) == 5
    assert config.gpu_seconds(rows=config.rows_per_gpu_call(1024), max_new_tokens=1024) <= 120
    assert config.rows_per_gpu_call(4096) == 1  # never none
    with pytest.raises(ValueError, match="gpu_overhead_seconds < gpu_max_seconds"):
        dataclasses.replace(config, gpu_overhead_seconds=120.0)


def test_the_app_imports_spaces_first_and_its_decorator_is_a_no_op_here() -> None:
    from spaces.config import Config

    import spaces

    # ZeroGPU hooks torch's CUDA calls when `spaces` is imported: it must come before torch.
    tree = ast.parse((space_dir("compare") / "app.py").read_text())
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert isinstance(imports[0], ast.Import) and imports[0].names[0].name == "spaces"
    # Off ZeroGPU (SPACES_ZERO_GPU unset) the real package hands the function back unchanged, generators too.
    assert not Config.zero_gpu

    def generate_rows(prompt_ids: list[int], rows: list[str | None], settings: object):
        yield from rows

    assert spaces.GPU(duration=lambda *args: 60)(generate_rows) is generate_rows


# --- The Space repo's README and requirements -------------------------------------------------------------


def test_the_suggested_hardware_can_be_chosen(tmp_path: Path) -> None:
    from huggingface_hub import SpaceCard

    run_dir = make_run(tmp_path, (1,), base_model="Qwen/Qwen3-4B", shapes=TINY_SHAPES)
    manifest = Manifest.load(run_dir).with_updates(hyperparameters={"max_completion_length": 2048})
    default = SpaceConfig.from_manifest(manifest, "me/run")
    assert default.hardware == "zero-a10g"
    assert default.app.max_new_tokens == 2048  # the run's length, on a GPU
    card = SpaceCard(space_readme(default))
    assert card.data.suggested_hardware == "zero-a10g"
    assert card.data.python_version == PYTHON_VERSION in ZEROGPU_PYTHONS
    assert "ZeroGPU (`zero-a10g`)" in card.text and "256 new tokens" in card.text

    chosen = SpaceConfig.from_manifest(manifest, "me/run", hardware="cpu-basic")
    card = SpaceCard(space_readme(chosen))
    assert card.data.suggested_hardware == "cpu-basic"
    assert "The suggested hardware is `cpu-basic`" in card.text
    with pytest.raises(SpaceError, match="unknown Space hardware 'h100'"):
        SpaceConfig.from_manifest(manifest, "me/run", hardware="h100")


def test_torch_is_pinned_to_a_release_zerogpu_runs() -> None:
    assert zerogpu_torch("2.13.0") == "2.11.0"  # newer than ZeroGPU's newest: its newest
    assert zerogpu_torch("2.11.0") == "2.11.0"
    assert zerogpu_torch("2.10.1") == "2.10.0"
    assert zerogpu_torch("2.9.0") == "2.8.0"  # 2.9.1 is ZeroGPU's 2.9
    assert zerogpu_torch("2.4.0") == "2.8.0"  # older than ZeroGPU's oldest: its oldest
    assert set(ZEROGPU_TORCH) == {"2.8.0", "2.9.1", "2.10.0", "2.11.0"}


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen(PYPI + "pip/", timeout=15) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_published_requirements_resolve_on_zerogpus_pythons(tmp_path: Path) -> None:
    """What the Space installs (its requirements.txt and the README's gradio) resolves with pip for
    Python 3.10 and 3.12 from PyPI's wheels; on the README's Python every pin is the tested release."""
    if not _pypi_reachable():
        pytest.skip(f"PyPI ({PYPI}) is unreachable: cannot check that the Space's requirements resolve")
    text = pinned_requirements()
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    requirements = [Requirement(line) for line in text.splitlines() if not line.startswith("#")]
    gradio = f"gradio=={importlib.metadata.version('gradio')}"
    for python in ZEROGPU_PYTHONS:
        report = tmp_path / f"report-{python}.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--python-version", python, "--only-binary=:all:", "-r", str(path), gradio]
        command += ["--report", str(report)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        assert result.returncode == 0, f"Python {python}:\n{result.stderr[-4000:]}"
        installed = json.loads(report.read_text())["install"]
        resolved = {
            canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in installed
        }
        assert resolved["torch"] in ZEROGPU_TORCH, python
        for requirement in requirements:
            version = resolved[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(version), (python, requirement, version)
            if python == PYTHON_VERSION and requirement.name not in ("torch", "spaces"):
                tested = importlib.metadata.version(requirement.name).split("+")[0]
                assert version == tested, (requirement, version, tested)


def test_push_space_hardware_reaches_the_space_readme_and_a_bad_one_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import SpaceCard

    run_dir = make_run(tmp_path, (1,), base_model="Qwen/Qwen3-4B", shapes=TINY_SHAPES)
    request = PushRequest(
        run_dir, repo_id="me/run", merged=False, space_hardware="cpu-basic", dry_run=True, token="hf_unused"
    )
    (space,) = [repo for repo in push_run(request).plan.repos if repo.repo_type == "space"]
    readme = next(f for f in space.files if f.path_in_repo == "README.md")
    assert SpaceCard(readme.content.decode()).data.suggested_hardware == "cpu-basic"
    argv = ["push", "--run-dir", str(run_dir), "--repo-id", "me/run", "--dry-run", "--space-hardware", "h100"]
    assert run_cli(argv) == 1
    assert "unknown Space hardware 'h100'" in capsys.readouterr().err
