"""`hubkit merge`: one checkpoint of a real TRL run merged into its base, in a local folder."""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel
from synthetic_runs import qwen3_shapes
from transformers import AutoModelForCausalLM

from hubkit.cli import main
from hubkit.runs import load_run

# q_proj and v_proj of the tiny Qwen3 (hidden 64, 4 heads x 16, 2 KV heads x 16, 2 layers).
TINY_SHAPES = qwen3_shapes(hidden=64, q_out=64, v_out=32, layers=2)
INPUT_IDS = torch.tensor([[151644, 872, 198, 3838, 374, 220, 17, 10, 18, 30, 151645]])


def _cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
        raise SystemExit(0)
    return exited.value.code or 0


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(INPUT_IDS).logits


def test_merge_command_merges_the_final_checkpoint(trl_run_dir, tiny_qwen3, local_hub, tmp_path, capsys):
    out_dir = tmp_path / "merged"
    argv = ["merge", "--run-dir", str(trl_run_dir), "--out", str(out_dir), "--endpoint", local_hub.endpoint]
    assert _cli(argv) == 0

    final = load_run(trl_run_dir).checkpoints[-1]
    assert (
        f"Merged step {final.step} of {trl_run_dir.name} into {tiny_qwen3.repo_id}: 14 modules"
        in capsys.readouterr().out
    )
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    plain = _logits(base)
    reference = _logits(PeftModel.from_pretrained(base, final.adapter_dir or final.path))
    merged = _logits(AutoModelForCausalLM.from_pretrained(out_dir))
    assert not torch.equal(plain, reference)  # the trained adapter changes the output
    torch.testing.assert_close(merged, reference, atol=1e-5, rtol=1e-4)
    assert not list(tmp_path.glob(".merged*"))  # no staging folder left behind


def test_merge_command_refuses_a_missing_step(trl_run_dir, local_hub, tmp_path, capsys):
    out_dir = tmp_path / "merged"
    argv = ["merge", "--run-dir", str(trl_run_dir), "--step", "99", "--out", str(out_dir)]
    assert _cli([*argv, "--endpoint", local_hub.endpoint]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "no complete checkpoint at step(s) 99" in err
    assert len(err.strip().splitlines()) == 1
    assert not out_dir.exists()
