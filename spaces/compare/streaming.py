"""Tokens from `generate` as it makes them: every row of a batch at each step, one row's at a time when
the rows run one after the other, and a stop the request's consumer can pull."""

from __future__ import annotations

import queue
import threading

import torch
from transformers import StoppingCriteria
from transformers.generation.streamers import BaseStreamer


class RowStreamer(BaseStreamer):
    """Receives the tokens of every row from `generate` (the prompt first, then one token per row per step)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.queue: queue.Queue[list[list[int]] | None] = queue.Queue()
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.queue.put(value.reshape(self.rows, -1).tolist())

    def end(self) -> None:
        self.queue.put(None)


class OneRow(BaseStreamer):
    """Hands one row's tokens to a `RowStreamer` of several rows (the others get none that step)."""

    def __init__(self, rows: RowStreamer, row: int) -> None:
        self.rows, self.row = rows, row
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        step: list[list[int]] = [[] for _ in range(self.rows.rows)]
        step[self.row] = value.reshape(-1).tolist()
        self.rows.queue.put(step)

    def end(self) -> None:
        pass  # the rows' streamer ends once every row is answered


class Cancelled(StoppingCriteria):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        return torch.full(
            (input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device
        )
