"""Where a release published by `hubkit push` keeps what, in its adapter repo:

hubkit.json, metrics.jsonl, train_problems.sha256, README.md, assets/*.png
runs/events.out.tfevents.hubkit                                          (the metrics, for the Hub's Training metrics tab)
adapter_model.safetensors, adapter_config.json, tokenizer files      (the newest step, at the root)
checkpoints/global_step_N/{adapter_model.safetensors, adapter_config.json}
eval/results.json, eval/samples.jsonl                                   (once evaluated)

and one branch per step, `step-N`, holding that step's adapter at its root (`revision_name`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hubkit.formats.peft import ADAPTER_FILES

CHECKPOINTS_DIR = "checkpoints"
REVISION_PREFIX = "step-"
METRICS_NAME = "metrics.jsonl"
# The metrics as a TensorBoard event file: a repo holding one gets the Hub's "Training metrics" tab (any file
# name holding "tfevents"; TensorBoard's and TRL's convention puts them under runs/).
TRAINING_EVENTS_NAME = "runs/events.out.tfevents.hubkit"
# What `AutoTokenizer.from_pretrained(repo_id)` reads; a release has them at its root when the run saved them.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
_STEP_WEIGHTS_RE = re.compile(rf"^{CHECKPOINTS_DIR}/global_step_([0-9]{{1,9}})/adapter_model\.safetensors$")


def checkpoint_dir(step: int) -> str:
    """The folder of a step's adapter in the repo: ``checkpoints/global_step_N``."""
    return f"{CHECKPOINTS_DIR}/global_step_{step}"


def revision_name(step: int) -> str:
    """The branch holding step `step`'s adapter at its root: ``step-200``."""
    return f"{REVISION_PREFIX}{step}"


def checkpoint_files(step: int) -> tuple[str, ...]:
    """The paths of a step's adapter files in the repo."""
    return tuple(f"{checkpoint_dir(step)}/{name}" for name in ADAPTER_FILES)


def steps_in_paths(paths: Iterable[str]) -> tuple[int, ...]:
    """The checkpoint steps a repo holds, from its file paths (a step counts once its weights are there)."""
    return tuple(sorted({int(m.group(1)) for path in paths if (m := _STEP_WEIGHTS_RE.match(path))}))


SWEEP_CHART = "assets/accuracy_vs_length.png"
