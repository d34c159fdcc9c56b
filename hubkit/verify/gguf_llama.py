"""A GGUF file measured in llama.cpp against the merged model it was written from, when llama-cpp-python is
installed (the ``gguf-quant`` extra): the merged model's own greedy answers to the check's prompts,
teacher-forced through both, give at each answer position

  top-1 agreement  llama.cpp's argmax against the merged model's greedy token (llama.cpp's "same top p")
  mean KL          KL(merged ‖ file) of the next-token distributions, averaged over the positions (llama.cpp's
                   ``perplexity --kl-divergence`` takes it against a BF16/F16 file's logits; here the
                   reference is the merged model itself in transformers, so a BF16 file's own figure shows
                   the two runtimes' difference and every other file's includes it)

    reference = merged_reference(merged_dir, prompts, stops)   # one load of the merged model, then freed
    measure = measure_file(path, reference)                    # llama.cpp in a bounded process per file

llama.cpp runs in `llama_worker` (a process of its own: its data within the file's size plus
`WORKER_MEMORY_BYTES`, the file memory-mapped; `worker_timeout` seconds), one file at a time.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.errors import VerificationError

# llama.cpp's published "same top p" against F16 for Llama-3-8B (tools/perplexity/README.md, its Llama 2
# vs. Llama 3 table; BF16: its BF16 vs. FP16 comparison). A type without a figure takes the next lower
# published type's, which is at most as good.
PUBLISHED_SAME_TOP = {"Q2_K": 0.71138, "Q4_K_M": 0.91901, "Q6_K": 0.96031, "Q8_0": 0.97674, "BF16": 0.99739}
_NEXT_LOWER = {
    "Q3_K_S": "Q2_K",
    "Q3_K_M": "Q2_K",
    "Q3_K_L": "Q2_K",
    "Q4_K_S": "Q4_K_M",
    "Q5_K_S": "Q4_K_M",
    "Q5_K_M": "Q4_K_M",
    "F16": "BF16",
}
# How far below the published rate a file's measured rate may fall on n positions before it is refused:
# this many binomial standard deviations, sqrt(p (1 - p) / n) (a chance refusal of an honest file ≈ 0.13 %).
FLOOR_SIGMAS = 3.0
WORKER_MEMORY_BYTES = 2 << 30  # llama.cpp's compute buffers, KV cache and logits, beyond the file
WORKER_START_SECONDS = 60.0
WORKER_BYTES_PER_SECOND = 20e6  # loading and evaluating a few hundred tokens: far below a CPU's rate
CONTEXT_STEP = 64


def llama_cpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def agreement_floor(gguf_type: str, positions: int) -> float:
    """The least top-1 agreement a file of `gguf_type` must show on `positions` positions (see the top)."""
    p = PUBLISHED_SAME_TOP.get(gguf_type) or PUBLISHED_SAME_TOP[_NEXT_LOWER.get(gguf_type, "Q2_K")]
    return max(0.0, p - FLOOR_SIGMAS * math.sqrt(p * (1 - p) / max(positions, 1)))


@dataclass(frozen=True)
class Reference:
    """The merged model's greedy answers: (token ids, answer start, end) each, and its float32 next-token
    logits at those answer positions."""

    sequences: tuple[tuple[tuple[int, ...], int, int], ...]
    logits: tuple[Any, ...]  # torch tensors, (end - start, vocab) each

    @property
    def tokens(self) -> int:
        return sum(end - start for _, start, end in self.sequences)


@dataclass(frozen=True)
class Measure:
    agreement: float
    mean_kl: float
    tokens: int


def merged_reference(
    merged_dir: Path, prompts: Sequence[tuple[int, ...]], stops: Sequence[int], max_new_tokens: int
) -> Reference:
    """The merged model (as users load it, at its dtype) answers each prompt greedily; then it is freed."""
    from hubkit.evaluate.backend_transformers import load_model
    from hubkit.verify.merged import _answers, _forced_logits

    model = load_model(merged_dir, {}, dtype="auto")
    answers = _answers(model, prompts, stops, max_new_tokens)
    logits = _forced_logits(model, answers)
    del model
    gc.collect()
    sequences = tuple((tuple(ids), start, end) for start, end, ids in answers if end > start)
    return Reference(
        sequences, tuple(x for x, (start, end, _) in zip(logits, answers, strict=True) if end > start)
    )


def worker_timeout(size: int) -> float:
    return WORKER_START_SECONDS + size / WORKER_BYTES_PER_SECOND


def measure_file(path: Path, reference: Reference, artifact: str) -> Measure:
    """llama.cpp's next-token logits from the file at `path`, against the merged model's (see the top).

    Raises:
        VerificationError: llama.cpp could not load or run the file within its bounds, naming `artifact`.
    """
    import numpy
    import torch

    longest = max(len(ids) for ids, _, _ in reference.sequences)
    job = {
        "model": str(path),
        "n_ctx": -(-longest // CONTEXT_STEP) * CONTEXT_STEP,
        "threads": max(1, min(8, os.cpu_count() or 1)),
        "sequences": [[list(ids), start, end] for ids, start, end in reference.sequences],
    }
    size = path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="hubkit-llama-") as out:
        (Path(out) / "job.json").write_text(json.dumps(job))
        worker = Path(__file__).with_name("llama_worker.py")
        memory = size + WORKER_MEMORY_BYTES
        command = [sys.executable, "-I", str(worker), str(Path(out) / "job.json"), out, str(memory)]
        try:
            process = subprocess.run(command, capture_output=True, text=True, timeout=worker_timeout(size))
        except subprocess.TimeoutExpired as e:
            raise VerificationError(
                f"{artifact}: llama.cpp did not run it within {worker_timeout(size):.0f} s; nothing was "
                "published (--no-verify publishes it unchecked)"
            ) from e
        if process.returncode != 0:
            reason = (process.stderr.strip().splitlines() or ["it failed"])[-1][:300]
            raise VerificationError(
                f"{artifact}: llama.cpp cannot run it ({reason}); nothing was published "
                "(--no-verify publishes it unchecked)"
            )
        with numpy.load(Path(out) / "logits.npz") as data:
            theirs = [torch.from_numpy(data[str(i)]) for i in range(len(reference.sequences))]
    same = 0
    kl = 0.0
    for (ids, start, end), ours, file_logits in zip(
        reference.sequences, reference.logits, theirs, strict=True
    ):
        same += int((file_logits.argmax(-1) == torch.tensor(ids[start:end])).sum())
        log_p, log_q = ours.log_softmax(-1), file_logits.double().log_softmax(-1)
        kl += float((log_p.double().exp() * (log_p.double() - log_q)).sum())
    tokens = reference.tokens
    return Measure(same / tokens, kl / tokens, tokens)
