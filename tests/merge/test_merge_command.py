"""`hubkit merge`: one checkpoint of a real TRL run merged into its base, in a local folder."""

from __future__ import annotations

import torch
from helpers import chat_logits, run_cli
from peft import PeftModel
from transformers import AutoModelForCausalLM

from hubkit.runs import load_run


def test_merge_command_merges_the_final_checkpoint(trl_run_dir, tiny_qwen3, local_hub, tmp_path, capsys):
    out_dir = tmp_path / "merged"
    argv = ["merge", "--run-dir", str(trl_run_dir), "--out", str(out_dir), "--endpoint", local_hub.endpoint]
    assert run_cli(argv) == 0

    final = load_run(trl_run_dir).checkpoints[-1]
    assert (
        f"Merged step {final.step} of {trl_run_dir.name} into {tiny_qwen3.repo_id}: 14 modules"
        in capsys.readouterr().out
    )
    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir)
    plain = chat_logits(base)
    reference = chat_logits(PeftModel.from_pretrained(base, final.adapter_dir or final.path))
    merged = chat_logits(AutoModelForCausalLM.from_pretrained(out_dir))
    assert not torch.equal(plain, reference)  # the trained adapter changes the output
    torch.testing.assert_close(merged, reference, atol=1e-5, rtol=1e-4)
    assert not list(tmp_path.glob(".merged*"))  # no staging folder left behind


def test_merge_command_refuses_a_missing_step(trl_run_dir, local_hub, tmp_path, capsys):
    out_dir = tmp_path / "merged"
    argv = ["merge", "--run-dir", str(trl_run_dir), "--step", "99", "--out", str(out_dir)]
    assert run_cli([*argv, "--endpoint", local_hub.endpoint]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "no complete checkpoint at step(s) 99" in err
    assert err.rstrip().endswith("fix --step")  # the option this command has (push's is --steps)
    assert len(err.strip().splitlines()) == 1
    assert not out_dir.exists()
