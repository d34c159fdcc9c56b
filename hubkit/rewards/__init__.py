"""Framework-free reward components and group aggregation, with a thin TRL integration (verl's is
`hubkit.integrations.verl_reward`).

Modules, one job each:

- `spec`: `RewardSpec`, the reward as data (stored in the run manifest), its formula and the seed presets.
- `components`: math correctness (last ``\\boxed{}`` vs gold, math-verify) and the token length penalty.
- `gsm8k`: the TRL seed run's four GSM8K rewards.
- `aggregate`: rewards → advantages within each group (``sum_then_normalize``, ``normalize_then_sum``).
- `build`: `build(spec)` → the callables of a spec.
- `verify` / `verify_worker`: the math-verify process pool that cannot stall the caller.
- `trl`: TRL ``GRPOTrainer`` integration (imports trl and torch).

Everything but `trl` needs only numpy (and math-verify, in the worker processes).
"""
