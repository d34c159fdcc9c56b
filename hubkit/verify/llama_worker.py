"""The next-token logits llama.cpp computes from one GGUF file, in a process of its own (`hubkit.verify.
gguf_llama`): run as ``python -I llama_worker.py JOB OUT MEMORY_BYTES``, it imports only llama_cpp and numpy.

The job (JSON) names the file, the context size, the threads, and the token sequences with the positions
whose next-token logits to keep (``[start, end)``: an answer's tokens); OUT gets ``logits.npz``, one
float32 array per sequence (row i: the logits after token start - 1 + i). The KV cache is kept in F32 and
flash attention off, so that what is measured is the file's weights (the activations' conversion to their
type inside each matrix product included), not a cache type. The process's data (its heap and llama.cpp's
buffers; the file itself is memory-mapped) is held to MEMORY_BYTES.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Any

GGML_TYPE_F32 = 0


def options(job: dict[str, Any]) -> dict[str, Any]:
    """`llama_cpp.Llama`'s arguments for the job's file, as it is measured (see the top)."""
    return {
        "model_path": job["model"],
        "n_ctx": job["n_ctx"],
        "n_batch": job["n_ctx"],
        "logits_all": True,
        "n_threads": job["threads"],
        "n_gpu_layers": 0,
        "type_k": GGML_TYPE_F32,
        "type_v": GGML_TYPE_F32,
        "flash_attn": False,
        "seed": 0,
        "verbose": False,
    }


def sequence_logits(llm: Any, sequences: list[list[Any]]) -> dict[str, Any]:
    """Each sequence's logits at its kept positions, by its index (the arrays of ``logits.npz``)."""
    import numpy

    logits = {}
    for index, (ids, start, end) in enumerate(sequences):
        llm.reset()
        llm.eval(ids)
        logits[str(index)] = numpy.array(llm.scores[start - 1 : end - 1], dtype=numpy.float32)
    return logits


def main(job_path: Path, out_dir: Path, memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    import numpy
    from llama_cpp import Llama

    job = json.loads(job_path.read_text())
    llm = Llama(**options(job))
    numpy.savez(out_dir / "logits.npz", **sequence_logits(llm, job["sequences"]))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
