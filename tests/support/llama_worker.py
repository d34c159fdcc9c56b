"""hubkit's llama.cpp worker (hubkit/verify/llama_worker.py, its folder the third argument: ``python -I
llama_worker.py JOB OUT HUBKIT_VERIFY_DIR``) with what the tests measure of llama.cpp beside its logits, in
``result.json``: ``lora`` (a GGUF LoRA applied over the file), ``texts`` (tokenized, special tokens
parsed), ``prompts`` continued greedily for ``max_new_tokens``, ``metadata_keys`` (read from the file)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(job_path: Path, out_dir: Path) -> None:
    import llama_worker
    import numpy
    from llama_cpp import Llama

    job = json.loads(job_path.read_text())
    llm = Llama(**llama_worker.options(job), **({"lora_path": job["lora"]} if job.get("lora") else {}))
    tokens = [llm.tokenize(text.encode(), add_bos=False, special=True) for text in job.get("texts", ())]
    greedy = []
    for prompt in job.get("prompts", ()):
        llm.reset()
        llm.eval(prompt)
        continuation = []
        for _ in range(job["max_new_tokens"]):
            continuation.append(int(numpy.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval(continuation[-1:])
        greedy.append(continuation)
    numpy.savez(out_dir / "logits.npz", **llama_worker.sequence_logits(llm, job["sequences"]))
    metadata = {key: llm.metadata.get(key) for key in job.get("metadata_keys", ())}
    (out_dir / "result.json").write_text(
        json.dumps({"tokens": tokens, "greedy": greedy, "metadata": metadata})
    )


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[3])  # hubkit is not installed beside llama.cpp: its worker, alone, is read
    main(Path(sys.argv[1]), Path(sys.argv[2]))
