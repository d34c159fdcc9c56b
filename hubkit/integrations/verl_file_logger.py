"""verl 0.6.1's file logger made to keep every step: numbers written as numbers, each line flushed.

verl 0.6.1's ``FileLogger`` (``trainer.logger=[...,file]``, the ``metrics.jsonl`` hubkit reads) loses a run's
metrics in two ways, both independent of the device:

- it writes with ``json.dumps``, which refuses the 0-d tensors the batch balancer reports (``global_seqlen/*``
  with the default ``trainer.balance_batch=True``) and the numpy scalars of validation metrics, so the run
  dies after its first step (fixed upstream after 0.7.0, verl PR #4811);
- it never flushes and closes its file only when the trainer's ``Tracking`` object is collected; an exception
  verl catches at every checkpoint save leaves a reference cycle that keeps it alive until the Ray worker
  exits, so the buffered lines are lost (an empty file at the end of a finished run).

`keep_every_line` replaces ``FileLogger.log`` in the process that trains (verl's TaskRunner, where the
recipe's reward file is executed) with one that converts tensors and numpy values to Python numbers and
flushes after each line. The file and its format (``{"step": N, "data": {...}}``) are verl's.
"""

from __future__ import annotations

import json
from typing import Any


def _as_json(value: Any) -> Any:
    """A tensor or numpy value as the Python number (or list) it holds."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()  # a 0-d tensor or numpy scalar gives its number
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _log(self: Any, data: dict[str, Any], step: int) -> None:
    self.fp.write(json.dumps({"step": step, "data": data}, default=_as_json) + "\n")
    self.fp.flush()


def keep_every_line() -> None:
    """Make verl's ``FileLogger`` in this process write tensors as numbers and flush every line."""
    from verl.utils import tracking

    tracking.FileLogger.log = _log
