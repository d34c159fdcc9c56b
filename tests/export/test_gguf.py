"""GGUF export, checked by llama.cpp itself and by transformers: tiny Qwen3, Qwen2.5 (tied embeddings) and
Llama releases written as BF16 and Q8_0, loaded in llama.cpp through llama-cpp-python (run from .venv-llama,
`make venv-llama`), compared with the same model in transformers; the files compared with llama.cpp's own
convert_hf_to_gguf.py; transformers' GGUF loader reading the BF16 file back; refusals that write nothing.

The tiny models come from `hubkit.demo.tiny` with random weights, then are taught three short texts (a few
dozen optimizer steps) and saved in bf16, as a merged release is. A random model's next-token choices are
near ties that any rounding can flip; a taught one continues its texts with margins far above the rounding,
and every greedy step below checks that its margin is, before it requires llama.cpp to agree.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from gguf_bounds import rounding_bounds, unit
from helpers import run_cli, run_llama_worker

from hubkit.demo.tiny import TINY_SIZES
from hubkit.errors import GGUFExportError
from hubkit.export import GGUFFile, GGUFMetadata, TensorSpec, TensorStream, export_gguf, plan_gguf_export
from hubkit.formats.gguf_vocab import PRE_TOKENIZER_CHECK_TEXT
from tests.support.tiny import (
    ENDOFTEXT_ID,
    IM_END_ID,
    build_tiny_qwen2_tied,
    build_tiny_qwen3,
    copy_tokenizer,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
LLAMA_ENV = REPO_ROOT / ".venv-llama"
LLAMA_PYTHON = LLAMA_ENV / "bin" / "python"
CONVERTERS = sorted(LLAMA_ENV.glob("src/*/vendor/llama.cpp/convert_hf_to_gguf.py"))
needs_llama_cpp = pytest.mark.skipif(
    not LLAMA_PYTHON.exists(), reason="no llama.cpp environment (.venv-llama): run `make venv-llama`"
)
needs_converter = pytest.mark.skipif(
    not CONVERTERS, reason="no llama.cpp source (.venv-llama/src): run `make venv-llama`"
)

TEXTS = (
    "The capital of France is Paris, and the river that runs through it is the Seine.",
    "Seven times eight is fifty-six; nine times nine is eighty-one.",
    "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n</think>\nThe answer is 5.<|im_end|>",
)
PROMPT_TOKENS = 4  # each text's first tokens are the prompt; greedy decoding must give back the rest
RIVALS = 4  # runners-up per greedy step whose distance to the chosen token is checked against rounding
TYPES = ("bf16", "q8_0")


# --- the models ---------------------------------------------------------------------------------


def _build_tiny_llama(out_dir: Path) -> Path:
    # A Llama with hubkit.demo.tiny's sizes and tokenizer: the architecture whose q/k rows the converter reorders.
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab_size = copy_tokenizer(out_dir)
    config = LlamaConfig(
        vocab_size=vocab_size,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=ENDOFTEXT_ID,
        **TINY_SIZES,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(out_dir)
    return out_dir


BUILDERS = {"qwen3": build_tiny_qwen3, "qwen2": build_tiny_qwen2_tied, "llama": _build_tiny_llama}


def _teach(model_dir: Path) -> None:
    """Fit the model to TEXTS until every next token has probability >= 0.95, then save it in bf16."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="right")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    batch = tokenizer(list(TEXTS), padding=True, return_tensors="pt")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)[:, 1:]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    for _ in range(150):
        logits = model(**batch).logits[:, :-1]
        chosen = logits.softmax(-1).gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
        if chosen[labels != -100].min() >= 0.95:
            break
        torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100).backward()
        optimizer.step()
        optimizer.zero_grad()
    else:
        raise AssertionError("the tiny model did not learn its texts in 150 steps")
    model.to(torch.bfloat16).save_pretrained(model_dir)


@dataclass(frozen=True)
class Release:
    family: str
    model_dir: Path
    files: dict[str, GGUFFile]  # by type: "bf16", "q8_0"


@pytest.fixture(scope="module", params=list(BUILDERS))
def release(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Release:
    """A taught tiny model of one family in bf16, exported as BF16 and Q8_0."""
    family = request.param
    model_dir = BUILDERS[family](tmp_path_factory.mktemp("gguf") / f"tiny-{family}")
    _teach(model_dir)
    result = export_gguf(model_dir, model_dir.parent / "gguf", TYPES, GGUFMetadata(name=f"tiny-{family}"))
    return Release(family, model_dir, {f.file_type.lower(): f for f in result.files})


@pytest.fixture(scope="module")
def plain_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 as built (untaught, float32): enough for what is refused or planned."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("gguf-plain") / "tiny-qwen3")


@pytest.fixture(scope="module")
def reference(release: Release):
    """The release in transformers, computing in float32 on its bf16 weights (exactly representable)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(release.model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(release.model_dir)


@pytest.fixture(scope="module")
def llama_cpp(tmp_path_factory: pytest.TempPathFactory):
    """llama.cpp's tokens, greedy continuations and logits for TEXTS from a file (run once per file)."""
    results: dict[Path, dict] = {}

    def run(gguf_file: Path, tokenizer) -> dict:
        if gguf_file not in results:
            results[gguf_file] = _run_llama_cpp(gguf_file, tokenizer, tmp_path_factory.mktemp("llama-cpp"))
        return results[gguf_file]

    return run


def _run_llama_cpp(gguf_file: Path, tokenizer, out: Path) -> dict:
    ids = [tokenizer(text)["input_ids"] for text in TEXTS]
    job = {
        "model": str(gguf_file),
        "n_ctx": 64,
        "texts": [*TEXTS, PRE_TOKENIZER_CHECK_TEXT],
        "prompts": [sequence[:PROMPT_TOKENS] for sequence in ids],
        "max_new_tokens": max(len(sequence) for sequence in ids) - PROMPT_TOKENS,
        "sequences": ids,
        "metadata_keys": ["general.architecture", "tokenizer.ggml.pre", "tokenizer.chat_template"],
    }
    return run_llama_worker(job, out)


# --- llama.cpp reads the files as transformers computes the model ---------------------------------


def _per_text(release: Release, reference, llama_cpp, gguf_type: str, key: str) -> list[tuple]:
    """Each text, its token ids, and what llama.cpp gave for it (`key` of its result) from the release's
    `gguf_type` file."""
    _, tokenizer = reference
    result = llama_cpp(release.files[gguf_type].path, tokenizer)
    return [(text, tokenizer(text)["input_ids"], got) for text, got in zip(TEXTS, result[key], strict=True)]


@needs_llama_cpp
@pytest.mark.slow
def test_llama_cpp_tokenizes_as_transformers(release: Release, reference, llama_cpp) -> None:
    _, tokenizer = reference
    result = llama_cpp(release.files["bf16"].path, tokenizer)
    expected = [tokenizer(text)["input_ids"] for text in [*TEXTS, PRE_TOKENIZER_CHECK_TEXT]]
    assert result["tokens"] == expected
    assert result["metadata"]["tokenizer.ggml.pre"] == "qwen2"
    assert result["metadata"]["tokenizer.chat_template"] == tokenizer.chat_template


@needs_llama_cpp
@pytest.mark.slow
def test_bf16_greedy_tokens_equal_transformers(release: Release, reference, llama_cpp) -> None:
    model, vocab = reference[0], reference[0].config.vocab_size
    for text, ids, ours in _per_text(release, reference, llama_cpp, "bf16", "greedy"):
        sequence = ids[:PROMPT_TOKENS]
        with torch.no_grad():
            while len(sequence) < len(ids):
                sequence.append(int(model(torch.tensor([sequence])).logits[0, -1].argmax()))
        assert sequence == ids  # the taught text comes back
        # Every step's choice leads its runners-up by more than bf16 rounding can move them (checked for the
        # RIVALS closest; the rest are further behind), so llama.cpp must make the same choice.
        with torch.no_grad():
            logits = model(torch.tensor([sequence])).logits[0]
        checks = []  # (position, chosen, rival)
        for position in range(PROMPT_TOKENS - 1, len(sequence) - 1):
            chosen, *rivals = logits[position].topk(1 + RIVALS).indices.tolist()
            checks += [(position, chosen, rival) for rival in rivals]
        directions = [(p, unit(vocab, (c, 1.0), (r, -1.0))) for p, c, r in checks]
        bounds = rounding_bounds(model, sequence, directions, "bf16")
        for (p, c, r), bound in zip(checks, bounds, strict=True):
            assert float(logits[p, c] - logits[p, r]) > bound.worst, (text, p, c, r, bound)
        assert ids[:PROMPT_TOKENS] + ours[: len(ids) - PROMPT_TOKENS] == sequence


@needs_llama_cpp
@pytest.mark.slow
def test_q8_0_logits_within_the_block_quantization_bound(release: Release, reference, llama_cpp) -> None:
    model, vocab = reference[0], reference[0].config.vocab_size
    generator = torch.Generator().manual_seed(0)
    for text, ids, theirs in _per_text(release, reference, llama_cpp, "q8_0", "logits"):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        # At each position: the chosen token's logit and one other token's, picked at random.
        checks = [(p, int(logits[p].argmax())) for p in range(len(ids))]
        checks += [(p, int(torch.randint(vocab, (1,), generator=generator))) for p in range(len(ids))]
        bounds = rounding_bounds(model, ids, [(p, unit(vocab, (t, 1.0))) for p, t in checks], "q8_0")
        for (p, t), bound in zip(checks, bounds, strict=True):
            assert abs(float(theirs[p, t]) - float(logits[p, t])) <= bound.likely, (text, p, t, bound)
            # The bound is no excuse: under a quarter of how far the top logit stands above the median one
            # (measured: 2-12 %), so that a wrong tensor, a missed permutation or a misread token would not
            # fit in it.
            assert bound.likely < 0.25 * float(logits[p].max() - logits[p].median()), (text, p, t, bound)


# --- the files themselves -----------------------------------------------------------------------


@pytest.mark.slow
def test_transformers_reads_the_bf16_file_back_to_the_model_tensors(release: Release) -> None:
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    # The config is the release's: transformers' GGUF config mapping reads no head size for qwen3
    # (qwen3.attention.key_length) and would take Qwen3's usual 128 where the tiny model has 16.
    loaded = AutoModelForCausalLM.from_pretrained(
        release.model_dir.parent / "gguf",
        gguf_file=release.files["bf16"].path.name,
        config=AutoConfig.from_pretrained(release.model_dir),
        dtype=torch.bfloat16,
    )
    state = loaded.state_dict()
    with safe_open(release.model_dir / "model.safetensors", "pt") as f:
        names = list(f.keys())
        for name in names:
            assert torch.equal(state[name], f.get_tensor(name)), name
    if release.family == "qwen2":  # tied: the output layer is the embedding, not a copy written twice
        assert "lm_head.weight" not in names and loaded.config.tie_word_embeddings


@needs_converter
@pytest.mark.parametrize("file_type", TYPES)
@pytest.mark.slow
def test_files_are_llama_cpp_converters_byte_for_byte(
    release: Release, file_type: str, tmp_path: Path
) -> None:
    """llama.cpp's own convert_hf_to_gguf.py on the same folder, told the same name (it would guess one from
    the folder's), writes the same bytes: every key, every tensor name, type, shape and value."""
    override = tmp_path / "metadata.json"
    override.write_text(json.dumps({"general.name": f"tiny-{release.family}"}))
    converted = tmp_path / "converted.gguf"
    command = [sys.executable, str(CONVERTERS[0]), str(release.model_dir), "--outtype", file_type]
    command += ["--metadata", str(override), "--outfile", str(converted)]
    process = subprocess.run(command, capture_output=True, text=True)
    assert process.returncode == 0, process.stderr[-3000:]
    ours = release.files[file_type]
    assert hashlib.sha256(converted.read_bytes()).hexdigest() == ours.sha256
    assert ours.sha256 == hashlib.sha256(ours.path.read_bytes()).hexdigest()  # the hash taken while writing
    assert ours.size == converted.stat().st_size


def test_general_metadata_names_the_release_and_its_base(plain_qwen3: Path, tmp_path: Path) -> None:
    model_dir = _copy_with_config(plain_qwen3, tmp_path / "model")
    (model_dir / "generation_config.json").unlink()
    (model_dir / "generation_config.json").write_text(
        json.dumps({"temperature": 0.6, "top_p": 0.95, "top_k": 20})
    )
    metadata = GGUFMetadata(name="run-7", base_model="me/run-7-merged", license="apache-2.0")
    plan = plan_gguf_export(model_dir, tmp_path / "out", ["q8_0"], metadata)
    fields = {f.key: f.value for f in plan.files[0].fields}
    assert plan.files[0].path == tmp_path / "out" / "run-7-Q8_0.gguf"
    assert fields["general.name"] == "run-7" and fields["general.license"] == "apache-2.0"
    assert fields["general.base_model.count"] == 1
    assert fields["general.base_model.0.repo_url"] == "https://huggingface.co/me/run-7-merged"
    assert fields["general.base_model.0.organization"] == "Me"
    assert (fields["general.sampling.temp"], fields["general.sampling.top_k"]) == (0.6, 20)
    assert fields["general.file_type"] == 7  # LlamaFileType.MOSTLY_Q8_0
    assert not any(str(tmp_path) in str(value) for value in fields.values())  # no local path
    assert not (tmp_path / "out").exists()  # planning writes nothing


@pytest.mark.slow
def test_a_stream_of_tensors_gives_the_same_file_as_the_folder(release: Release, tmp_path: Path) -> None:
    from safetensors import safe_open

    with safe_open(release.model_dir / "model.safetensors", "pt") as f:
        tensors = [(name, f.get_tensor(name)) for name in f.keys()]  # noqa: SIM118 (not iterable)
    stream = TensorStream(tuple(TensorSpec(n, tuple(t.shape)) for n, t in tensors), iter(tensors))
    metadata = GGUFMetadata(name=f"tiny-{release.family}")
    result = export_gguf(release.model_dir, tmp_path, ["bf16"], metadata, stream=stream)
    assert result.files[0].sha256 == release.files["bf16"].sha256
    # A stream that gives another tensor than it announced stops the export: no file is left.
    wrong = TensorStream(stream.specs, iter([(n, t[:1]) for n, t in tensors]))
    with pytest.raises(GGUFExportError, match="announced"):
        export_gguf(release.model_dir, tmp_path / "wrong", ["q8_0"], metadata, stream=wrong)
    assert list((tmp_path / "wrong").iterdir()) == []


# --- refusals -----------------------------------------------------------------------------------


def _copy_with_config(source: Path, dest: Path, **changes: object) -> Path:
    dest.mkdir()
    for path in source.iterdir():
        (dest / path.name).symlink_to(path)
    config = json.loads((source / "config.json").read_text())
    (dest / "config.json").unlink()
    (dest / "config.json").write_text(json.dumps({**config, **changes}))
    return dest


def test_an_unknown_architecture_is_refused_before_anything_is_written(
    plain_qwen3: Path, tmp_path: Path
) -> None:
    model_dir = _copy_with_config(plain_qwen3, tmp_path / "model", architectures=["GPT2LMHeadModel"])
    out = tmp_path / "out"
    with pytest.raises(GGUFExportError, match="cannot write GPT2LMHeadModel as GGUF") as refused:
        export_gguf(model_dir, out, ["q8_0"], GGUFMetadata(name="x"))
    assert "\n" not in str(refused.value)
    assert not out.exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}},
            "RoPE scaling 'dynamic'",
        ),
        ({"use_sliding_window": True}, "sliding window"),
        ({"quantization_config": {"quant_method": "bitsandbytes"}}, "already quantized"),
    ],
)
def test_what_llama_cpp_would_misread_is_refused(
    plain_qwen3: Path, tmp_path: Path, changes: dict, message: str
) -> None:
    model_dir = _copy_with_config(plain_qwen3, tmp_path / "model", **changes)
    with pytest.raises(GGUFExportError, match=message):
        plan_gguf_export(model_dir, tmp_path / "out", ["bf16"], GGUFMetadata(name="x"))
    assert not (tmp_path / "out").exists()


def test_an_unknown_type_is_refused(plain_qwen3: Path, tmp_path: Path) -> None:
    with pytest.raises(GGUFExportError, match="unknown GGUF type 'q4_k'"):
        plan_gguf_export(plain_qwen3, tmp_path, ["q8_0", "q4_k"], GGUFMetadata(name="x"))


# --- the command --------------------------------------------------------------------------------


@pytest.mark.slow
def test_gguf_command_merges_a_run_checkpoint_and_exports_it(trl_run_dir, tiny_qwen3, local_hub, tmp_path):
    out = tmp_path / "gguf"
    argv = ["gguf", "--run-dir", str(trl_run_dir), "--types", "q8_0", "--out", str(out)]
    assert run_cli([*argv, "--endpoint", local_hub.endpoint, "--quiet"]) == 0
    # The same as merging with `hubkit merge`, then exporting that folder.
    merged = tmp_path / "merged"
    assert (
        run_cli(
            ["merge", "--run-dir", str(trl_run_dir), "--out", str(merged), "--endpoint", local_hub.endpoint]
        )
        == 0
    )
    metadata = GGUFMetadata(name=trl_run_dir.name, base_model=tiny_qwen3.repo_id)
    expected = export_gguf(merged, tmp_path / "expected", ["q8_0"], metadata).files[0]
    written = out / f"{trl_run_dir.name}-Q8_0.gguf"
    assert [p.name for p in out.iterdir()] == [written.name]
    assert hashlib.sha256(written.read_bytes()).hexdigest() == expected.sha256


def test_gguf_command_refuses_an_unknown_architecture_in_one_line(plain_qwen3: Path, tmp_path: Path, capsys):
    model_dir = _copy_with_config(plain_qwen3, tmp_path / "model", architectures=["MambaForCausalLM"])
    out = tmp_path / "gguf"
    assert (
        run_cli(["gguf", "--model-dir", str(model_dir), "--types", "bf16,q8_0", "--out", str(out), "-q"]) == 1
    )
    err = capsys.readouterr().err
    assert (
        err.startswith("Error: cannot write MambaForCausalLM as GGUF") and len(err.strip().splitlines()) == 1
    )
    assert not out.exists()
