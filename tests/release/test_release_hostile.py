"""A hostile ``hubkit.json``, in a run directory or in a release read back from the Hub: the same reader
refuses it in one line naming the field, bounded in size and depth, whatever the JSON holds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import run_cli

from hubkit.errors import HubkitError
from hubkit.runs.manifest import MAX_MANIFEST_BYTES, Manifest

VALID = {"run_id": "r1", "framework": "trl", "base_model": "Qwen/Qwen3-4B"}

HOSTILE = {
    "a number as the run id": ({**VALID, "run_id": 5}, "run_id cannot be 5"),
    "a list as hyperparameters": ({**VALID, "hyperparameters": [1, 2]}, "hyperparameters cannot be"),
    "a string as the LoRA": ({**VALID, "lora": "x"}, "lora cannot be 'x'"),
    "Infinity as the rank": ({**VALID, "lora": {"r": "Infinity", "alpha": 16}}, "r cannot be 'Infinity'"),
    "a rank of 2^21": ({**VALID, "lora": {"r": 2**21, "alpha": 16}}, "lora.r must be between 1 and 65536"),
    "a string as the GPU count": ({**VALID, "hardware": {"count": "x"}}, "count cannot be 'x'"),
    "a number as the dataset": ({**VALID, "dataset": 5}, "dataset cannot be 5"),
    "an answer length of 10^12": (
        {**VALID, "hyperparameters": {"max_completion_length": 10**12}},
        "max_completion_length must be between 1 and",
    ),
    "a reward of one string": ({**VALID, "reward": {"components": "x"}}, "components must be a list"),
    "a reward length of 10^12": (
        {
            **VALID,
            "reward": {
                "components": [{"name": "length_penalty", "params": {"max_completion_length": 10**12}}]
            },
        },
        "max_completion_length must be an integer from 1 to",
    ),
    "trackers of numbers": ({**VALID, "trackers": [5]}, "trackers cannot be [5]"),
    "a reward weight of 401 digits": (
        {**VALID, "reward": {"components": [{"name": "gsm8k_correctness", "weight": 10**400}]}},
        "weight of 'gsm8k_correctness' must be a finite number, got a number of 401 digits",
    ),
}
RAW = {
    "nesting 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    "a 5000-digit integer": (
        json.dumps(VALID)[:-1] + ', "hyperparameters": {"x": ' + "9" * 5000 + "}}",
        "too long",
    ),
    "NaN as alpha": (json.dumps({**VALID, "lora": {"r": 16, "alpha": float("nan")}}), "alpha cannot be nan"),
    "not UTF-8": (b"\xff\xfe{}", "not UTF-8"),
    "2 MB of spaces": (" " * 2 * MAX_MANIFEST_BYTES + "{}", "more than the 1.0 MB allowed"),
}


def _write(path: Path, body: object) -> None:
    if isinstance(body, bytes):
        path.write_bytes(body)
    elif isinstance(body, str):
        path.write_text(body)
    else:
        path.write_text(json.dumps(body))


@pytest.mark.parametrize("name", [*HOSTILE, *RAW])
def test_a_hostile_manifest_is_one_line_of_error(name: str, tmp_path: Path) -> None:
    body, expected = HOSTILE[name] if name in HOSTILE else RAW[name]
    _write(tmp_path / "hubkit.json", body)
    started = time.monotonic()
    with pytest.raises(HubkitError) as error:
        Manifest.load(tmp_path)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert expected in message and "\n" not in message, message


@pytest.mark.parametrize(
    "name",
    ["a rank of 2^21", "a reward length of 10^12", "a number as the run id", "a reward weight of 401 digits"],
)
def test_a_release_with_a_hostile_manifest_is_refused_in_one_line(
    name: str, hub_api, new_repo_id, capsys
) -> None:
    body, expected = HOSTILE[name]
    hub_api.create_repo(new_repo_id)
    hub_api.upload_file(
        path_or_fileobj=json.dumps(body).encode(), path_in_repo="hubkit.json", repo_id=new_repo_id
    )
    for argv in (["reward", "show", new_repo_id], ["eval", "--repo-id", new_repo_id]):
        assert run_cli(argv) == 1
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert "hubkit.json" in err, err


def test_a_release_file_larger_than_its_kind_is_refused_before_any_download(
    trl_run_dir: Path, local_hub, hub_api, new_repo_id, capsys
) -> None:
    from helpers import push_adapters

    assert push_adapters(trl_run_dir, new_repo_id, local_hub.endpoint) == 0
    hub_api.upload_file(
        path_or_fileobj=b"{# " + b"x" * 2_000_000 + b" #}",
        path_in_repo="chat_template.jinja",
        repo_id=new_repo_id,
    )
    argv = ["eval", "--repo-id", new_repo_id, "--endpoint", local_hub.endpoint, "--max-new-tokens", "2"]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert (
        "chat_template.jinja is 2000006 bytes, more than such a file may be" in err and err.count("\n") == 1
    )


def test_step_folders_are_named_with_ascii_digits_only(tmp_path: Path) -> None:
    from hubkit.release.layout import steps_in_paths
    from hubkit.runs import load_run
    from tests.support.runs import TINY_SHAPES, make_run

    weights = "adapter_model.safetensors"
    listed = {f"checkpoints/global_step_{name}/{weights}": "" for name in ("20", "٢٠", "２０", "9" * 5000)}
    assert steps_in_paths(listed) == (20,)
    run_dir = make_run(tmp_path / "runs", (20,), base_model="Qwen/Qwen3-4B", shapes=TINY_SHAPES)
    for name in ("٢٠", "9" * 200):
        (run_dir / f"checkpoint-{name}").mkdir()
    assert [c.step for c in load_run(run_dir).checkpoints] == [20]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"step": 1, "data": {"x": ' + "9" * 5000 + "}}", "too long"),
        ('{"step": "1", "data": {}}', "has no integer 'step'"),
        ('{"step": 1000000000000, "data": {}}', "has no integer 'step' from 0 to"),
        ('{"step": 1, "data": {"a": {"b": {"c": {"d": {"e": 1}}}}}}', "nested deeper than 4 levels"),
    ],
    ids=["deep", "digits", "step-text", "step-huge", "nested-data"],
)
def test_a_hostile_metrics_line_is_one_line_of_error(line: str, expected: str, tmp_path: Path) -> None:
    from hubkit.runs.verl import read_metrics_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "data": {"reward": 0.5}}\n' + line + "\n")
    with pytest.raises(HubkitError) as error:
        read_metrics_jsonl(path)
    assert expected in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_metrics_keep_finite_numbers_only_and_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    from hubkit.runs.verl import MAX_METRICS_BYTES, read_metrics_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "data": {"reward": 0.5, "nan": NaN, "inf": Infinity, "big": 1' + "0" * 400 + "}}\n"
    )
    assert read_metrics_jsonl(path).rows[0].values == {"reward": 0.5}
    with path.open("r+b") as f:
        f.truncate(MAX_METRICS_BYTES + 1)  # sparse: no memory, no disk
    with pytest.raises(HubkitError, match=r"more than the 64\.0 MB allowed"):
        read_metrics_jsonl(path)


@pytest.mark.parametrize(
    ("results", "samples", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "", "nested too deep"),
        ('{"models": [' + "9" * 5000 + "]}", "", "too long"),
        ('{"run_id": 5}', "", "invalid results.json"),
        ('{"problems": "x"}', "", "problems must be a JSON object"),
        (None, '{"model": 5}\n', "line 1 is not a sample"),
        (None, '{"model": "base", "extra": {"a": {"b": 1}}}\n', "line 1 is not a sample"),
    ],
    ids=["deep", "digits", "run-id", "problems", "sample-type", "sample-depth"],
)
def test_hostile_eval_files_are_one_line_of_error(
    results: str | None, samples: str, expected: str, tmp_path: Path
) -> None:
    from eval_results import write_eval

    from hubkit.runs.eval_results import load_eval

    write_eval(tmp_path, [])  # a valid results.json (an evaluation of nothing), then the hostile files
    eval_dir = tmp_path / "eval"
    if results is not None:
        (eval_dir / "results.json").write_text(results)
    (eval_dir / "samples.jsonl").write_text(samples)
    with pytest.raises(HubkitError) as error:
        load_eval(tmp_path)
    assert expected in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_hubkit_space_refuses_a_release_whose_chat_template_loops(
    trl_run_dir: Path, local_hub, hub_api, new_repo_id, capsys, monkeypatch
) -> None:
    from helpers import push_adapters

    from hubkit.evaluate import chat

    assert push_adapters(trl_run_dir, new_repo_id, local_hub.endpoint) == 0
    looping = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    hub_api.upload_file(
        path_or_fileobj=looping.encode(), path_in_repo="chat_template.jinja", repo_id=new_repo_id
    )
    monkeypatch.setattr(chat, "RENDER_SECONDS", 5.0)
    started = time.monotonic()
    assert (
        run_cli(["space", "--repo-id", new_repo_id, "--endpoint", local_hub.endpoint, "--port", "7999"]) == 1
    )
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "did not render" in err and err.count("\n") == 1, err


def test_a_release_metrics_file_is_streamed_into_one_row_a_step(tmp_path: Path) -> None:
    import resource

    from hubkit.release.metrics import read_release_metrics

    path = tmp_path / "metrics.jsonl"
    # 300,000 records of one step (11 MB): kept as one row, not one object a line.
    path.write_bytes(b'{"step": 1, "data": {"reward": 0.5}}\n' * 300_000 + b'{"step": 2, "reward": 1.0}')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    metrics = read_release_metrics(path, "me/run")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB
    assert [(row.step, row.values) for row in metrics.rows] == [
        (1, {"reward": 0.5})
    ]  # the last line is unended
