"""`hubkit eval`: accuracy and answer length of the base model and every chosen checkpoint, on held-out problems.

Modules, one job each:

- `results`: what an evaluation stores (``eval/results.json``, ``eval/samples.jsonl``) and reading it back.
- `problems`: problem sets (local files, Hub datasets), the normalized-text hashes of training problems
  that both recipes record (``train_problems.sha256``), and the contamination check.
- `metric`: the run's own correctness reward (`hubkit.rewards`) as a 0/1 verdict (or `--metric`'s, said so).
- `length`: the answer length the run trained with, from what it recorded (TRL's training_args.bin read
  without running it).
- `models`: the chosen checkpoints' adapter folders and the run's tokenizer.
- `release`: a published release made ready to evaluate as a run (`hubkit eval --repo-id`).
- `chat`: prompts through the run's chat template; generated ids back into answers (both backends).
- `generation`: what a backend is given (`GenerationJob`) and returns.
- `backend_transformers`: the base loaded once, every checkpoint a named PEFT adapter, mixed-adapter batches.
- `backend_vllm` / `vllm_worker`: vLLM in its own environment, one LoRA request per checkpoint.
- `evaluation`: the order: `plan_eval` (checks, including contamination) → `execute_eval`.

Reading results (what the push and the cards use)::

    from hubkit.evaluate import TRAIN_PROBLEM_HASHES_NAME, load_eval
    results = load_eval(run_dir)          # None when the run has not been evaluated
    best = results.best()                 # the checkpoint to use
    pairs = results.before_after(best.step, limit=3)

Importing this package, `results` and `problems` needs only the standard library.
"""

from __future__ import annotations

from hubkit.evaluate.problems import TRAIN_PROBLEM_HASHES_NAME
from hubkit.evaluate.results import (
    EVAL_DIR,
    RESULTS_NAME,
    SAMPLES_NAME,
    EvalResults,
    EvalSummary,
    ModelResult,
    Sample,
    load_eval,
    save_eval,
)

__all__ = [
    "EVAL_DIR",
    "RESULTS_NAME",
    "SAMPLES_NAME",
    "TRAIN_PROBLEM_HASHES_NAME",
    "EvalResults",
    "EvalSummary",
    "ModelResult",
    "Sample",
    "load_eval",
    "save_eval",
]
