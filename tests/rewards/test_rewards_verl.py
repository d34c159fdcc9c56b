"""hubkit's verl reward manager and estimator, run by verl 0.6.1 in its own environment, against hubkit's core."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hubkit.rewards.build import aggregate_with_spec
from hubkit.rewards.spec import RewardSpec, deepscaler_length_penalty

REPO_ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = REPO_ROOT / ".venv-verl" / "bin" / "python"
SCRIPT = Path(__file__).resolve().parents[1] / "verl_scripts" / "rewards_check.py"
MAX_LEN = 64

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.skipif(not VERL_PYTHON.exists(), reason=".venv-verl does not exist: run `make venv-verl`"),
]

# Three groups of different sizes: "a" varies in correctness and length, "b" is a single rollout,
# "c" has two identical rollouts (zero variance).
ROLLOUTS = [
    {
        "uid": "a",
        "prompt": "What is 2+3?",
        "response": "It is \\boxed{5}.",
        "ground_truth": "5",
        "correct": 1,
    },
    {
        "uid": "a",
        "prompt": "What is 2+3?",
        "response": "Let me think about this at some length first. It is \\boxed{5}.",
        "ground_truth": "5",
        "correct": 1,
    },
    {"uid": "a", "prompt": "What is 2+3?", "response": "\\boxed{6}", "ground_truth": "5", "correct": 0},
    {
        "uid": "b",
        "prompt": "Half of one?",
        "response": "\\boxed{\\frac{1}{2}}",
        "ground_truth": "0.5",
        "correct": 1,
    },
    {
        "uid": "c",
        "prompt": "An interval",
        "response": "\\boxed{(1,2]}",
        "ground_truth": "(1,2]",
        "correct": 1,
    },
    {"uid": "a", "prompt": "What is 2+3?", "response": "No idea.", "ground_truth": "5", "correct": 0},
    {
        "uid": "c",
        "prompt": "An interval",
        "response": "\\boxed{(1,2]}",
        "ground_truth": "(1,2]",
        "correct": 1,
    },
]

SPECS = {
    "sum_then_normalize": deepscaler_length_penalty(lam=0.5, max_len=MAX_LEN),
    "normalize_then_sum_whitened": deepscaler_length_penalty(
        lam=0.5, max_len=MAX_LEN, aggregation="normalize_then_sum"
    ),
    "normalize_then_sum_plain": deepscaler_length_penalty(
        lam=0.5, max_len=MAX_LEN, aggregation="normalize_then_sum", batch_whiten=False
    ),
}


@pytest.fixture(scope="module")
def verl_results(tmp_path_factory, qwen3_tokenizer_dir) -> dict[str, dict]:
    """Run every case in one verl process (its imports take most of the time)."""
    rollouts = [{k: v for k, v in r.items() if k != "correct"} for r in ROLLOUTS]
    cases = [
        {"spec": spec.to_dict(), "rollouts": rollouts, "estimators": ["hubkit", "grpo"]}
        for spec in SPECS.values()
    ]
    cases.append({"spec": SPECS["sum_then_normalize"].to_dict(), "rollouts": rollouts, "validate": True})
    work = tmp_path_factory.mktemp("verl_rewards")
    (work / "request.json").write_text(json.dumps(cases))
    proc = subprocess.run(
        [
            str(VERL_PYTHON),
            str(SCRIPT),
            str(qwen3_tokenizer_dir),
            str(work / "request.json"),
            str(work / "out.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((work / "out.json").read_text())
    return dict(zip([*SPECS, "validate"], results["cases"], strict=True)) | {
        "spec_loading": results["spec_loading"]
    }


def _expected_tokens(tokenizer_dir: Path) -> list[int]:
    """Token counts from this environment's `tokenizers` (not verl's transformers 4), plus the EOS."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    return [len(tokenizer.encode(r["response"], add_special_tokens=False).ids) + 1 for r in ROLLOUTS]


def test_manager_scores_components_with_attention_mask_token_counts(verl_results, qwen3_tokenizer_dir):
    result = verl_results["sum_then_normalize"]
    assert result["manager_class"] == "HubkitRewardManager"
    tokens = _expected_tokens(qwen3_tokenizer_dir)
    extra = result["extra"]
    assert extra["num_tokens"] == tokens
    assert extra["math_correctness"] == [float(r["correct"]) for r in ROLLOUTS]
    assert extra["acc"] == extra["math_correctness"]
    assert extra["length_penalty"] == pytest.approx([-n / MAX_LEN for n in tokens])
    # The reward sits on each response's last token and is Σ wᵢ·rᵢ for sum_then_normalize.
    assert result["reward_positions"] == [n - 1 for n in tokens]
    raw = [c + 0.5 * lp for c, lp in zip(extra["math_correctness"], extra["length_penalty"], strict=True)]
    assert result["reward_tensor_sum"] == pytest.approx(raw, abs=1e-6)
    assert extra["raw_reward"] == pytest.approx(raw, abs=1e-6)


@pytest.mark.parametrize("case", list(SPECS))
def test_estimator_equals_hubkit_core(verl_results, case):
    spec: RewardSpec = SPECS[case]
    result = verl_results[case]
    scores = {name: result["extra"][name] for name in ("math_correctness", "length_penalty")}
    uids = [r["uid"] for r in ROLLOUTS]
    expected = aggregate_with_spec(spec, scores, uids)
    assert result["advantages"]["hubkit"] == pytest.approx(expected.advantages, abs=1e-5)
    assert result["advantages"]["hubkit"][3] == pytest.approx(0.0, abs=1e-6)  # the single-rollout group
    assert result["advantages"]["hubkit"][4] == result["advantages"]["hubkit"][6]
    if case == "sum_then_normalize":
        # verl's own GRPO agrees except on the single-rollout group, where it gives score / (1 + ε).
        grpo = result["advantages"]["grpo"]
        others = [i for i, u in enumerate(uids) if u != "b"]
        assert [grpo[i] for i in others] == pytest.approx([expected.advantages[i] for i in others], abs=1e-5)
        assert grpo[3] == pytest.approx(result["reward_tensor_sum"][3], rel=1e-5)


def test_validation_reports_the_raw_reward(verl_results):
    result = verl_results["validate"]
    assert result["reward_tensor_sum"] == pytest.approx(result["extra"]["raw_reward"], abs=1e-6)
    # Training of the same spec emits the same raw sum (normalization happens in the estimator) ...
    assert result["reward_tensor_sum"] == pytest.approx(
        verl_results["sum_then_normalize"]["reward_tensor_sum"]
    )
    # ... while normalize_then_sum emits Σ wᵢ·zᵢ during training, which is not the raw reward.
    gdpo = verl_results["normalize_then_sum_plain"]["reward_tensor_sum"]
    assert gdpo != pytest.approx(result["reward_tensor_sum"], abs=1e-3)


def test_reward_kwargs_give_the_spec_or_a_clear_error(verl_results):
    loading = verl_results["spec_loading"]
    expected = SPECS["sum_then_normalize"].to_dict()
    assert loading["from_manifest"] == expected  # spec_file=<run dir>/hubkit.json
    assert loading["from_json"] == expected
    assert loading["from_hydra"] == expected  # +reward_model.reward_kwargs.spec={...} arrives as a DictConfig
    errors = loading["errors"]
    assert "exactly one of" in errors["neither"] and "exactly one of" in errors["both"]
    assert "cannot read the reward spec file" in errors["missing_file"]
    assert "not valid JSON" in errors["bad_json"]
    assert "unknown reward component 'eval'" in errors["unknown_component"]


def test_the_recipes_rollout_dump_keeps_the_first_rows_of_each_step(tmp_path: Path) -> None:
    """What the reward file installs in verl's trainer: its dump of a step's rollouts (the recipe's
    rollouts/<step>.jsonl) keeps the first rows only, in verl's own format (verl's own writer, run in its
    environment)."""
    code = (
        "import sys, types\n"
        "from verl.trainer.ppo.ray_trainer import RayPPOTrainer\n"
        "from hubkit.integrations.verl_rollouts import first_rows\n"
        "first_rows(3)\n"
        "first_rows(3)\n"  # installed once, whatever the number of reward managers
        "RayPPOTrainer._dump_generations(types.SimpleNamespace(global_steps=7), [f'p{i}' for i in range(5)],"
        " [f'o{i}' for i in range(5)], ['g'] * 5, [0.5 * i for i in range(5)], {'acc': [1, 0, 1, 0, 1]},"
        " sys.argv[1])\n"
    )
    proc = subprocess.run(
        [str(VERL_PYTHON), "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "7.jsonl").read_text().splitlines()]
    assert [(r["input"], r["output"], r["score"], r["acc"], r["step"]) for r in rows] == [
        ("p0", "o0", 0.0, 1, 7),
        ("p1", "o1", 0.5, 0, 7),
        ("p2", "o2", 1.0, 1, 7),
    ]
