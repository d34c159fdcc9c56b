"""`make demo`: the publishing story on a local Hub, no account or network needed.

    $ python -m hubkit.demo [--root demo-hub]

It starts the local Hub (repos under ./demo-hub), builds the tiny Qwen3 and publishes it as the
base-model repo, trains three GRPO steps on it with the TRL recipe's `--tiny` mode (CPU, about a
minute), publishes the run with `hubkit push` (every checkpoint, the final adapter at the root, the
merged model), and loads a checkpoint back with PEFT. Each part of the story is a step, a function of
`DemoContext`; extend the demo by adding to `STEPS`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub

if TYPE_CHECKING:
    from huggingface_hub import HfApi

DEFAULT_ROOT = Path("demo-hub")
BASE_REPO_ID = "demo/tiny-qwen3"
RUN_REPO_ID = "demo/tiny-qwen3-grpo-gsm8k"
RUN_ID = "demo_tiny_gsm8k_grpo"
# The recipe and its small problem file live in the source checkout beside the package (`make demo`).
CHECKOUT = Path(__file__).resolve().parents[1]
TRL_RECIPE = CHECKOUT / "recipes" / "trl_gsm8k" / "train.py"
PROBLEMS_FILE = CHECKOUT / "tests" / "data" / "gsm8k_mini.jsonl"


@dataclass
class DemoContext:
    """What the steps share: the running Hub, a client bound to it, scratch space, and where to report."""

    hub: LocalHub
    api: HfApi
    workdir: Path
    say: Callable[[str], None]
    published: dict[str, str] = field(default_factory=dict)  # role -> repo id, filled in by the steps
    run_dir: Path | None = None  # the training run, once a step has made one


def publish_base_model(ctx: DemoContext) -> None:
    """Build the tiny Qwen3 and publish it as the base-model repo (a no-op commit if it is already there)."""
    from hubkit.tiny import build_tiny_qwen3, publish_model

    local_dir = build_tiny_qwen3(ctx.workdir / "tiny-qwen3")
    publish_model(ctx.api, local_dir, BASE_REPO_ID)
    files = sorted(ctx.api.list_repo_files(BASE_REPO_ID))
    ctx.published["base"] = BASE_REPO_ID
    ctx.say(f"Published base model {BASE_REPO_ID} ({len(files)} files: {', '.join(files)})")


def train_tiny_run(ctx: DemoContext) -> None:
    """Train three GRPO steps on the tiny base with the TRL recipe (`--tiny`: CPU, no vLLM, a checkpoint a step)."""
    if not TRL_RECIPE.is_file():
        raise click.ClickException(
            "the training recipes are part of the source checkout: run the demo from it"
        )
    runs_dir = ctx.workdir / "runs"
    ctx.say(f"Training 3 GRPO steps on {BASE_REPO_ID} with recipes/trl_gsm8k/train.py --tiny ...")
    command = [sys.executable, str(TRL_RECIPE), "--tiny", "--model", BASE_REPO_ID]
    command += ["--problems-file", str(PROBLEMS_FILE), "--runs-dir", str(runs_dir), "--run-id", RUN_ID]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise click.ClickException(f"the tiny training run failed:\n{result.stderr[-2000:]}")
    ctx.run_dir = runs_dir / RUN_ID
    checkpoints = sorted(p.name for p in ctx.run_dir.rglob("checkpoint-*") if p.is_dir())
    ctx.say(f"Run {RUN_ID}: {', '.join(checkpoints)}")


def push_run(ctx: DemoContext) -> None:
    """Publish the run: `hubkit push`, the main job, with its defaults (adapter repo + merged repo)."""
    from hubkit.cli import main as hubkit_main

    ctx.say(f"hubkit push --run-id {RUN_ID} --repo-id {RUN_REPO_ID}")
    hubkit_main(
        ["push", "--run-dir", str(ctx.run_dir), "--repo-id", RUN_REPO_ID, "--endpoint", ctx.hub.endpoint]
    )
    ctx.published["adapters"] = RUN_REPO_ID
    ctx.published["merged"] = f"{RUN_REPO_ID}-merged"
    for repo_id in (RUN_REPO_ID, f"{RUN_REPO_ID}-merged"):
        files = sorted(ctx.api.list_repo_files(repo_id))
        ctx.say(f"  {repo_id}: {len(files)} files, e.g. {', '.join(files[:6])}")


def load_checkpoint_back(ctx: DemoContext) -> None:
    """Load a published checkpoint exactly as a user would, and show that it changed the base model."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    subfolder = "checkpoints/global_step_2"
    tokenizer = AutoTokenizer.from_pretrained(BASE_REPO_ID)
    input_ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        base_logits = AutoModelForCausalLM.from_pretrained(BASE_REPO_ID)(input_ids).logits
        model = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(BASE_REPO_ID), RUN_REPO_ID, subfolder=subfolder
        )
        tuned_logits = model(input_ids).logits
    change = (tuned_logits - base_logits).abs().max().item()
    ctx.say(
        f"PeftModel.from_pretrained(base, {RUN_REPO_ID!r}, subfolder={subfolder!r}) loads; "
        f"largest logit change against the base: {change:.2e}"
    )


STEPS: list[Callable[[DemoContext], None]] = [
    publish_base_model,
    train_tiny_run,
    push_run,
    load_checkpoint_back,
]


def run_demo(
    root: Path, say: Callable[[str], None], steps: list[Callable[[DemoContext], None]] | None = None
) -> dict[str, str]:
    """Start a local Hub on `root`, run the demo steps against it, stop it.

    Args:
        root: the Hub's storage directory (kept, so a second run finds the same repos).
        say: where progress lines go.
        steps: the steps to run (default: `STEPS`).

    Returns:
        The published repo ids by role.
    """
    with LocalHub(root) as hub, tempfile.TemporaryDirectory(prefix="hubkit-demo-") as scratch:
        say(f"Local Hub at {hub.endpoint} (repos under {root}/repos)")
        use_local_hub(hub.endpoint, str(Path(scratch) / "hf_home"))
        from huggingface_hub import HfApi  # after use_local_hub: the client reads its settings on import

        ctx = DemoContext(hub, HfApi(endpoint=hub.endpoint), Path(scratch), say)
        for step in steps if steps is not None else STEPS:
            step(ctx)
    return ctx.published


@click.command()
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_ROOT, show_default=True
)
def main(root: Path) -> None:
    """Run the demo and explain how to use what it published."""
    published = run_demo(root, click.echo)
    click.echo(
        "\nThe Hub has stopped; its repos stay in place. To use what was published:\n"
        f"  hubkit hub serve --root {root}        # prints ENDPOINT\n"
        "  export HF_ENDPOINT=ENDPOINT HF_HUB_DISABLE_XET=1\n"
        '  python -c "from transformers import AutoModelForCausalLM; from peft import PeftModel; '
        f"base = AutoModelForCausalLM.from_pretrained('{published['base']}'); "
        f"print(PeftModel.from_pretrained(base, '{published.get('adapters', '')}', "
        "subfolder='checkpoints/global_step_3'))\"\n"
        f'  python -c "from transformers import AutoModelForCausalLM; '
        f"print(AutoModelForCausalLM.from_pretrained('{published.get('merged', '')}'))\""
    )


if __name__ == "__main__":
    main()
