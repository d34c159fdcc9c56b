"""The comparison Space: its repo files, its configuration as the app reads it, and the app itself run as a
Space runs it (`python app.py` beside `space_config.json`) against a run published to the local Hub and a
second run beside it (as a sweep's Space lists its runs), called through gradio_client and a real browser
(Debian's chromium driven by playwright)."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from eval_results import write_eval
from fixtures_hub import TEST_NAMESPACE
from helpers import push_argv, run_cli
from packaging.requirements import Requirement

from hubkit.errors import ReleaseError, RepoNotFoundError
from hubkit.release.companions import SPACE
from hubkit.resources import space_dir
from hubkit.runs import load_run
from hubkit.runs.eval_results import (
    Contamination,
    MetricInfo,
    Sample,
)
from hubkit.runs.manifest import Manifest
from hubkit.space.config import SpaceConfig, app_config_module, space_config_from_hub
from hubkit.space.files import APP_MODULES, SHORT_DESCRIPTION, ZEROGPU_TORCH, space_repo_files
from tests.support.runs import finish_run, make_run, qwen3_shapes

# Shapes of the tiny Qwen3's q_proj and v_proj (hidden 64, 4 heads x 16, 2 KV heads x 16, 2 layers).
TINY_SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)
STEPS = (1, 2, 3)
MAX_NEW_TOKENS = 12
PROMPT = "What is 7 + 5?"
STARTUP_TIMEOUT_S = 300
OTHER = "length_penalty_weight=0.5"  # the second run the served Space compares


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _app_env() -> dict[str, str]:
    # The session's local Hub is already in the environment (HF_ENDPOINT, HF_TOKEN, HF_HOME).
    return {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "GRADIO_ANALYTICS_ENABLED": "False"}


def _wait_until_serving(url: str, process: subprocess.Popen, log: Path) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the app exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(OSError):
            if opener.open(url, timeout=5).status == 200:
                return
        time.sleep(1.0)
    pytest.fail(f"the app did not serve {url} within {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def _serving(command: list[str], cwd: Path, port: int, log: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}/"
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=_app_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_until_serving(url, process, log)
        yield url
    finally:
        # SIGTERM: SIGINT is ignored when the test run was started in the background. The app's answer
        # checker exits when its input closes; `hubkit space` stops the app on SIGTERM.
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory, local_hub, tiny_qwen3, qwen3_tokenizer_dir: Path
) -> SimpleNamespace:
    """A 3-checkpoint run (adapters with different random weights, the tokenizer saved) pushed to the local Hub."""
    root = tmp_path_factory.mktemp("space-runs")
    run_dir = make_run(
        root, STEPS, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES, tokenizer_dir=qwen3_tokenizer_dir
    )
    # The Space's default max new tokens follows the run's completion length.
    manifest = Manifest.load(run_dir)
    manifest.with_updates(hyperparameters={"max_completion_length": MAX_NEW_TOKENS}).save(run_dir)
    finish_run(run_dir)
    repo_id = f"{TEST_NAMESPACE}/space-{uuid.uuid4().hex[:8]}"
    argv = push_argv(run_dir, repo_id, local_hub.endpoint)
    assert run_cli([*argv, "--no-merged", "--quiet"]) == 0
    return SimpleNamespace(run_dir=run_dir, repo_id=repo_id, base_model=tiny_qwen3.repo_id)


@pytest.fixture(scope="module")
def space_config(published) -> SpaceConfig:
    """The config the push would write, made small: float64 (greedy answers independent of the BLAS's
    summation order) and a queue of 4. On this CPU the app keeps one adapter loaded at a time (3
    checkpoints: every switch evicts one, and the trajectory takes three calls)."""
    config = SpaceConfig.from_run(load_run(published.run_dir), published.repo_id)
    assert config.app.max_new_tokens == MAX_NEW_TOKENS
    assert config.app.cpu_max_loaded_adapters == 1
    app = dataclasses.replace(config.app, dtype="float64", queue_size=4)
    return dataclasses.replace(config, app=app)


@pytest.fixture(scope="module")
def other_run(published, hub_api) -> SimpleNamespace:
    """A second run's adapter repo, whose one checkpoint (step 1) is the first run's step 2: it answers as
    that one does, and only from its own repo."""
    repo_id = f"{TEST_NAMESPACE}/space-other-{uuid.uuid4().hex[:8]}"
    hub_api.create_repo(repo_id)
    folder = hub_api.snapshot_download(published.repo_id, allow_patterns=["checkpoints/global_step_2/*"])
    hub_api.upload_folder(
        repo_id=repo_id,
        folder_path=Path(folder) / "checkpoints" / "global_step_2",
        path_in_repo="checkpoints/global_step_1",
    )
    return SimpleNamespace(repo_id=repo_id)


@pytest.fixture(scope="module")
def served_config(space_config: SpaceConfig, other_run) -> SpaceConfig:
    """The Space served: the run's, and the second run listed after it with its checkpoints, as a sweep's
    Space lists a run."""
    other = app_config_module().RunConfig(
        OTHER, other_run.repo_id, checkpoints=("checkpoints/global_step_1",)
    )
    return dataclasses.replace(
        space_config, app=dataclasses.replace(space_config.app, runs=(*space_config.app.runs, other))
    )


@pytest.fixture(scope="module")
def app_url(served_config: SpaceConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Space repo's files in a folder, served as a Space serves them: `python app.py`."""
    folder = tmp_path_factory.mktemp("space-repo")
    for name, content in space_repo_files(served_config).items():
        (folder / name).write_bytes(content)
    port = _free_port()
    command = [sys.executable, "app.py", "--host=127.0.0.1", f"--port={port}"]
    with _serving(command, folder, port, folder.parent / "app.log") as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url: str):
    from gradio_client import Client

    return Client(app_url, verbose=False)


@pytest.fixture(scope="module")
def app_modules() -> Iterator[SimpleNamespace]:
    """The app's `config`, `hardware` and `engine` modules imported in this process (removed again afterwards)."""
    path = str(space_dir("compare"))
    names = ("config", "hardware", "checkpoints", "engine")
    sys.path.insert(0, path)
    try:
        yield SimpleNamespace(**{name: importlib.import_module(name) for name in names})
    finally:
        sys.path.remove(path)
        for name in names:
            sys.modules.pop(name, None)


# --- The Space repo's files -------------------------------------------------------------------------


def test_space_repo_files(space_config: SpaceConfig, published, app_modules) -> None:
    from huggingface_hub import SpaceCard

    files = space_repo_files(space_config)
    assert set(files) == {*APP_MODULES, "space_config.json", "requirements.txt", "README.md"}
    card = SpaceCard(files["README.md"].decode())
    assert card.data.sdk == "gradio"
    assert card.data.sdk_version == importlib.metadata.version("gradio")
    assert card.data.app_file == "app.py"
    assert card.data.python_version == "3.12"
    assert card.data.models == [published.base_model, published.repo_id]
    assert card.data.suggested_hardware == space_config.hardware == "zero-a10g"  # ZeroGPU
    assert card.data.short_description == SHORT_DESCRIPTION
    assert len(card.data.short_description) <= 60
    assert f'Client("{SPACE.default_repo_id(published.repo_id)}")' in card.text
    lines = [line for line in files["requirements.txt"].decode().splitlines() if not line.startswith("#")]
    requirements = {requirement.name: requirement for requirement in map(Requirement, lines)}
    assert "gradio" not in requirements
    assert str(requirements["torch"].specifier).removeprefix("==") in ZEROGPU_TORCH
    assert str(requirements["peft"].specifier) == "==" + importlib.metadata.version("peft")
    assert str(requirements["spaces"].specifier) == ">=" + importlib.metadata.version("spaces")
    assert requirements["transformers"].specifier.contains(importlib.metadata.version("transformers"))
    # The app reads the config the push writes, with every field.
    parsed = app_modules.config.AppConfig.from_dict(json.loads(files["space_config.json"]))
    (run,) = parsed.runs
    assert (run.adapter_repo, run.checkpoints) == (published.repo_id, ())  # listed from the repo as it starts
    assert parsed.base_model == published.base_model
    assert parsed.chat_template == "adapter"  # the run saved its tokenizer, published at the repo root
    assert dataclasses.asdict(parsed) == dataclasses.asdict(space_config.app)  # every field, examples too
    assert parsed.examples


def test_the_config_lists_runs_and_refuses_what_it_does_not_know(app_modules) -> None:
    """`space_config.json` is read from the Space's repo: every run's repo id, revision and checkpoint is
    checked for its form; schema 1 (one run at the top) is read as that one run."""
    config = app_modules.config
    runs = [
        {"name": "lp=0.0", "adapter_repo": "me/lp0", "checkpoints": ["checkpoints/global_step_5", ""]},
        {
            "name": "lp=1.0",
            "adapter_repo": "me/lp1",
            "merged_repo": "me/lp1-merged",
            "adapter_revision": "v2",
        },
    ]
    data = {"title": "lp", "base_model": "Qwen/Qwen3-4B", "runs": runs, "schema_version": 2}
    parsed = config.AppConfig.from_dict(data)
    assert config.AppConfig.from_dict(json.loads(parsed.to_json())) == parsed
    assert parsed.run("") is parsed.runs[0] and parsed.run("lp=1.0").merged_repo == "me/lp1-merged"
    assert parsed.run("lp=0.5") is None
    assert parsed.runs[0].checkpoints == ("checkpoints/global_step_5", "")

    schema_1 = {"title": "run", "base_model": "b", "adapter_repo": "me/run", "merged_repo": "me/run-merged"}
    (only,) = config.AppConfig.from_dict({**schema_1, "schema_version": 1}).runs
    assert (only.name, only.adapter_repo, only.merged_repo, only.checkpoints) == (
        "run",
        "me/run",
        "me/run-merged",
        (),
    )

    def run(**changes):
        return {**data, "runs": [{**runs[0], **changes}]}

    refused = {
        "unknown keys \\['adapter_repo'\\]": {**data, "adapter_repo": "me/x"},  # schema 1's key in schema 2
        "unknown keys \\['runs'\\]": {**schema_1, "schema_version": 1, "runs": runs},
        "a run in space_config.json has unknown keys \\['url'\\]": run(url="http://x"),
        "adapter_repo must be a Hub repo id": run(adapter_repo="../../etc"),
        "merged_repo must be a Hub repo id": run(merged_repo="me/a/b"),
        "base_model must be a Hub repo id": {**data, "base_model": "me/../x"},
        "adapter_revision must be a branch": run(adapter_revision="main\nx"),
        "is not checkpoints/global_step_N": run(checkpoints=["checkpoints/../../x"]),
        "checkpoints must be a list": run(checkpoints="checkpoints/global_step_1"),
        "names two runs alike": {**data, "runs": [runs[0], {**runs[1], "name": "lp=0.0"}]},
        "must name 1 to 100 runs": {**data, "runs": []},
        "must list its runs": {key: value for key, value in data.items() if key != "runs"},
        "has schema 3": {**data, "schema_version": 3},
        "a run's name must be": run(name=""),
    }
    for message, value in refused.items():
        with pytest.raises(ValueError, match=message):
            config.AppConfig.from_dict(value)


def test_app_does_not_import_hubkit() -> None:
    for name in APP_MODULES:
        tree = ast.parse((space_dir("compare") / name).read_text())
        imported = {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(module.split(".")[0] == "hubkit" for module in imported), name


def test_examples_come_from_the_evaluation(tmp_path: Path, tiny_qwen3) -> None:
    run_dir = make_run(tmp_path, (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    problems = [("What is 2 + 2?", "4"), ("What is 3 * 3?", "9"), ("What is 10 - 7?", "3")]
    # The base gets problem 0 right and the rest wrong; step 2 gets problem 2 right too (a fix).
    right = {None: {0}, 1: {0}, 2: {0, 2}}
    samples = [
        Sample(
            model="base" if step is None else f"global_step_{step}",
            step=step,
            problem_index=i,
            problem=problem,
            reference=answer,
            answer=answer if i in right[step] else "no idea",
            correct=i in right[step],
            tokens=10,
            truncated=False,
        )
        for step in (None, 1, 2)
        for i, (problem, answer) in enumerate(problems)
    ]
    write_eval(
        run_dir,
        samples,
        created_at="2026-01-01T00:00:00Z",
        metric=MetricInfo(name="math_correctness", description="math-verify"),
        problems={
            "source": "problems.jsonl",
            "split": None,
            "revision": None,
            "sha256": "0" * 64,
            "contamination": Contamination(checked=False, overlap=0, train_problems=None),
        },
        generation={"max_new_tokens": 16, "batch_size": 4, "chat_template": "qwen3"},
    )
    config = SpaceConfig.from_run(load_run(run_dir), "me/run")
    # The problem the best checkpoint fixed comes first, each with its reference answer.
    examples = config.app.examples
    assert (examples[0].prompt, examples[0].answer) == problems[2]
    assert {(e.prompt, e.answer) for e in examples} == set(problems)


# --- The app through its API --------------------------------------------------------------------------


def test_compare_two_checkpoints_and_the_trajectory(client) -> None:
    checkpoints = client.predict(api_name="/checkpoints")
    assert checkpoints == [*(f"checkpoints/global_step_{s}" for s in STEPS), ""]
    base_1, trained_1 = client.predict(PROMPT, "checkpoints/global_step_1", api_name="/compare")
    base_2, trained_2 = client.predict(PROMPT, "checkpoints/global_step_2", api_name="/compare")
    assert base_1 and trained_1 and trained_2
    assert base_1 == base_2  # greedy: the base answers the same whatever the checkpoint
    assert trained_1 != trained_2  # adapters with other random weights answer otherwise
    assert trained_1 != base_1
    # The final adapter at the root is the newest step's.
    _, final = client.predict(PROMPT, "", api_name="/compare")
    _, trained_3 = client.predict(PROMPT, "checkpoints/global_step_3", api_name="/compare")
    assert final == trained_3

    rows = client.predict(PROMPT, api_name="/trajectory")
    assert [row["step"] for row in rows] == list(STEPS)
    assert [row["answer"] for row in rows] == [trained_1, trained_2, trained_3]
    assert all(row["error"] is None and 0 < row["tokens"] <= MAX_NEW_TOKENS for row in rows)

    # The second run: its own checkpoints, loaded from its own repo (its step 1 is the first run's step 2).
    first, other = client.predict(api_name="/runs")
    assert other == OTHER and client.predict(first, api_name="/checkpoints") == checkpoints
    assert client.predict(OTHER, api_name="/checkpoints") == ["checkpoints/global_step_1"]
    base, trained = client.predict(PROMPT, "checkpoints/global_step_1", OTHER, api_name="/compare")
    assert (base, trained) == (base_1, trained_2)
    (row,) = client.predict(PROMPT, OTHER, api_name="/trajectory")
    assert (row["step"], row["answer"]) == (1, trained_2)


def _alone(engine, prompt_ids: list[int], model) -> tuple[int, ...]:
    """`model`'s greedy answer to the prompt, loaded alone (no batch), cut at the engine's stop ids."""
    import torch

    with torch.inference_mode():
        output = model.generate(
            input_ids=torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            max_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            eos_token_id=list(engine.stop_ids),
            pad_token_id=engine.pad_id,
        )
    ids = output[0, len(prompt_ids) :].tolist()
    stops = [i for i, token in enumerate(ids) if token in engine.stop_ids]
    return tuple(ids[: stops[0]] if stops else ids)


def test_mixed_batch_equals_each_model_alone(space_config: SpaceConfig, app_modules, client) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    engine_module = app_modules.engine
    config = app_modules.config.AppConfig.from_dict(json.loads(space_config.to_json()))
    # Two adapters beside the base, to batch both checkpoints at once.
    engine = engine_module.Engine(dataclasses.replace(config, cpu_max_loaded_adapters=2), device="cpu")
    prompt_ids = engine.encode(PROMPT)
    settings = engine_module.Settings(max_new_tokens=MAX_NEW_TOKENS)
    (run,) = config.runs
    values = [app_modules.checkpoints.Adapter(run.name, f"checkpoints/global_step_{s}") for s in STEPS[:2]]

    def fresh_base():
        return AutoModelForCausalLM.from_pretrained(config.base_model, dtype=torch.float64).eval()

    expected = {None: _alone(engine, prompt_ids, fresh_base())}
    for value in values:
        peft_model = PeftModel.from_pretrained(fresh_base(), run.adapter_repo, subfolder=value.checkpoint)
        expected[value] = _alone(engine, prompt_ids, peft_model)
    assert len(set(expected.values())) == 3  # the three models answer differently

    for rows in ([None, values[0]], [None, values[1]], values):
        answers = engine.generate(prompt_ids, rows, settings)
        assert [a.token_ids for a in answers] == [expected[v] for v in rows], rows
    # What the API answers is the same batch's answer.
    base_text, trained_text = client.predict(PROMPT, values[1].checkpoint, api_name="/compare")
    assert (base_text, trained_text) == tuple(
        a.text for a in engine.generate(prompt_ids, [None, values[1]], settings)
    )


def test_dora_checkpoints_answer_as_each_model_alone(
    space_config: SpaceConfig, app_modules, hub_api, tmp_path: Path
) -> None:
    """PEFT refuses DoRA in a mixed batch ("Cannot pass `adapter_names` when DoRA is enabled"): the app
    answers each row on its own, as PEFT loads each model alone."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    config = app_modules.config.AppConfig.from_dict(json.loads(space_config.to_json()))

    def fresh_base():
        return AutoModelForCausalLM.from_pretrained(config.base_model, dtype=torch.float64).eval()

    repo_id = f"{TEST_NAMESPACE}/dora-{uuid.uuid4().hex[:8]}"
    hub_api.create_repo(repo_id)
    torch.manual_seed(0)
    dora = get_peft_model(
        fresh_base(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], use_dora=True)
    )
    for module in dora.modules():
        if hasattr(module, "lora_B"):
            torch.nn.init.normal_(module.lora_B["default"].weight, std=0.5)  # a trained adapter, not a no-op
    dora.save_pretrained(tmp_path / "dora")
    tokenizer = ["tokenizer*", "*.jinja", "special_tokens_map.json", "vocab.json", "merges.txt"]
    hub_api.upload_folder(  # the run's tokenizer, as a release holds it at its root
        repo_id=repo_id,
        folder_path=hub_api.snapshot_download(config.runs[0].adapter_repo, allow_patterns=tokenizer),
    )
    hub_api.upload_folder(
        repo_id=repo_id, folder_path=tmp_path / "dora", path_in_repo="checkpoints/global_step_1"
    )
    dora_run = app_modules.config.RunConfig("dora", repo_id)
    engine = app_modules.engine.Engine(dataclasses.replace(config, runs=(dora_run,)), device="cpu")
    prompt_ids = engine.encode(PROMPT)
    value = app_modules.checkpoints.Adapter("dora", "checkpoints/global_step_1")

    expected = [
        _alone(engine, prompt_ids, fresh_base()),
        _alone(
            engine, prompt_ids, PeftModel.from_pretrained(fresh_base(), repo_id, subfolder=value.checkpoint)
        ),
    ]
    assert expected[0] != expected[1]
    answers = engine.generate(
        prompt_ids, [None, value], app_modules.engine.Settings(max_new_tokens=MAX_NEW_TOKENS)
    )
    assert [a.token_ids for a in answers] == expected


def test_adapter_cache_is_bounded(space_config: SpaceConfig, app_modules) -> None:
    config = app_modules.config.AppConfig.from_dict(json.loads(space_config.to_json()))
    engine = app_modules.engine.Engine(config, device="cpu")  # one adapter at a time on a CPU
    (run,) = config.runs
    values = [
        app_modules.checkpoints.Adapter(run.name, v)
        for v in app_modules.checkpoints.Checkpoints(config).list(None)
    ]
    for value in values:
        engine.ensure_loaded([value])
        assert engine.loaded == (value,)  # the previous one unloaded only once the new one is in
        assert list(engine.model.peft_config) == [engine.ensure_loaded([value])[0]]
    with pytest.raises(ValueError, match="cache holds 1"):
        engine.ensure_loaded(values[:2])


def test_bad_requests_get_errors_and_the_app_keeps_answering(client, space_config: SpaceConfig) -> None:
    from gradio_client.exceptions import AppError
    from gradio_client.utils import QueueError

    refused = {
        "": "empty",
        " \n ": "empty",
        "x" * (space_config.app.max_prompt_chars + 1): "characters",
    }
    for prompt, message in refused.items():
        with pytest.raises(AppError, match=message):
            client.predict(prompt, "", api_name="/compare")
    with pytest.raises(AppError, match="has no step 99"):
        client.predict(PROMPT, "checkpoints/global_step_99", api_name="/compare")
    with pytest.raises(AppError, match="Unknown checkpoint"):
        client.predict(PROMPT, "../../etc/passwd", api_name="/compare")
    with pytest.raises(AppError, match="Unknown run 'lp=9'"):
        client.predict(PROMPT, "", "lp=9", api_name="/compare")
    with pytest.raises(AppError, match="has no step 2"):  # the first run's, not the second's
        client.predict(PROMPT, "checkpoints/global_step_2", OTHER, api_name="/compare")
    with pytest.raises(AppError, match="empty"):
        client.predict("", api_name="/trajectory")

    # 20 at once: one runs, `queue_size` wait, the rest are told the queue is full (none is lost).
    jobs = [
        client.submit(f"What is {i} + 1?", "checkpoints/global_step_1", api_name="/compare")
        for i in range(20)
    ]
    answered, full = 0, 0
    for job in jobs:
        try:
            base, trained = job.result(timeout=300)
            answered += bool(base and trained)
        except QueueError as e:
            assert "full" in str(e)
            full += 1
    assert answered + full == 20
    assert answered >= 1
    assert full >= 1  # 20 requests arrive within a second or two; one runs at a time and 4 may wait
    base, trained = client.predict(PROMPT, "checkpoints/global_step_2", api_name="/compare")
    assert base and trained


def _stats_done(step: int) -> str:
    """A page function: both answers' lines show the time taken and the verdict, the checkpoint's `step`."""
    return (
        "['#base-stats', '#trained-stats'].every(id => / s · .*correct/.test(document.querySelector(id).innerText))"
        f" && document.querySelector('#trained-stats').innerText.startsWith('step {step}')"
    )


def test_browser_compares_a_chosen_checkpoint_of_a_chosen_run(
    app_url: str, other_run, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (`make test` installs it)")
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    args += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    shot = tmp_path / "space-compare.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            page.goto(app_url, wait_until="networkidle")
            page.locator("#checkpoint input").click()
            page.get_by_role("option", name="step 2").click()
            page.locator("#prompt textarea").fill(PROMPT)
            page.locator("#reference").get_by_role("textbox").fill("12")
            page.locator("#compare").click()
            page.wait_for_function(_stats_done(2), timeout=120_000)
            base = page.locator("#base-answer textarea").input_value()
            trained = page.locator("#trained-answer textarea").input_value()
            # The other run, then its checkpoint: its step 1 is the first run's step 2, from its own repo.
            page.locator("#run input").click()
            page.get_by_role("option", name=OTHER).click()
            page.wait_for_function(
                f"document.querySelector('#run-links').innerText.includes({json.dumps(other_run.repo_id)})",
                timeout=30_000,
            )
            page.locator("#checkpoint input").click()
            page.get_by_role("option", name="step 1").click()
            page.locator("#compare").click()
            page.wait_for_function(_stats_done(1), timeout=120_000)
            other = page.locator("#trained-answer textarea").input_value()
        finally:  # the page as it ended, also when the test fails
            page.screenshot(path=str(shot), full_page=True)
            browser.close()
            if os.environ.get("HUBKIT_TEST_ARTIFACTS"):
                artifacts = Path(os.environ["HUBKIT_TEST_ARTIFACTS"])
                artifacts.mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, artifacts / shot.name)
    assert base and trained and base != trained
    assert other == trained


def test_a_checkpoint_that_cannot_load_is_reported(client, published, hub_api) -> None:
    # A step whose adapter_config.json is there but whose weights are not (an upload cut short).
    hub_api.upload_file(
        path_or_fileobj=b'{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]}',
        path_in_repo="checkpoints/global_step_9/adapter_config.json",
        repo_id=published.repo_id,
    )
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="step 9 could not be loaded"):
        client.predict(PROMPT, "checkpoints/global_step_9", api_name="/compare")
    rows = client.predict(PROMPT, api_name="/trajectory")
    assert [row["step"] for row in rows] == [*STEPS, 9]
    assert [row["error"] is None for row in rows] == [True, True, True, False]
    base, trained = client.predict(PROMPT, "checkpoints/global_step_1", api_name="/compare")
    assert base and trained


# --- `hubkit space` ---------------------------------------------------------------------------------------


def test_hubkit_space_serves_a_published_repo(published, local_hub, tmp_path: Path) -> None:
    from gradio_client import Client

    port = _free_port()
    command = [sys.executable, "-m", "hubkit", "space", "--repo-id", published.repo_id, f"--port={port}"]
    command += ["--endpoint", local_hub.endpoint]
    with _serving(command, tmp_path, port, tmp_path / "space.log") as url:
        client = Client(url, verbose=False)
        assert client.predict(api_name="/checkpoints")[0] == "checkpoints/global_step_1"
        base, trained = client.predict(PROMPT, "checkpoints/global_step_1", api_name="/compare")
        assert base and trained


def test_the_config_read_back_from_the_hub_is_the_runs(published, hub_api, make_repo_id) -> None:
    from_run = SpaceConfig.from_run(load_run(published.run_dir), published.repo_id)
    from_hub = space_config_from_hub(hub_api, published.repo_id)
    assert from_hub == from_run  # the run has no evaluation: the same fallback examples
    with pytest.raises(RepoNotFoundError, match="is not on"):
        space_config_from_hub(hub_api, make_repo_id("missing"))
    not_hubkit = make_repo_id("plain")
    hub_api.create_repo(not_hubkit)
    hub_api.upload_file(path_or_fileobj=b"{}", path_in_repo="adapter_config.json", repo_id=not_hubkit)
    with pytest.raises(ReleaseError, match=r"has no hubkit\.json"):
        space_config_from_hub(hub_api, not_hubkit)


def test_hubkit_space_needs_a_run_or_a_repo(published, capsys) -> None:
    assert run_cli(["space"]) == 2
    # The run records no push_to.
    assert run_cli(["space", "--run-dir", str(published.run_dir)]) == 2
    assert "pass --repo-id" in capsys.readouterr().err


# A template that loops, or builds a 4 GB string, only when the question holds a word: rendered for the
# Space's examples before it serves, it is harmless; a user's request then holds it.
TRIGGERED = {
    "loops": "{% if 'xyzzy' in messages[-1]['content'] %}{% for i in range(100000) %}{% for j in "
    "range(100000) %}{% endfor %}{% endfor %}{% endif %}{{ messages[-1]['content'] }}",
    "grows": "{% if 'xyzzy' in messages[-1]['content'] %}{% set x = 'a' * 100000000 %}{% for i in "
    "range(40) %}{{ x }}{% endfor %}{% endif %}{{ messages[-1]['content'] }}",
}


@pytest.mark.parametrize("kind", TRIGGERED)
def test_a_request_whose_prompt_the_template_cannot_render_is_refused_and_the_next_is_served(
    kind: str, space_config: SpaceConfig, app_modules
) -> None:
    import resource

    import gradio as gr

    app_module = importlib.import_module("app")
    try:
        config = app_modules.config.AppConfig.from_dict(json.loads(space_config.to_json()))
        engine = app_modules.engine.Engine(config, device="cpu")
        engine.tokenizer.chat_template = TRIGGERED[kind]
        app = app_module.CompareApp(config, engine)
        try:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            started = time.monotonic()
            with pytest.raises(gr.Error, match="chat template"):
                app.api_compare("xyzzy: what is 7 + 5?", "checkpoints/global_step_1")
            assert time.monotonic() - started < 15
            # The template ran in a child: this process's memory did not grow with its string.
            assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # KiB
            base, trained = app.api_compare(PROMPT, "checkpoints/global_step_1")
            assert base and trained
        finally:
            app.grader.close()
    finally:
        sys.modules.pop("app", None)
