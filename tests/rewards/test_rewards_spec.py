"""RewardSpec: validation, JSON round trip through the manifest, formula, presets, and build()."""

import json
import subprocess
import sys

import pytest

from hubkit.errors import RewardSpecError
from hubkit.rewards.build import RewardInputs, build
from hubkit.rewards.spec import RewardComponent, RewardSpec, deepscaler_length_penalty, gsm8k_seed
from hubkit.runs.manifest import Manifest


def test_presets_round_trip_through_the_manifest(tmp_path):
    for spec in (
        deepscaler_length_penalty(),
        deepscaler_length_penalty(aggregation="normalize_then_sum"),
        gsm8k_seed(),
    ):
        assert RewardSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
        Manifest(run_id="r1", framework="verl", base_model="Qwen/Qwen3-4B", reward=spec).save(tmp_path)
        assert Manifest.load(tmp_path).reward == spec


def test_formulas_name_the_mode_and_its_math():
    assert deepscaler_length_penalty().formula() == (
        "correctness + 0.5·(−tokens/15000), z-normalized within each group "
        "(sum_then_normalize; unbiased std, ε = 1e-06)"
    )
    assert deepscaler_length_penalty(lam=0.25, max_len=4096, aggregation="normalize_then_sum").formula() == (
        "z(correctness) + 0.25·z(−tokens/4096), each term z-normalized within its group, "
        "the sum then whitened over the batch (normalize_then_sum; unbiased std, ε = 1e-06)"
    )
    assert gsm8k_seed().formula().startswith("gsm8k_correctness + strict_format + soft_format + number_only,")
    negative = RewardSpec(components=(RewardComponent("gsm8k_correctness", -2.0),))
    assert negative.formula().startswith("−2·gsm8k_correctness,")


@pytest.mark.parametrize(
    ("component", "message"),
    [
        ({"name": "os.system"}, "unknown reward component"),
        ({"name": "length_penalty", "weight": 0.5}, "needs the parameter 'max_completion_length'"),
        ({"name": "length_penalty", "params": {"max_completion_length": 0}}, "integer from 1 to"),
        (
            {"name": "length_penalty", "params": {"max_completion_length": 10**12}},
            "integer from 1 to 1048576",
        ),
        (
            {"name": "length_penalty", "params": {"max_completion_length": 10, "code": "x"}},
            "not \\['code'\\]",
        ),
        ({"name": "math_correctness", "weight": float("nan")}, "finite number"),
        ({"name": "math_correctness", "params": {"timeout_s": 0.5}}, "integer from 1 to"),
    ],
)
def test_invalid_components_are_refused(component, message):
    with pytest.raises(RewardSpecError, match=message):
        RewardSpec.from_dict({"components": [component]})


def test_invalid_specs_are_refused():
    ok = {"name": "gsm8k_soft_format"}
    with pytest.raises(RewardSpecError, match="unique"):
        RewardSpec.from_dict({"components": [ok, ok]})
    with pytest.raises(RewardSpecError, match="batch_whiten applies"):
        RewardSpec.from_dict({"components": [ok], "batch_whiten": True})
    with pytest.raises(RewardSpecError, match="epsilon"):
        RewardSpec.from_dict({"components": [ok], "epsilon": -1})
    with pytest.raises(RewardSpecError, match="invalid reward spec"):
        RewardSpec.from_dict({"components": [ok], "code": "import os"})
    with pytest.raises(RewardSpecError, match="upgrade hubkit"):
        RewardSpec.from_dict({"components": [ok], "schema_version": 99})


def test_build_gsm8k_scores_and_aggregates():
    completion_ok = "<reasoning>\nfirst\nsecond\n</reasoning>\n<answer>\n72\n</answer>"
    inputs = RewardInputs(
        completions=[completion_ok, "72", completion_ok.replace("72", "71"), "<answer>72</answer>"],
        ground_truths=["#### 72"] * 4,
        num_tokens=[10, 2, 10, 5],
    )
    with build(gsm8k_seed()) as reward:
        assert [c.name for c in reward.components] == [
            "gsm8k_correctness",
            "gsm8k_strict_format",
            "gsm8k_soft_format",
            "gsm8k_number_only",
        ]
        scores = reward.score(inputs)
        assert scores == {
            "gsm8k_correctness": [2.0, 0.0, 0.0, 2.0],
            "gsm8k_strict_format": [0.5, 0.0, 0.5, 0.0],
            "gsm8k_soft_format": [0.5, 0.0, 0.5, 0.0],
            "gsm8k_number_only": [0.5, 0.0, 0.5, 0.5],
        }
        result = reward.aggregate(scores, ["p", "p", "q", "q"])
    # p: combined [3.5, 0] → ±(1.75/(2.474874+1e-4)); q: [1.5, 2.5] → ∓(0.5/(0.707107+1e-4))
    assert result.advantages == pytest.approx([0.707078, -0.707078, -0.707007, 0.707007], abs=1e-6)


def test_build_length_penalty_uses_token_counts():
    spec = RewardSpec(components=(RewardComponent("length_penalty", 0.5, {"max_completion_length": 100}),))
    with build(spec) as reward:
        scores = reward.score(RewardInputs(["a" * 500, "b"], ["1", "1"], [50, 100]))
    assert scores == {"length_penalty": [-0.5, -1.0]}  # tokens, not characters


def test_rewards_core_imports_no_framework_or_math_verify():
    # The core must load in verl's environment and in a Space: no torch, transformers, trl, verl, and
    # math-verify (sympy) only inside the worker processes.
    modules = ", ".join(
        f"hubkit.rewards.{m}" for m in ("spec", "aggregate", "components", "gsm8k", "verify", "build")
    )
    code = (
        f"import sys, {modules}\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'verl', 'math_verify', 'sympy') if m in sys.modules]\n"
        "sys.exit(f'imported {heavy}' if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
