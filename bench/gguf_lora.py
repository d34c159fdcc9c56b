"""Benchmark: one checkpoint's adapter as a GGUF LoRA (`hubkit.export.gguf_lora`) at the seed's size,
against llama.cpp's own convert_lora_to_gguf.py on the same adapter.

Builds a Qwen3-4B-shaped LoRA (36 layers, rank 16 on q/k/v/o/gate/up/down, float32: 126 MiB, as the seed's
TRL runs save it) and a config.json of Qwen3-4B's shapes (the converter reads only the config), then
writes the F16 GGUF LoRA in this process and runs the converter (``--outtype f16``) in its own, and prints
each one's wall time and peak resident memory (hubkit's above its imports), and whether the two files hold
the same tensors (names, types, shapes, bytes).

    $ .venv/bin/python bench/gguf_lora.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gguf
import torch
from safetensors.torch import save_file

from hubkit.export.gguf_lora import plan_gguf_lora, write_gguf_lora
from hubkit.formats.gguf import GGUFMetadata

REPO_ROOT = Path(__file__).resolve().parents[1]
HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, HEAD_DIM, RANK = 2560, 9728, 36, 32, 8, 128, 16
SHAPES = {
    "self_attn.q_proj": (HEADS * HEAD_DIM, HIDDEN),
    "self_attn.k_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
    "self_attn.v_proj": (KV_HEADS * HEAD_DIM, HIDDEN),
    "self_attn.o_proj": (HIDDEN, HEADS * HEAD_DIM),
    "mlp.gate_proj": (INTERMEDIATE, HIDDEN),
    "mlp.up_proj": (INTERMEDIATE, HIDDEN),
    "mlp.down_proj": (HIDDEN, INTERMEDIATE),
}


def build(root: Path) -> tuple[Path, Path]:
    adapter, base = root / "adapter", root / "base"
    adapter.mkdir()
    base.mkdir()
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for layer in range(LAYERS):
        for module, (rows, columns) in SHAPES.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(RANK, columns, generator=generator) * 0.01
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(rows, RANK, generator=generator) * 0.01
    save_file(tensors, adapter / "adapter_model.safetensors")
    targets = sorted(m.split(".")[1] for m in SHAPES)
    config = {"peft_type": "LORA", "r": RANK, "lora_alpha": 2 * RANK, "target_modules": targets}
    (adapter / "adapter_config.json").write_text(
        json.dumps({**config, "base_model_name_or_path": "Qwen/Qwen3-4B"})
    )
    base_config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    }  # fmt: skip
    (base / "config.json").write_text(json.dumps(base_config))
    return adapter, base


def _tensors(path: Path) -> list[tuple[str, int, tuple[int, ...], bytes]]:
    return [
        (t.name, int(t.tensor_type), tuple(t.shape), t.data.tobytes()) for t in gguf.GGUFReader(path).tensors
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        adapter, base = build(root)
        size = (adapter / "adapter_model.safetensors").stat().st_size
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        start = time.perf_counter()
        metadata = GGUFMetadata(name="bench-step-1", base_model="Qwen/Qwen3-4B")
        config = json.loads((base / "config.json").read_text())
        ours = write_gguf_lora(plan_gguf_lora(adapter, config, root / "hubkit.gguf", metadata, "bench"))
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        print(
            f"hubkit     {seconds:6.2f} s  peak RSS above imports {peak / 2**20:7.1f} MiB ({peak / size:.2f}x "
            f"the adapter's {size / 2**20:.1f} MiB); file {ours.size / 2**20:.1f} MiB"
        )
        (converter,) = sorted(
            (REPO_ROOT / ".venv-llama").glob("src/*/vendor/llama.cpp/convert_lora_to_gguf.py")
        )
        out = root / "converter.gguf"
        command = [
            sys.executable,
            str(converter),
            "--base",
            str(base),
            "--outtype",
            "f16",
            "--outfile",
            str(out),
        ]
        start = time.perf_counter()
        subprocess.run([*command, str(adapter)], check=True, capture_output=True)
        seconds = time.perf_counter() - start
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        print(f"converter  {seconds:6.2f} s  peak RSS (whole process) {child / 2**20:7.1f} MiB")
        print(f"same tensors: {_tensors(ours.path) == _tensors(out)}")


if __name__ == "__main__":
    main()
