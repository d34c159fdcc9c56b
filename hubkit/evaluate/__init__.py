"""`hubkit eval`: accuracy and answer length of the base model and every chosen checkpoint, on held-out problems.

Modules, one job each:

- `results`: what an evaluation stores (``eval/results.json``, ``eval/samples.jsonl``) and reading it back.

    from hubkit.evaluate import load_eval
    results = load_eval(run_dir)          # None when the run has not been evaluated
    best = results.best()                 # the checkpoint to use

Importing this package needs only the standard library.
"""

from __future__ import annotations

from hubkit.evaluate.results import (
    EvalResults,
    EvalSummary,
    ModelResult,
    Sample,
    load_eval,
    save_eval,
)

__all__ = ["EvalResults", "EvalSummary", "ModelResult", "Sample", "load_eval", "save_eval"]
