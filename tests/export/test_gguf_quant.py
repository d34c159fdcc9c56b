"""`hubkit push --gguf q4_k_m,q8_0`: the k-quants made by llama.cpp's own quantizer (llama-cpp-python, the
`gguf-quant` extra) from hubkit's BF16 file, published to the local Hub and loaded in llama.cpp.

The base is a tiny Qwen3 wide enough for k-quants (rows of 256 and 512 values: llama.cpp's k-quant blocks
hold 256; hubkit.demo.tiny's 64-wide models would get llama.cpp's 32-block fallbacks everywhere), four
layers, so that llama.cpp's per-layer rule shows, taught three texts (as tests/export/test_gguf.py's models are)
so that its next-token choices are not near ties, then trained for two GRPO steps with TRL."""

from __future__ import annotations

import importlib.util
import re
import sys
import uuid
from pathlib import Path

import gguf
import pytest
import torch
import yaml
from fixtures_hub import TEST_NAMESPACE
from fixtures_runs import make_trl_run
from helpers import push_argv, run_cli, run_llama_worker
from safetensors.torch import load_file, save_file
from test_gguf import LLAMA_PYTHON, PROMPT_TOKENS, TEXTS, _teach

from hubkit.cards.text import size as size_text
from tests.support.tiny import ENDOFTEXT_ID, IM_END_ID, copy_tokenizer, publish_model

needs_llama_cpp = pytest.mark.skipif(
    not LLAMA_PYTHON.exists(), reason="no llama.cpp environment (.venv-llama): run `make venv-llama`"
)
needs_quantizer = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="no llama.cpp quantizer: run `make venv-gguf-quant`"
)
LAYERS = 4
WIDE_SIZES = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 2048,
}
# llama.cpp's Q4_K_M rule (src/llama-quant.cpp, llama_tensor_get_type_impl): attn_v and ffn_down get Q6_K
# in the layers use_more_bits picks (i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2: layers 2 and 3 of 4),
# output.weight Q6_K, every other matrix Q4_K; 1-D tensors stay F32.
MORE_BITS_LAYERS = (2, 3)
# llama.cpp's published "same top p" against F16 for Llama-3-8B (tools/perplexity/README.md): Q4_K_M
# 91.9 %, Q8_0 97.7 %; taught texts have larger margins than Wikipedia's, so the tiny model must do as well.
AGREEMENT_BOUNDS = {"Q4_K_M": 0.919, "Q8_0": 0.977}
# The taught model answers the run's first prompts alike, so its first step's rewards tie and that step
# does not move the adapter: the release is the second step's.
PUSHED = ("--no-space", "--steps", "2")


def _build_wide_qwen3(out_dir: Path) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab_size = copy_tokenizer(out_dir)
    config = Qwen3Config(
        vocab_size=vocab_size,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=ENDOFTEXT_ID,
        tie_word_embeddings=False,
        **WIDE_SIZES,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        Qwen3ForCausalLM(config).save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory: pytest.TempPathFactory, hub_api) -> Path:
    """A 2-step TRL run on the wide tiny Qwen3, published as the run's base."""
    base_dir = _build_wide_qwen3(tmp_path_factory.mktemp("wide") / "tiny-qwen3-wide")
    _teach(base_dir)
    base = publish_model(hub_api, base_dir, f"{TEST_NAMESPACE}/tiny-qwen3-wide")
    run_dir = make_trl_run(
        tmp_path_factory.mktemp("wide-runs") / "wide-qwen3-trl-grpo", base_dir, base.repo_id, steps=2
    )
    # Two tiny steps move this bfloat16 model's logits by less than merging into bfloat16 weights rounds away
    # (1.78 against 2.17): the push's check rightly refuses such a merged model as the base's
    # (tests/verify/test_verify.py). Step 2's update scaled up stands for a longer run's.
    [adapter] = run_dir.rglob("checkpoint-2/adapter_model.safetensors")
    tensors = load_file(adapter)
    save_file(
        {k: v * 10 if "lora_B" in k else v for k, v in tensors.items()}, adapter, metadata={"format": "pt"}
    )
    return run_dir


@pytest.fixture(scope="module")
def quantized_release(wide_run: Path, local_hub) -> str:
    """The wide run pushed with ``--gguf q4_k_m,q8_0``; returns the adapter repo id."""
    repo_id = f"{TEST_NAMESPACE}/gguf-quant-{uuid.uuid4().hex[:8]}"
    argv = [*push_argv(wide_run, repo_id, local_hub.endpoint), *PUSHED, "--quiet"]
    assert run_cli([*argv, "--gguf", "q4_k_m,q8_0"]) == 0
    return repo_id


def _tensor_types(path: str) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


def _expected_q4_k_m(names: list[str]) -> dict[str, str]:
    expected = {}
    for name in names:
        layer = re.match(r"blk\.(\d+)\.", name)
        if name.endswith("norm.weight"):
            expected[name] = "F32"
        elif name == "output.weight" or (
            layer
            and int(layer[1]) in MORE_BITS_LAYERS
            and name.endswith(("attn_v.weight", "ffn_down.weight"))
        ):
            expected[name] = "Q6_K"
        else:
            expected[name] = "Q4_K"
    return expected


@needs_quantizer
@needs_llama_cpp
@pytest.mark.timeout(1800)  # its fixtures train, merge and quantize: 307 s of setup on two loaded cores
def test_q4_k_m_has_llama_cpps_mixture_and_agrees_with_the_merged_model(
    quantized_release: str, wide_run: Path, hub_api, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = quantized_release.split("/")[1]
    gguf_id, merged_id = f"{quantized_release}-GGUF", f"{quantized_release}-merged"
    files = {t: f"{name}-{t}.gguf" for t in ("Q4_K_M", "Q8_0")}
    # The BF16 file the k-quants were made from was not asked for: it is not published.
    assert set(hub_api.list_repo_files(gguf_id)) - {".gitattributes"} == {"README.md", *files.values()}
    paths = {t: hub_api.hf_hub_download(gguf_id, f) for t, f in files.items()}

    q4 = _tensor_types(paths["Q4_K_M"])
    assert q4 == _expected_q4_k_m(list(q4))
    assert set(_tensor_types(paths["Q8_0"]).values()) == {"Q8_0", "F32"}
    fields = gguf.GGUFReader(paths["Q4_K_M"]).fields
    assert fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q4_K_M

    # The merged model's greedy continuation of each text's first tokens, and llama.cpp's top-1 at each
    # of those positions given the same tokens.
    merged_dir = Path(hub_api.snapshot_download(merged_id))
    model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    sequences = []
    for text in TEXTS:
        ids = tokenizer(text)["input_ids"]
        prompt = torch.tensor([ids[:PROMPT_TOKENS]])
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=len(ids) - PROMPT_TOKENS, do_sample=False)
        sequences.append(out[0].tolist())
    agreement = {}
    for gguf_type, path in paths.items():
        job = {
            "model": path,
            "n_ctx": 64,
            "texts": [],
            "prompts": [],
            "max_new_tokens": 0,
            "sequences": sequences,
            "metadata_keys": ["general.architecture"],
        }
        out = tmp_path / gguf_type
        out.mkdir()
        logits = run_llama_worker(job, out)["logits"]
        same = total = 0
        for sequence, scores in zip(sequences, logits, strict=True):
            top1 = scores[PROMPT_TOKENS - 1 : len(sequence) - 1].argmax(-1).tolist()
            same += sum(a == b for a, b in zip(top1, sequence[PROMPT_TOKENS:], strict=True))
            total += len(top1)
        agreement[gguf_type] = same / total
    print(f"top-1 agreement with the merged model's greedy tokens: {agreement}")
    for gguf_type, bound in AGREEMENT_BOUNDS.items():
        assert agreement[gguf_type] >= bound, (gguf_type, agreement)

    card = Path(hub_api.hf_hub_download(gguf_id, "README.md")).read_text()
    _assert_verified_table_is_measured(card, merged_dir, paths, wide_run, tmp_path)
    record = yaml.safe_load(card.split("---\n")[1])["hubkit_gguf"]["files"]
    for gguf_type, file_name in files.items():
        size = Path(paths[gguf_type]).stat().st_size
        assert record[gguf_type] == {**record[gguf_type], "name": file_name, "size": size}
        assert f"{file_name}) | {gguf_type} | {size_text(size)} |" in card
    assert f"llama-cli -hf {gguf_id}:Q4_K_M" in card
    assert "Q4_K_M was then made from a BF16 file" in " ".join(card.split())


def _card_answers(merged_dir: Path, model, run_dir: Path) -> list[tuple[list[int], int, int]]:
    """The check's protocol, done here with transformers alone: the run's held-out prompts (this run has no
    evaluation: the GSM8K-style defaults) rendered by the merged chat template, each answered greedily by the
    merged model at its own dtype."""
    from transformers import AutoTokenizer

    from hubkit.runs import load_run
    from hubkit.verify.merged import DEFAULT_QUESTIONS, MAX_NEW_TOKENS

    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    system = load_run(run_dir).manifest.system_prompt
    turns = [{"role": "system", "content": system}] if system else []
    sequences = []
    for question in DEFAULT_QUESTIONS:
        conversation = [*turns, {"role": "user", "content": question}]
        ids = tokenizer.apply_chat_template(
            conversation, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=MAX_NEW_TOKENS,
                do_sample=False,
                eos_token_id=[IM_END_ID, ENDOFTEXT_ID],
            )
        sequences.append((out[0].tolist(), len(ids), out.shape[1]))
    return sequences


def _assert_verified_table_is_measured(
    card: str, merged_dir: Path, paths: dict[str, str], run_dir: Path, tmp_path: Path
) -> None:
    """The card's "Verified" row of each file equals what llama.cpp gives here for the same protocol."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype="auto").eval()
    sequences = _card_answers(merged_dir, model, run_dir)
    with torch.no_grad():
        ours = [model(torch.tensor([ids])).logits[0, s - 1 : e - 1].float() for ids, s, e in sequences]
    longest = max(len(ids) for ids, _, _ in sequences)
    rows = {}
    for gguf_type, path in paths.items():
        job = {
            "model": path,
            "n_ctx": -(-longest // 64) * 64,
            "texts": [],
            "prompts": [],
            "max_new_tokens": 0,
            "sequences": [ids for ids, _, _ in sequences],
            "metadata_keys": [],
        }
        out = tmp_path / f"card-{gguf_type}"
        out.mkdir()
        logits = run_llama_worker(job, out)["logits"]
        same = kl = tokens = 0
        for (ids, s, e), p_logits, scores in zip(sequences, ours, logits, strict=True):
            q = torch.from_numpy(scores[s - 1 : e - 1]).double().log_softmax(-1)
            p = p_logits.double().log_softmax(-1)
            same += int((q.argmax(-1) == torch.tensor(ids[s:e])).sum())
            kl += float((p.exp() * (p - q)).sum())
            tokens += e - s
        rows[gguf_type] = (same / tokens, kl / tokens, tokens)
    print(f"measured here (agreement, mean KL, tokens): {rows}")
    for gguf_type, (agreement, kl, tokens) in rows.items():
        name = Path(paths[gguf_type]).name
        row = next(line for line in card.splitlines() if line.startswith(f"| `{name}` | {gguf_type} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[5:] == [str(len(sequences)), str(tokens)], row
        assert abs(float(cells[3].removesuffix(" %")) - 100 * agreement) <= 0.05 + 1e-9, (row, agreement)
        assert abs(float(cells[4]) - kl) <= 0.005 * kl + 1e-12, (row, kl)
    record = yaml.safe_load(card.split("---\n")[1])["hubkit_gguf"]["verified"]
    assert set(record) == set(paths) and all(r["checked"] == "llama.cpp" for r in record.values())


def test_without_the_quantizer_a_k_quant_push_refuses_in_one_line_before_any_repo(
    wide_run: Path, local_hub, hub_api, new_repo_id, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(
        sys.modules, "llama_cpp", None
    )  # as if `pip install 'hubkit[gguf-quant]'` had not run
    argv = [*push_argv(wide_run, new_repo_id, local_hub.endpoint), *PUSHED, "--gguf", "q8_0,q4_k_m"]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "pip install 'hubkit[gguf-quant]'" in err and len(err.splitlines()) == 1
    for repo in (new_repo_id, f"{new_repo_id}-merged", f"{new_repo_id}-GGUF"):
        assert not hub_api.repo_exists(repo)


# blk.0.ffn_down scaled by 4 (rewritten by gguf-py as Q8_0): 9 of 22 top-1 tokens kept on the taught model's
# answers, far below Q8_0's floor; a v_proj scaled by 1.5 or the embedding halved moves no top-1 token here
# (Qwen3 normalizes after each), which the agreement rightly does not call a fault.
PLANTED_TENSOR, PLANTED_SCALE = "blk.0.ffn_down.weight", 4.0


@needs_quantizer
def test_a_gguf_file_with_a_scaled_tensor_is_refused_by_its_agreement_in_llama_cpp(
    wide_run: Path, local_hub, hub_api, new_repo_id, capsys
) -> None:
    from unittest import mock

    from hubkit.publish.gguf_repo import SessionExports

    publish = SessionExports.publish

    def scaled(self, *args, **kwargs):
        files, record = publish(self, *args, **kwargs)
        for planned in files:
            reader = gguf.GGUFReader(planned.local_path, "r+")
            [tensor] = [t for t in reader.tensors if t.name == PLANTED_TENSOR]
            weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            tensor.data[...] = gguf.quants.quantize(weights * PLANTED_SCALE, tensor.tensor_type)
            del reader
        return files, record

    argv = [*push_argv(wide_run, new_repo_id, local_hub.endpoint), *PUSHED, "--quiet", "--gguf", "q8_0"]
    with mock.patch.object(SessionExports, "publish", scaled):
        assert run_cli(argv) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    print(errors)
    assert len(errors) == 1, errors
    name = f"{new_repo_id}-GGUF/{new_repo_id.split('/')[1]}-Q8_0.gguf"
    found = re.search(
        rf"{re.escape(name)} is not the merged model's: top-1 agreement ([\d.]+)% in llama.cpp on (\d+) "
        r"tokens, below Q8_0's floor ([\d.]+)%",
        errors[0],
    )
    assert found, errors[0]
    assert float(found[1]) < float(found[3]) - 20, errors[0]  # not a near miss: the fault is found by far
    for repo in (new_repo_id, f"{new_repo_id}-merged", f"{new_repo_id}-GGUF"):
        assert not hub_api.repo_exists(repo)


def _verify_rows(out: str, artifact: str) -> dict[str, list[str]]:
    """The rows `hubkit verify` prints for `artifact`: label → its cells."""
    block = out.split(f"{artifact} (", 1)[1].split("\n", 1)[1].splitlines()[:3]
    rows = {}
    for line in block:
        for label in ("measured now", "the card says"):
            if line.startswith(label):
                rows[label] = line.removeprefix(label).split()
    return rows


@needs_quantizer
def test_hubkit_verify_reproduces_the_gguf_cards_figures_until_a_file_is_changed_on_the_hub(
    quantized_release: str, local_hub, hub_api, tmp_path: Path, capsys
) -> None:
    gguf_id = f"{quantized_release}-GGUF"
    card = Path(hub_api.hf_hub_download(gguf_id, "README.md")).read_text()
    verify = ["verify", "--repo-id", quantized_release, "--endpoint", local_hub.endpoint]
    capsys.readouterr()
    assert run_cli(verify) == 0
    out = capsys.readouterr().out
    print(out)
    name = quantized_release.split("/")[1]
    for gguf_type in ("Q4_K_M", "Q8_0"):
        file_name = f"{name}-{gguf_type}.gguf"
        rows = _verify_rows(out, f"{gguf_id}/{file_name}")
        assert rows["measured now"] == rows["the card says"], out
        row = next(line for line in card.splitlines() if line.startswith(f"| `{file_name}` | {gguf_type} |"))
        agreement, kl, prompts, tokens = [c.strip() for c in row.strip("|").split("|")][3:]
        assert rows["measured now"] == [prompts, tokens, *agreement.split(), kl], (row, out)

    # Q8_0's blk.0.ffn_down scaled on the Hub after publishing (as the push's planted test does).
    file_name = f"{name}-Q8_0.gguf"
    original = Path(hub_api.hf_hub_download(gguf_id, file_name)).read_bytes()
    changed = tmp_path / file_name
    changed.write_bytes(original)
    reader = gguf.GGUFReader(changed, "r+")
    [tensor] = [t for t in reader.tensors if t.name == PLANTED_TENSOR]
    weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    tensor.data[...] = gguf.quants.quantize(weights * PLANTED_SCALE, tensor.tensor_type)
    del reader
    hub_api.upload_file(path_or_fileobj=changed, path_in_repo=file_name, repo_id=gguf_id)
    try:
        assert run_cli(verify) != 0
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, errors
        assert f"{gguf_id}/{file_name} is not the merged model's: top-1 agreement" in errors[0], errors
        assert "below Q8_0's floor" in errors[0] and "Q4_K_M" not in errors[0], errors
    finally:
        changed.write_bytes(original)
        hub_api.upload_file(path_or_fileobj=changed, path_in_repo=file_name, repo_id=gguf_id)
