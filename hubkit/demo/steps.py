"""The demo's steps, in order; each is a function of `DemoContext` that says what it did, one line at a time.

`run_demo` starts the local Hub, points the clients at it, quiets the libraries and runs `STEPS`;
extend the demo by adding a step. The steps use hubkit's own library calls, as a user's script would:
the TRL recipe's `train`, `hubkit.evaluate`, `hubkit.publish.push_run` and `hubkit.space`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hubkit.demo import base_model, problems
from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.runs import Run
    from hubkit.runs.eval_results import EvalResults, Sample

BASE_REPO_ID = "demo/tiny-qwen3"
RUN_REPO_ID = "demo/tiny-qwen3-grpo-arithmetic"
RUN_ID = "demo_tiny_qwen3_grpo_arithmetic"
SEED = 0  # the base model's weights and warm-up (the run keeps the recipe's seed)
GRPO_STEPS = 60
SAVE_STEPS = 10
PROBLEMS_PER_STEP = 2
ANSWERS_PER_PROBLEM = 16
MAX_ANSWER_TOKENS = 32  # the formatted answers are about 22 tokens
LEARNING_RATE = 2e-3
SPACE_PORT = 7860
REWARD_NAMES = {  # the run's reward components, as the per-step lines name them
    "gsm8k_correctness": "correct",
    "gsm8k_strict_format": "strict",
    "gsm8k_soft_format": "soft",
    "gsm8k_number_only": "number",
}


@dataclass
class DemoContext:
    """What the steps share: the running Hub, a client bound to it, scratch space, where to report, and
    what earlier steps made."""

    hub: LocalHub
    api: HfApi
    workdir: Path
    say: Callable[[str], None]
    published: dict[str, str] = field(default_factory=dict)  # role -> repo id
    run_dir: Path | None = None
    eval: EvalResults | None = None
    heldout_rewards: dict[str, float] = field(default_factory=dict)  # model name (`base`, `global_step_N`)
    started: float = field(default_factory=time.monotonic)


def quiet_libraries() -> None:
    """No progress bars, warnings or info logs from the libraries: the demo says what happens itself.

    The environment variables reach the Space's app too, which runs in a process of its own.
    """
    os.environ.update(
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONWARNINGS="ignore",
        TOKENIZERS_PARALLELISM="false",  # no notice when the Space's process is forked
    )
    warnings.filterwarnings("ignore")
    for name in ("huggingface_hub", "transformers", "datasets", "peft", "trl", "accelerate"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import datasets
    import torch
    import transformers
    from huggingface_hub.utils import disable_progress_bars
    from huggingface_hub.utils import logging as hub_logging

    disable_progress_bars()
    hub_logging.set_verbosity_error()  # e.g. "No files have been modified" when the base is already there
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    # The model is tiny: a second thread only adds waiting, and on a busy machine much of it.
    torch.set_num_threads(1)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


# --- the steps ------------------------------------------------------------------------------------


def publish_base_model(ctx: DemoContext) -> None:
    """Build the base model (tokenizer, weights, warm-up; see `base_model`) and publish it."""
    warmup = problems.load("warmup")
    ctx.say(
        f"Base model: a tiny Qwen3 from config, Qwen3's tokenizer retrained on the problems; warm-up on "
        f"{_count(len(warmup), 'problem')}, {base_model.FORMAT_SHARE:.0%} of the answers in the run's format"
    )
    local_dir = base_model.build_base_model(
        ctx.workdir / "base",
        warmup,
        seed=SEED,
        progress=lambda step, loss: ctx.say(
            f"  warm-up step {step}/{base_model.WARMUP_STEPS}: loss {loss:.3f}"
        ),
    )
    ctx.api.create_repo(BASE_REPO_ID, exist_ok=True)
    ctx.api.upload_folder(repo_id=BASE_REPO_ID, folder_path=local_dir, commit_message="Add tiny base model")
    ctx.published["base"] = BASE_REPO_ID
    files = sorted(ctx.api.list_repo_files(BASE_REPO_ID))
    ctx.say(f"Published {BASE_REPO_ID}: {', '.join(files)}")


def load_recipe() -> ModuleType:
    """The TRL recipe's `train.py` (shipped with hubkit) as a module.

    Raises:
        ImportError: the recipe is not where `hubkit.resources.recipe_dir` says.
    """
    from hubkit.resources import recipe_dir

    path = recipe_dir("trl_gsm8k") / "train.py"
    spec = importlib.util.spec_from_file_location("hubkit_trl_gsm8k_recipe", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the TRL recipe from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def train_run(ctx: DemoContext) -> None:
    """GRPO with LoRA on the train problems: the TRL recipe's `--tiny` settings, longer and on real rewards."""
    recipe = load_recipe()
    config = replace(
        recipe.tiny_config(BASE_REPO_ID, GRPO_STEPS),
        signal_reward=False,  # the base answers in the format now and then: the real rewards vary
        prompts_per_step=PROBLEMS_PER_STEP,
        num_generations=ANSWERS_PER_PROBLEM,
        max_completion_length=MAX_ANSWER_TOKENS,
        save_steps=SAVE_STEPS,
        learning_rate=LEARNING_RATE,
    )
    ctx.say(
        f"Training: TRL GRPO with LoRA (the recipe's --tiny mode), {GRPO_STEPS} steps of "
        f"{PROBLEMS_PER_STEP} problems x {ANSWERS_PER_PROBLEM} answers, the seed's four GSM8K rewards "
        f"(correct 2, strict format 0.5, soft format 0.5, number only 0.5), a checkpoint every {SAVE_STEPS} steps"
    )

    def report(step: int, logs: dict[str, float]) -> None:
        if "reward" not in logs:
            return  # the end-of-training summary
        parts = " ".join(
            f"{short} {logs.get(f'rewards/{name}/mean', 0.0):.2f}" for name, short in REWARD_NAMES.items()
        )
        ctx.say(
            f"  step {step:>2}/{GRPO_STEPS}: reward {logs['reward']:.2f} ({parts}), "
            f"{logs.get('completions/mean_length', 0.0):.1f} tokens"
        )

    ctx.run_dir = ctx.workdir / "runs" / RUN_ID
    recipe.train(config, ctx.run_dir, problems.path("train"), on_log=report)
    checkpoints = sorted(
        (p for p in ctx.run_dir.glob("checkpoint-*")), key=lambda p: int(p.name.split("-")[1])
    )
    ctx.say(f"Run {RUN_ID}: {', '.join(p.name for p in checkpoints)}")


def _run(ctx: DemoContext) -> Run:
    from hubkit.runs import load_run

    assert ctx.run_dir is not None, "train_run comes first"
    return load_run(ctx.run_dir)


def heldout_rewards(results: EvalResults, run: Run) -> dict[str, float]:
    """Each model's (``base``, ``global_step_N``) mean reward over the evaluated problems, by the run's own
    reward spec (all its components and weights, as its manifest records them), from the answers `hubkit
    eval` saved."""
    from hubkit.rewards.build import RewardInputs, build

    assert run.manifest.reward is not None, "the recipe records its reward"
    by_model: dict[str, list[Sample]] = {}
    for sample in results.samples:
        by_model.setdefault(sample.model, []).append(sample)
    means = {}
    with build(run.manifest.reward) as reward:
        for name, samples in by_model.items():
            inputs = RewardInputs(
                completions=[s.answer for s in samples],
                ground_truths=[s.reference for s in samples],
                num_tokens=[s.tokens for s in samples],
            )
            scores = reward.score(inputs)
            totals = [
                sum(c.weight * scores[c.name][i] for c in reward.components) for i in range(len(samples))
            ]
            means[name] = sum(totals) / len(totals)
    return means


def evaluate_run(ctx: DemoContext) -> None:
    """`hubkit eval` on the held-out problems: the base and every checkpoint, greedy, in one batched pass."""
    from hubkit.evaluate.evaluation import EvalRequest, execute_eval, plan_eval
    from hubkit.runs.eval_results import save_eval

    run = _run(ctx)
    heldout = problems.path("heldout")
    plan = plan_eval(run, EvalRequest(problems=str(heldout), n=problems.PARTS["heldout"], batch_size=16))
    ctx.say(
        f"hubkit eval: {', '.join(plan.models)} on the {len(plan.problems.problems)} held-out problems "
        f"(none among the run's {plan.contamination.train_problems} training problems), greedy, "
        f"up to {plan.settings.max_new_tokens} tokens"
    )
    ctx.eval = execute_eval(plan, endpoint=ctx.hub.endpoint, device="cpu")
    save_eval(run.run_dir, ctx.eval.summary, ctx.eval.samples)
    ctx.heldout_rewards = heldout_rewards(ctx.eval, run)
    for model in ctx.eval.summary.models:
        ctx.say(
            f"  {model.name:<15} accuracy {model.accuracy:6.1%}, mean reward "
            f"{ctx.heldout_rewards[model.name]:.2f}, {model.tokens_mean:.1f} tokens"
        )


def push_release(ctx: DemoContext) -> None:
    """`hubkit push`: every checkpoint, the final adapter at the root, the merged model, the cards with
    their curves and the eval, and the Space."""
    from hubkit.publish import PushRequest, push_run
    from hubkit.publish.describe import describe_repo

    ctx.say(f"hubkit push --run-id {RUN_ID} --repo-id {RUN_REPO_ID}")
    assert ctx.run_dir is not None, "train_run comes first"
    report = push_run(PushRequest(run_dir=ctx.run_dir, repo_id=RUN_REPO_ID, endpoint=ctx.hub.endpoint))
    for note in report.notes:
        ctx.say(f"  {note}")
    for repo in report.repos:
        ctx.say(f"  {describe_repo(repo)}")
        if repo.repo_type == "space":
            ctx.published["space"] = repo.repo_id
        else:
            ctx.published["adapters" if repo.repo_id == report.repo_id else "merged"] = repo.repo_id


def _generate(model: Any, tokenizer: Any, question: str) -> str:
    import torch

    input_ids = tokenizer.apply_chat_template(
        base_model.chat(question), add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    with torch.no_grad():
        output = model.generate(input_ids=input_ids, max_new_tokens=MAX_ANSWER_TOKENS, do_sample=False)
    return tokenizer.decode(output[0, input_ids.shape[1] :], skip_special_tokens=True).strip()


def _last_step(ctx: DemoContext) -> int:
    return max(c.step for c in _run(ctx).checkpoints)


def compare_side_by_side(ctx: DemoContext) -> None:
    """Load the last checkpoint back from the Hub as a user would, and answer a held-out problem with the
    base model and with it."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    last = _last_step(ctx)
    subfolder = f"checkpoints/global_step_{last}"
    tokenizer = AutoTokenizer.from_pretrained(BASE_REPO_ID)
    heldout = problems.load("heldout")
    assert ctx.eval is not None, "evaluate_run comes first"
    solved = [s.problem_index for s in ctx.eval.samples if s.step == last and s.correct]
    problem = heldout[solved[0] if solved else 0]
    base_answer = _generate(AutoModelForCausalLM.from_pretrained(BASE_REPO_ID), tokenizer, problem.question)
    tuned = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(BASE_REPO_ID), RUN_REPO_ID, subfolder=subfolder
    )
    tuned_answer = _generate(tuned, tokenizer, problem.question)
    which = "the first held-out problem it solves" if solved else "the first held-out problem"
    ctx.say(f"PeftModel.from_pretrained(base, {RUN_REPO_ID!r}, subfolder={subfolder!r}) on {which}:")
    ctx.say(f"  problem: {problem.question} (answer {problem.result})")
    for label, answer in (("base", base_answer), (subfolder.split("/")[-1], tuned_answer)):
        ctx.say(f"  {label}:")
        for line in answer.splitlines():
            ctx.say(f"    {line}")


def report_rewards(ctx: DemoContext) -> None:
    """The demo's result in one line: the held-out mean reward of the base and of the last checkpoint."""
    last = _last_step(ctx)
    base, tuned = ctx.heldout_rewards["base"], ctx.heldout_rewards[f"global_step_{last}"]
    ctx.say(
        f"Held-out mean reward ({problems.PARTS['heldout']} problems, the run's reward, greedy): "
        f"base {base:.2f}, last checkpoint (step {last}) {tuned:.2f}"
    )


def _free_port(preferred: int) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
        except OSError:
            sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_space(ctx: DemoContext) -> None:
    """Run the Space on 127.0.0.1 against the published repos until Ctrl-C (``DEMO_SPACE=0`` skips it)."""
    from hubkit.space.config import SpaceConfig
    from hubkit.space.serve import serve_locally

    if os.environ.get("DEMO_SPACE", "1") == "0":
        ctx.say("Space skipped (DEMO_SPACE=0)")
        return
    config = SpaceConfig.from_run(_run(ctx), RUN_REPO_ID, merged_repo_id=ctx.published.get("merged"))
    port = _free_port(SPACE_PORT)
    ctx.say(f"Space: http://127.0.0.1:{port}/ (Ctrl-C stops it and the Hub)")
    serve_locally(config, port=port, endpoint=ctx.hub.endpoint)


def explain_release(ctx: DemoContext) -> None:
    """How long it took, and how to use what was published."""
    minutes, seconds = divmod(round(time.monotonic() - ctx.started), 60)
    ctx.say(f"Done in {minutes} min {seconds} s. On the local Hub (kept under {ctx.hub.root}/repos):")
    adapters = ctx.published.get("adapters", RUN_REPO_ID)
    base = f"AutoModelForCausalLM.from_pretrained({BASE_REPO_ID!r})"
    ctx.say(
        f"  {adapters}: PeftModel.from_pretrained({base}, {adapters!r}, subfolder='checkpoints/global_step_N')"
    )
    if "merged" in ctx.published:
        ctx.say(
            f"  {ctx.published['merged']}: AutoModelForCausalLM.from_pretrained({ctx.published['merged']!r})"
        )
    if "space" in ctx.published:
        ctx.say(f"  {ctx.published['space']}: the Space (hubkit space --repo-id {adapters} runs it)")


STEPS: list[Callable[[DemoContext], None]] = [
    publish_base_model,
    train_run,
    evaluate_run,
    push_release,
    compare_side_by_side,
    report_rewards,
    explain_release,
    serve_space,
]


def run_demo(root: Path, say: Callable[[str], None]) -> None:
    """Start a local Hub on `root` (kept, so a second run finds the same repos), run `STEPS` against it
    with progress lines to `say`, stop it."""
    with LocalHub(root) as hub, tempfile.TemporaryDirectory(prefix="hubkit-demo-") as scratch:
        say(f"Local Hub at {hub.endpoint} (repos under {root}/repos)")
        os.environ.pop("HF_TOKEN", None)  # a token for another Hub is never sent to this one
        use_local_hub(hub.endpoint, str(Path(scratch) / "hf_home"))
        quiet_libraries()
        from huggingface_hub import HfApi  # after use_local_hub: the client reads its settings on import

        ctx = DemoContext(hub, HfApi(endpoint=hub.endpoint), Path(scratch), say)
        for step in STEPS:
            step(ctx)
