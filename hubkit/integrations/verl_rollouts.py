"""verl 0.6.1's rollout dump (``trainer.rollout_data_dir``: ``<dir>/<step>.jsonl``) kept to a bounded sample.

verl writes every rollout of every step: at the seed's size (128 prompts × 8 answers of up to 1,400 tokens)
that is some 10 MB a step, 5 GB over a run, of which `hubkit push` publishes the first
`hubkit.runs.completions.MAX_ROWS_PER_STEP` of each step (the samples dataset's ``rollouts``). `first_rows`
makes verl's dump keep those only, in the process that trains: verl samples a prompt's answers one after
another, so the first rows are whole groups. The file and its format are verl's.
"""

from __future__ import annotations

from typing import Any

from hubkit.runs.completions import MAX_ROWS_PER_STEP


def first_rows(rows: int = MAX_ROWS_PER_STEP) -> None:
    """Make verl's trainer in this process dump the first `rows` rollouts of each step, not all of them."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    dump = RayPPOTrainer._dump_generations
    if getattr(dump, "hubkit_rows", None) is not None:
        return  # installed already (the reward file is executed once per reward manager)

    def bounded(self: Any, inputs, outputs, gts, scores, reward_extra_infos_dict, dump_path) -> None:
        n = len(inputs)
        extra = {k: list(v)[:rows] if len(v) == n else v for k, v in reward_extra_infos_dict.items()}
        dump(self, inputs[:rows], outputs[:rows], gts[:rows], scores[:rows], extra, dump_path)

    bounded.hubkit_rows = rows  # type: ignore[attr-defined]
    RayPPOTrainer._dump_generations = bounded
