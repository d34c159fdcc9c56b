"""`hubkit eval`: accuracy and answer length of the base model and every chosen checkpoint, on held-out problems.

Modules, one job each:

- `problems`: problem sets (local files, Hub datasets), and the contamination check against the
  training-problem hashes the run records (`hubkit.runs.problem_hashes`).
- `metric`: the run's own correctness reward (`hubkit.rewards`) as a 0/1 verdict (or `--metric`'s, said so).
- `models`: the chosen checkpoints' adapter folders and the run's tokenizer.
- `release`: a published release made ready to evaluate as a run (`hubkit eval --repo-id`).
- `chat`: prompts through the run's chat template; generated ids back into answers (both backends).
- `generation`: what a backend is given (`GenerationJob`) and returns.
- `backend_transformers`: the base loaded once, every checkpoint a named PEFT adapter, mixed-adapter batches.
- `backend_vllm` / `vllm_worker`: vLLM in its own environment, one LoRA request per checkpoint.
- `evaluation`: the order: `plan_eval` (checks, including contamination) → `execute_eval`.

What an evaluation stores and reads back (``eval/``), the answer length and the training-problem hashes are
the run's contract, read by the push, the cards and the Space too: they live in `hubkit.runs`
(`eval_results`, `answer_length`, `problem_hashes`)::

    from hubkit.runs.eval_results import load_eval
    results = load_eval(run_dir)          # None when the run has not been evaluated
    best = results.best()                 # the checkpoint to use

Importing this package and `problems` needs only the standard library.
"""
