"""What llama.cpp computes from one GGUF file, for tests/test_gguf.py.

Runs in .venv-llama (llama-cpp-python, which compiles llama.cpp) as ``python -I llama_worker.py JOB OUT``:
hubkit is not importable there, only llama_cpp and numpy. The job (JSON) names the file (and a GGUF LoRA to apply over it, if any), texts to tokenize,
prompts to continue greedily and token sequences whose logits to return; OUT gets ``result.json`` and
``logits.npz``. The KV cache is kept in F32 so that the only rounding left is the weights' type and the
activations' conversion to it inside each matrix product.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy
from llama_cpp import Llama

GGML_TYPE_F32 = 0


def main(job_path: Path, out_dir: Path) -> None:
    job = json.loads(job_path.read_text())
    llm = Llama(
        model_path=job["model"],
        n_ctx=job["n_ctx"],
        n_batch=job["n_ctx"],
        logits_all=True,
        n_threads=2,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
        flash_attn=False,
        seed=0,
        verbose=False,
        **({"lora_path": job["lora"]} if job.get("lora") else {}),
    )
    tokens = [llm.tokenize(text.encode(), add_bos=False, special=True) for text in job["texts"]]
    greedy = []
    for prompt in job["prompts"]:
        llm.reset()
        llm.eval(prompt)
        continuation = []
        for _ in range(job["max_new_tokens"]):
            token = int(numpy.argmax(llm.scores[llm.n_tokens - 1]))
            continuation.append(token)
            llm.eval([token])
        greedy.append(continuation)
    logits = {}
    for index, sequence in enumerate(job["sequences"]):
        llm.reset()
        llm.eval(sequence)
        logits[str(index)] = numpy.array(llm.scores[: len(sequence)], dtype=numpy.float32)
    numpy.savez(out_dir / "logits.npz", **logits)
    metadata = {key: llm.metadata.get(key) for key in job["metadata_keys"]}
    (out_dir / "result.json").write_text(
        json.dumps({"tokens": tokens, "greedy": greedy, "metadata": metadata})
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
