"""`hubkit eval` on the tiny TRL run: results for the base and two checkpoints that re-score by hand to the
same numbers, mixed-adapter answers equal to each checkpoint loaded alone, the contamination check, the
problem sets, the results files, and the vLLM backend in its own environment when one is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
from pathlib import Path

import pytest
from eval_results import eval_summary
from fixtures_runs import copy_verl_run
from helpers import run_cli

from hubkit.errors import ContaminationError, EvalError
from hubkit.evaluate.chat import completion_from_ids, load_tokenizer, render_prompts, stop_token_ids
from hubkit.evaluate.generation import GenerationJob, GenerationSettings
from hubkit.evaluate.metric import metric_for
from hubkit.evaluate.problems import check_contamination, load_local_problems
from hubkit.rewards import gsm8k
from hubkit.rewards.spec import deepscaler_length_penalty, gsm8k_seed
from hubkit.runs.eval_results import (
    SCHEMA_VERSION,
    Contamination,
    Sample,
    load_eval,
    save_eval,
    wilson_interval,
)
from hubkit.runs.manifest import Manifest
from hubkit.runs.problem_hashes import (
    TRAIN_PROBLEM_HASHES_NAME,
    problem_hash,
    read_train_problem_hashes,
    write_train_problem_hashes,
)

DATA = Path(__file__).resolve().parents[1] / "data"
HELDOUT = DATA / "gsm8k_heldout.jsonl"
TRAIN = DATA / "gsm8k_mini.jsonl"
REPO_ROOT = Path(__file__).resolve().parents[2]


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _copy_run(run_dir: Path, dest: Path, **manifest_changes: object) -> Path:
    """A copy of a TRL run without optimizer state, its manifest updated."""
    shutil.copytree(
        run_dir, dest, ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt")
    )
    manifest = Manifest.load(dest)
    manifest.with_updates(run_id=dest.name, **manifest_changes).save(dest)
    return dest


@pytest.fixture(scope="module")
def gsm8k_on_hub(hub_api) -> str:
    """``openai/gsm8k`` on the local Hub, laid out as on huggingface.co: held-out rows as its test split."""
    import pandas as pd

    repo = "openai/gsm8k"
    hub_api.create_repo(repo, repo_type="dataset", exist_ok=True)
    card = (
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n"
        "  - split: test\n    path: main/test-*\n---\n"
    )
    operations = [("README.md", card.encode())]
    for split, path in (("train", TRAIN), ("test", HELDOUT)):
        buffer = pd.DataFrame(_rows(path)).to_parquet()
        operations.append((f"main/{split}-00000-of-00001.parquet", buffer))
    from huggingface_hub import CommitOperationAdd

    return hub_api.create_commit(
        repo,
        [CommitOperationAdd(path_in_repo=p, path_or_fileobj=data) for p, data in operations],
        commit_message="GSM8K-shaped test data",
        repo_type="dataset",
    ).oid


# --- the command on the tiny TRL run ---------------------------------------------------------------


def test_eval_writes_results_for_base_and_two_checkpoints(
    trl_run_dir: Path, tmp_path: Path, gsm8k_on_hub: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A GSM8K run: the seed's reward spec and system prompt; no training-problem hashes recorded.
    run_dir = _copy_run(
        trl_run_dir, tmp_path / "gsm8k-run", reward=gsm8k_seed(), system_prompt=gsm8k.SYSTEM_PROMPT
    )
    argv = ["eval", "--run-dir", str(run_dir), "--steps", "1,3", "--n", "4", "--max-new-tokens", "8"]
    assert run_cli([*argv, "--batch-size", "3"]) == 0
    out = capsys.readouterr().out
    assert "Contamination not checked" in out and TRAIN_PROBLEM_HASHES_NAME in out
    assert "base, global_step_1, global_step_3 on 4 problems from openai/gsm8k (test)" in out
    assert (
        "metric gsm8k_correctness (the run's reward), the run's system prompt, transformers in bfloat16"
        in out
    )
    assert "up to 8 tokens (--max-new-tokens)" in out

    results = load_eval(run_dir)
    assert results is not None
    summary = results.summary
    assert [m.name for m in summary.models] == ["base", "global_step_1", "global_step_3"]
    assert [m.step for m in summary.models] == [None, 1, 3]
    assert summary.metric.name == "gsm8k_correctness"
    problems = summary.problems
    assert (problems.source, problems.split, problems.revision, problems.n) == (
        "openai/gsm8k",
        "test",
        gsm8k_on_hub,
        4,
    )
    assert problems.contamination == Contamination(checked=False, overlap=0, train_problems=None)
    raw = json.loads((run_dir / "eval" / "results.json").read_text())
    assert raw["problems"]["contamination"] == {"checked": False, "overlap": 0, "train_problems": None}
    assert str(tmp_path) not in (run_dir / "eval" / "results.json").read_text()
    generation = summary.generation
    assert generation.backend == "transformers" and generation.do_sample is False
    assert (generation.max_new_tokens, generation.batch_size, generation.temperature) == (8, 3, 0.0)
    assert generation.system_prompt == gsm8k.SYSTEM_PROMPT
    assert (generation.dtype, generation.chat_template_from) == ("bfloat16", "run")  # bf16 by default
    assert generation.prompt_description() == "the run's chat template and system prompt"
    assert (
        generation.chat_template
        == (run_dir / "checkpoints" / "checkpoint-3" / "chat_template.jinja").read_text()
    )

    # The numbers are what re-scoring the saved samples by hand through hubkit.rewards gives.
    assert len(results.samples) == 3 * 4
    heldout = _rows(HELDOUT)[:4]
    for result in summary.models:
        own = results.samples_of(result.step)
        assert [s.problem_index for s in own] == [0, 1, 2, 3]
        assert [s.problem for s in own] == [r["question"] for r in heldout]
        assert [s.reference for s in own] == ["53", "15", "60", "150"]
        by_hand = [
            score > 0 for score in gsm8k.correctness([s.answer for s in own], [r["answer"] for r in heldout])
        ]
        assert [s.correct for s in own] == by_hand
        tokens = [s.tokens for s in own]
        assert result.n == 4 and result.correct == sum(by_hand) and result.accuracy == sum(by_hand) / 4
        assert result.ci95 == pytest.approx(wilson_interval(sum(by_hand), 4))
        assert result.tokens_mean == pytest.approx(statistics.fmean(tokens))
        assert result.tokens_median == statistics.median(tokens) and result.tokens_max == max(tokens)
        assert result.truncated_share == sum(s.truncated for s in own) / 4
        assert all(1 <= s.tokens <= 8 and (s.tokens == 8 or not s.truncated) for s in own)
    answers = {m.name: [s.answer for s in results.samples_of(m.step)] for m in summary.models}
    assert answers["base"] != answers["global_step_3"], "the checkpoints answer with their own adapters"


def _dora_adapters(base_dir: Path, out: Path, steps: tuple[int, ...]) -> dict[str, Path]:
    """DoRA adapters made with PEFT on the base, their B nonzero (as training leaves them)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapters = {}
    for step in steps:
        torch.manual_seed(step)
        config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], use_dora=True)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), config)
        for module in model.modules():
            if hasattr(module, "lora_B"):
                torch.nn.init.normal_(module.lora_B["default"].weight, std=0.5)
        model.save_pretrained(out / f"dora-{step}")
        adapters[f"global_step_{step}"] = out / f"dora-{step}"
    return adapters


@pytest.mark.parametrize("kind", ["lora", "dora"])
def test_mixed_adapter_answers_equal_each_checkpoint_loaded_alone(
    trl_run_dir: Path, tiny_qwen3, tmp_path: Path, kind: str
) -> None:
    """One batch for every model (PEFT's mixed-adapter batch; DoRA, which PEFT refuses there, each model
    on its own) answers as each checkpoint loaded alone."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from hubkit.evaluate import backend_transformers

    base_dir = Path(tiny_qwen3.local_dir)
    adapters = {f"global_step_{s}": trl_run_dir / "checkpoints" / f"checkpoint-{s}" for s in (1, 2, 3)}
    tokenizer = load_tokenizer(adapters["global_step_3"])
    prompts = render_prompts(
        adapters["global_step_3"], [r["question"] for r in _rows(HELDOUT)[:2]], "Be brief."
    )
    if kind == "dora":
        adapters = _dora_adapters(base_dir, tmp_path, (1, 3))
    stop_ids = stop_token_ids(base_dir, tokenizer)
    job = GenerationJob(
        base_dir=base_dir,
        models=("base", *adapters),
        adapters=tuple(adapters.items()),
        prompts=prompts,
        settings=GenerationSettings(max_new_tokens=8, batch_size=2),
        stop_ids=stop_ids,
        pad_id=tokenizer.pad_token_id,
    )
    # float64: greedy tokens cannot flip on the last bits of a different summation order.
    model = backend_transformers.load_model(base_dir, adapters, device="cpu", dtype=torch.float64)
    mixed = backend_transformers.generate(model, job)

    def alone(adapter_dir: Path | None) -> list[list[int]]:
        single = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float64)
        if adapter_dir is not None:
            single = PeftModel.from_pretrained(single, adapter_dir)
        single.eval()
        answers = []
        for prompt in prompts:  # one prompt at a time: no padding at all
            with torch.inference_mode():
                out = single.generate(
                    torch.tensor([prompt]), max_new_tokens=8, do_sample=False, eos_token_id=list(stop_ids)
                )
            answers.append(out[0, len(prompt) :].tolist())
        return answers

    def cut(ids: list[int]) -> list[int]:
        completion = completion_from_ids(ids, tokenizer, stop_ids=stop_ids, max_new_tokens=8)
        return ids[: completion.tokens]

    for name in job.models:
        reference = alone(adapters.get(name))
        assert [cut(ids) for ids in mixed[name]] == [cut(ids) for ids in reference], name
    assert mixed["base"] != mixed["global_step_3"] != mixed["global_step_1"]


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (
            {"init_lora_weights": "pissa"},
            "init_lora_weights='pissa' adapters apply to the base PEFT rebuilds",
        ),
        (
            {"init_lora_weights": "olora"},
            "init_lora_weights='olora' adapters apply to the base PEFT rebuilds",
        ),
        ({"use_dora": True}, "vLLM applies plain LoRA only, not DoRA"),
    ],
    ids=["pissa", "olora", "dora"],
)
def test_vllm_is_not_handed_an_adapter_it_would_apply_otherwise_than_peft(
    tiny_qwen3, tmp_path: Path, options: dict, refusal: str
) -> None:
    """vLLM adds s·B·A to the base it loads: a PiSSA/OLoRA adapter (trained on PEFT's residual of the base)
    would answer silently wrong there, and DoRA is not applied."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hubkit.evaluate.backend_vllm import max_lora_rank

    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], **options))
    model.save_pretrained(tmp_path / "global_step_1")
    with pytest.raises(EvalError, match=f"^global_step_1: {re.escape(refusal)}.*--backend transformers"):
        max_lora_rank([tmp_path / "global_step_1"])


def test_overlapping_problems_are_refused_and_held_out_ones_checked(
    trl_run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _copy_run(trl_run_dir, tmp_path / "hashed-run")
    write_train_problem_hashes(run_dir, [r["question"] for r in _rows(TRAIN)])
    # Two training problems slipped into a benchmark, reformatted: other case, spacing and line breaks.
    train = _rows(TRAIN)
    mixed = [*_rows(HELDOUT)[:3], {**train[4], "question": train[4]["question"].upper()}]
    mixed.append({**train[0], "question": "  " + train[0]["question"].replace(" ", "\n  ")})
    problems = tmp_path / "benchmark.jsonl"
    problems.write_text("".join(json.dumps(r) + "\n" for r in mixed))
    common = ["eval", "--run-dir", str(run_dir), "--metric", "gsm8k_correctness", "--max-new-tokens", "4"]

    assert run_cli([*common, "--problems", str(problems)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, "one line"
    assert err.startswith("Error: 2 of 5 problems in benchmark.jsonl are training problems of run hashed-run")
    assert "(problem index 3, 4; first: 'sara has 1,200 stickers and puts them" in err
    assert "evaluate on held-out problems" in err
    assert not (run_dir / "eval").exists()

    assert run_cli([*common, "--problems", str(HELDOUT), "--n", "2", "--steps", "3", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    results = load_eval(run_dir)
    assert results is not None
    assert results.summary.problems.contamination == Contamination(checked=True, overlap=0, train_problems=13)
    assert results.summary.problems.source == "gsm8k_heldout.jsonl" and results.summary.problems.split is None
    assert [m.name for m in results.summary.models] == ["base", "global_step_3"]


def test_a_run_without_a_metric_or_default_problems_says_what_to_pass(
    trl_run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["eval", "--run-dir", str(trl_run_dir)]) == 1
    assert "records no reward spec: pass --metric gsm8k_correctness or --metric math_correctness" in (
        capsys.readouterr().err
    )
    math_run = _copy_run(trl_run_dir, tmp_path / "math-run", reward=deepscaler_length_penalty())
    assert run_cli(["eval", "--run-dir", str(math_run)]) == 1
    assert "no default held-out set: pass --problems" in capsys.readouterr().err
    assert run_cli(["eval", "--run-dir", str(math_run), "--problems", str(HELDOUT), "--steps", "7"]) == 1
    assert "no complete checkpoint at step(s) 7 (complete: 1, 2, 3): fix --steps" in capsys.readouterr().err


@pytest.mark.verl
def test_eval_reads_verl_checkpoints_through_the_normalized_adapters(
    verl_run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = copy_verl_run(verl_run_dir, tmp_path / "verl-run")
    # Rows 2 and 4 of the sample: problems the recipe's difficulty filter left out of training.
    rows = (DATA / "deepscaler_mini.jsonl").read_text().splitlines()
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text(f"{rows[2]}\n{rows[4]}\n")
    argv = ["eval", "--run-dir", str(run_dir), "--metric", "math_correctness", "--max-new-tokens", "4"]
    assert run_cli([*argv, "--problems", str(heldout)]) == 0
    assert "without an answer skipped" not in capsys.readouterr().out
    results = load_eval(run_dir)
    assert results is not None
    assert [m.name for m in results.summary.models] == ["base", "global_step_1", "global_step_2"]
    assert results.summary.metric.name == "math_correctness"
    template = run_dir / "global_step_2" / "actor" / "huggingface" / "chat_template.jinja"
    assert results.summary.generation.chat_template == template.read_text()
    assert [s.reference for s in results.samples_of(2)] == ["(-3, 3)", "8"]


# --- metric, problems, hashes ------------------------------------------------------------------------


def test_metric_comes_from_the_reward_spec_and_scores_through_hubkit_rewards() -> None:
    math = metric_for(deepscaler_length_penalty())
    assert math.name == "math_correctness" and math.default_problems is None
    with math.scorer(num_workers=1) as score:
        verdicts = score(
            ["so \\boxed{0.75}", "\\boxed{\\frac{6}{8}}", "\\boxed{3/5}", "no box: 3/4"], ["\\frac{3}{4}"] * 4
        )
    assert verdicts == [True, True, False, False]

    seed = metric_for(gsm8k_seed())
    assert seed.name == "gsm8k_correctness" and seed.default_problems.dataset == "openai/gsm8k"
    with seed.scorer() as score:
        verdicts = score(
            ["<answer>\n1,200\n</answer>", "<answer>1199</answer>", "1200"], ["#### 1,200", "1200", "1200"]
        )
    assert verdicts == [True, False, False]
    assert [seed.reference(a) for a in ("x\n#### 1,200", "#### -5", "#### 2.5")] == ["1200", "-5", "2.5"]
    assert metric_for(None, "math_correctness").name == "math_correctness"
    with pytest.raises(EvalError, match="--metric must be one of"):
        metric_for(gsm8k_seed(), "exact_match")


def test_problem_files_in_every_supported_shape(tmp_path: Path) -> None:
    import pandas as pd

    jsonl = load_local_problems(HELDOUT, limit=3)
    assert jsonl.source == "gsm8k_heldout.jsonl" and len(jsonl.problems) == 3
    array = tmp_path / "heldout.json"
    array.write_text(json.dumps(_rows(HELDOUT)))
    assert load_local_problems(array, limit=3).problems == jsonl.problems
    assert load_local_problems(array, limit=3).sha256 == jsonl.sha256
    assert load_local_problems(array).sha256 != jsonl.sha256

    # DeepScaleR rows (problem/answer; one without an answer is skipped) and verl's RL parquet.
    deepscaler = load_local_problems(DATA / "deepscaler_mini.jsonl")
    assert len(deepscaler.problems) == 11 and deepscaler.skipped == 1
    assert deepscaler.problems[1].answer == "\\frac{3}{4}"
    verl_rows = pd.DataFrame(
        {
            "prompt": [[{"role": "system", "content": "s"}, {"role": "user", "content": "What is 2+2?"}]],
            "reward_model": [{"style": "rule", "ground_truth": "4"}],
        }
    )
    verl_rows.to_parquet(tmp_path / "train.parquet")
    (problem,) = load_local_problems(tmp_path / "train.parquet").problems
    assert (problem.question, problem.answer) == ("What is 2+2?", "4")

    (tmp_path / "bad.jsonl").write_text('{"text": "no question"}\n')
    with pytest.raises(EvalError, match="a row has no question"):
        load_local_problems(tmp_path / "bad.jsonl")
    with pytest.raises(EvalError, match=r"must end in \.jsonl, \.json, \.parquet"):
        load_local_problems(DATA / "deepscaler_mini_difficulty.csv")


def test_training_problem_hashes_match_reformatted_copies(tmp_path: Path) -> None:
    path = write_train_problem_hashes(tmp_path, ["What is 2 + 2?", "What is 2 + 2?", "Name a prime."])
    assert path.read_text().splitlines() == sorted(
        {problem_hash("What is 2 + 2?"), problem_hash("Name a prime.")}
    )
    assert problem_hash("WHAT  is\n2 + 2?  ") == problem_hash("What is 2 + 2?")
    assert problem_hash("What is ２ + ２?") == problem_hash("What is 2 + 2?")  # full-width digits (NFKC)
    assert problem_hash("What is 2 + 3?") != problem_hash("What is 2 + 2?")
    assert read_train_problem_hashes(tmp_path / "nothing-here") is None

    problems = load_local_problems(HELDOUT)
    assert check_contamination(problems, read_train_problem_hashes(tmp_path), run_id="r").overlapping == ()
    write_train_problem_hashes(tmp_path, [problems.problems[5].question])
    with pytest.raises(ContaminationError, match=r"^1 of 6 problems in gsm8k_heldout.jsonl .*index 5;"):
        check_contamination(problems, read_train_problem_hashes(tmp_path), run_id="r")
    (tmp_path / TRAIN_PROBLEM_HASHES_NAME).write_text("not-a-digest\n")
    with pytest.raises(EvalError, match="not sha256 hex digests"):
        read_train_problem_hashes(tmp_path)


# --- results files -----------------------------------------------------------------------------------


def _sample(step: int | None, index: int, correct: bool, tokens: int) -> Sample:
    name = "base" if step is None else f"global_step_{step}"
    return Sample(
        name, step, index, f"problem {index}", "1", f"answer {index}", correct, tokens, tokens >= 100
    )


def test_results_round_trip_and_pick_the_best_checkpoint(tmp_path: Path) -> None:
    verdicts = {
        None: [True, False, False, False],
        10: [True, True, True, False],
        20: [True, True, False, True],
    }
    lengths = {None: [100, 90, 80, 70], 10: [60, 50, 40, 30], 20: [20, 30, 40, 100]}
    samples = [_sample(s, i, verdicts[s][i], lengths[s][i]) for s in verdicts for i in range(4)]
    summary = eval_summary("run", samples, generation={"max_new_tokens": 100})
    assert load_eval(tmp_path) is None
    save_eval(tmp_path, summary, samples)
    results = load_eval(tmp_path)
    assert results is not None and results.summary == summary and list(results.samples) == samples

    # Steps 10 and 20 tie at 3/4; step 10's answers are shorter on average (45 vs 47.5 tokens).
    assert results.best().name == "global_step_10" and results.by_step(20).tokens_mean == 47.5
    assert results.by_step(None).truncated_share == 0.25 and results.by_step(20).tokens_median == 35.0
    with pytest.raises(KeyError):
        results.by_step(30)
    fixed, *rest = results.before_after(10)
    assert (fixed[0].correct, fixed[1].correct, fixed[1].problem_index) == (False, True, 1)
    assert [pair[1].problem_index for pair in rest] == [2, 0, 3]  # fixed first, then most tokens saved

    raw = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert list(raw) == [
        "schema_version",
        "run_id",
        "created_at",
        "metric",
        "problems",
        "generation",
        "models",
    ]
    assert raw["models"][1]["ci95"] == list(summary.models[1].ci95)
    raw["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "eval" / "results.json").write_text(json.dumps(raw))
    with pytest.raises(EvalError, match="newer than this hubkit"):
        load_eval(tmp_path)


def test_wilson_interval_matches_its_closed_forms() -> None:
    z2 = 1.959963984540054**2
    # 0 of n: (0, z²/(n+z²)); n of n: (n/(n+z²), 1).
    assert wilson_interval(0, 4) == pytest.approx((0.0, z2 / (4 + z2)))
    assert wilson_interval(4, 4) == pytest.approx((4 / (4 + z2), 1.0))
    low, high = wilson_interval(5, 10)  # symmetric about 1/2
    assert low == pytest.approx(1 - high) and (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


# --- vLLM in its own environment ----------------------------------------------------------------------


def _vllm_python() -> Path | None:
    configured = os.environ.get("HUBKIT_VLLM_PYTHON")
    candidate = Path(configured) if configured else REPO_ROOT / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.is_file() else None


@pytest.mark.slow
@pytest.mark.skipif(_vllm_python() is None, reason="no vLLM environment: run `make venv-vllm`")
def test_vllm_backend_answers_as_the_transformers_backend(tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from hubkit.demo.tiny import TINY_SIZES
    from hubkit.evaluate import backend_transformers, backend_vllm
    from tests.support.tiny import ENDOFTEXT_ID, IM_END_ID, copy_tokenizer

    # vLLM's CPU attention needs a head size of at least 32 (the tiny models use 16).
    base_dir = tmp_path / "tiny-qwen3-head32"
    config = Qwen3Config(
        **{**TINY_SIZES, "head_dim": 32},
        vocab_size=copy_tokenizer(base_dir),
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=ENDOFTEXT_ID,
    )
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(base_dir)
    adapters = {}
    for step in (10, 20):
        torch.manual_seed(step)
        model = get_peft_model(
            Qwen3ForCausalLM.from_pretrained(base_dir),
            LoraConfig(
                r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"], init_lora_weights=False
            ),
        )
        adapters[f"global_step_{step}"] = tmp_path / f"global_step_{step}"
        model.save_pretrained(adapters[f"global_step_{step}"])
    tokenizer = load_tokenizer(base_dir)
    job = GenerationJob(
        base_dir=base_dir,
        models=("base", *adapters),
        adapters=tuple(adapters.items()),
        prompts=render_prompts(base_dir, [r["question"] for r in _rows(HELDOUT)[:3]], None),
        settings=GenerationSettings(max_new_tokens=8, batch_size=2),
        stop_ids=stop_token_ids(base_dir, tokenizer),
        pad_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    done: list[int] = []
    answers = backend_vllm.run(job, done.append, python=_vllm_python())
    expected = backend_transformers.run(job, device="cpu")
    assert sum(done) == job.total

    def cut(ids: list[int]) -> list[int]:
        return ids[: completion_from_ids(ids, tokenizer, stop_ids=job.stop_ids, max_new_tokens=8).tokens]

    for name in job.models:
        assert [cut(ids) for ids in answers[name]] == [cut(ids) for ids in expected[name]], name


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "did not render",
        ),
        ("{% set x = 'a' * 100000000 %}{% for i in range(1000) %}{{ x }}{% endfor %}", "render"),
        ("{{ raise_exception('no system prompt') }}", "no system prompt"),
    ],
    ids=["loops", "builds", "raises"],
)
def test_a_chat_template_that_loops_or_grows_is_stopped_in_one_line(
    template: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hubkit.evaluate import chat
    from tests.support.tiny import copy_tokenizer

    copy_tokenizer(tmp_path, chat_template=template)
    monkeypatch.setattr(chat, "RENDER_SECONDS", 5.0)
    with pytest.raises(EvalError) as error:
        render_prompts(tmp_path, ["What is 2 + 3?"], None)
    assert expected in str(error.value) and "\n" not in str(error.value)
