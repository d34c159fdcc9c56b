"""Vetting what a push would publish from an untrusted run directory (`hubkit.safety`).

Every row of issue 23's table, and each kind of secret, planted in a real TRL-layout checkpoint (a real
PEFT adapter, the real Qwen3 tokenizer): the vetting either refuses with one line naming the file and
what it holds (never the secret itself), or returns bytes in which no planted byte survives, checked on
the decoded output. The push-level tests (no repo created) come with the push's integration.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from helpers import save_tiny_peft_adapter
from planted import HF_TOKEN, planted_secrets

from hubkit.errors import (
    AmbiguousCheckpointError,
    ForeignCheckpointsError,
    LocalPathInFileError,
    MalformedFileError,
    OversizedFileError,
    SecretInFileError,
    UnsafeFileError,
    UnsafeLinkError,
)
from hubkit.formats.peft import LORA_CONFIG_FIELDS
from hubkit.formats.tensorboard import write_scalars
from hubkit.safety import (
    VetContext,
    check_checkpoint_folder,
    checkpoints_tree,
    kind_of,
    kinds,
    refuse_duplicate_steps,
    vet_bytes,
    vet_checkpoint,
    vet_file,
)

BASE_ID = "Qwen/Qwen3-0.6B"
# Planted secrets, built from parts so that no scanner flags this file itself.
SECRETS = planted_secrets("local-hub-" + "token-4242-abcd")
IN_USE = SECRETS["token_in_use"][0]


def _one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and message.startswith("refusing to publish"), message
    return message


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    return tmp_path / "run"


@pytest.fixture
def context(run_dir: Path, tmp_path: Path) -> VetContext:
    return VetContext(
        hub_base_id=BASE_ID,
        run_dir=run_dir,
        cache_dirs=(tmp_path / "hf-home",),
        home_dir=Path("/home/alice"),
        token=IN_USE,
    )


@pytest.fixture(scope="module")
def peft_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real adapter: PEFT's save_pretrained of LoRA on a tiny Qwen3 (adapter files and PEFT's README)."""
    return save_tiny_peft_adapter(tmp_path_factory.mktemp("adapter"))


@pytest.fixture
def checkpoint(run_dir: Path, peft_adapter: Path, qwen3_tokenizer_dir: Path) -> Path:
    """``checkpoint-10/`` as TRL saves it: adapter, tokenizer, trainer state, optimizer/RNG state."""
    folder = run_dir / "checkpoint-10"
    shutil.copytree(peft_adapter, folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        shutil.copyfile(qwen3_tokenizer_dir / name, folder / name)
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"
    )
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 10, "log_history": []}))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        (folder / name).write_bytes(b"\x80\x04pickle")
    return folder


def _rewrite_json(path: Path, change) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


# --- the real Qwen3 tokenizer, a real adapter, and what is left out ------------------------------------


@pytest.mark.parametrize("token", ["test", None, IN_USE])
def test_a_real_checkpoint_passes_and_a_short_token_in_use_blocks_nothing(checkpoint, context, token):
    files, left_out = vet_checkpoint(checkpoint, dataclasses.replace(context, token=token))
    by_name = {f.path_in_repo: f for f in files}
    assert sorted(by_name) == [
        "adapter_config.json", "adapter_model.safetensors", "chat_template.jinja", "merges.txt",
        "tokenizer.json", "tokenizer_config.json", "vocab.json",
    ]  # fmt: skip
    # Written back by `tokenizers` and by the vocabulary's writer: the very bytes of the real files.
    for name in ("tokenizer.json", "vocab.json"):
        assert by_name[name].data == (checkpoint / name).read_bytes()
    assert by_name["adapter_model.safetensors"].weights.saved_header_kept
    assert json.loads(by_name["adapter_config.json"].data)["base_model_name_or_path"] == BASE_ID
    reasons = {item.name: item.reason for item in left_out}
    assert reasons == {
        "README.md": "PEFT's generic card (the repo gets hubkit's card)",
        "optimizer.pt": "optimizer state",
        "rng_state.pth": "random number generator state",
        "scheduler.pt": "learning-rate scheduler state",
        "trainer_state.json": "trainer state (its metrics are published as metrics.jsonl)",
        "training_args.bin": "training arguments (a pickle)",
    }


def test_the_published_tokenizer_loads_and_the_adapter_config_loads_in_peft(checkpoint, context, tmp_path):
    from peft import LoraConfig
    from tokenizers import Tokenizer

    files, _ = vet_checkpoint(checkpoint, context)
    out = tmp_path / "published"
    out.mkdir()
    for vetted in files:
        if vetted.data is not None:
            (out / vetted.path_in_repo).write_bytes(vetted.data)
    assert Tokenizer.from_file(str(out / "tokenizer.json")).encode("Hello").ids
    assert LoraConfig.from_pretrained(out).r == 2


def test_unknown_files_folders_and_links_are_left_out_with_a_reason(checkpoint, context):
    (checkpoint / "notes.txt").write_text("hello")
    (checkpoint / "sub").mkdir()
    (checkpoint / "environ").symlink_to("/proc/self/environ")
    (checkpoint / "gone").symlink_to(checkpoint / "nothing-here")
    (checkpoint / f"{HF_TOKEN}.txt").write_text("x")
    _, left_out = vet_checkpoint(checkpoint, context)
    reasons = {item.name: item.reason for item in left_out}
    assert reasons["notes.txt"] == "unknown kind"
    assert reasons["sub"] == "a folder"
    assert reasons["environ"] == "symlink to a non-regular file"
    assert reasons["gone"] == "a dangling symlink"
    assert reasons["(a file whose name holds a secret)"] == "unknown kind"
    assert not any(HF_TOKEN in item.name for item in left_out)


def test_lora_config_fields_are_peft_s():
    from peft import LoraConfig

    assert {f.name for f in dataclasses.fields(LoraConfig)} == LORA_CONFIG_FIELDS


# --- row: merges.txt a symlink to a private SSH key outside the run ------------------------------------


def test_a_private_key_linked_as_merges_txt_is_refused_as_not_merges_and_its_key_named(
    checkpoint, context, tmp_path
):
    key = tmp_path / "id_ed25519"
    key.write_text(SECRETS["private_key"][0] + "-----END OPENSSH PRIVATE KEY-----\n")
    (checkpoint / "merges.txt").unlink()
    (checkpoint / "merges.txt").symlink_to(key)
    with pytest.raises(SecretInFileError) as error:
        vet_checkpoint(checkpoint, context)
    message = _one_line(error)
    assert "checkpoint-10/merges.txt" in message and "not a merges file" in message
    assert "a private key block on line 1" in message and "b3BlbnNz" not in message


# --- row: a checkpoints folder symlinked to another run -----------------------------------------------


def test_a_checkpoints_folder_linked_to_another_run_is_refused_unless_named(tmp_path, run_dir):
    other = tmp_path / "other-run" / "checkpoints"
    other.mkdir(parents=True)
    (run_dir / "checkpoints").symlink_to(other)
    with pytest.raises(ForeignCheckpointsError) as error:
        checkpoints_tree(run_dir, "checkpoints")
    assert "outside the run directory" in _one_line(error) and str(other) not in str(error.value)
    named = checkpoints_tree(run_dir, "checkpoints", named=other)
    assert named.outside_run and named.path == other.resolve() and str(other.resolve()) in named.describe()
    inside = run_dir / "saves"
    inside.mkdir()
    (run_dir / "latest").symlink_to(inside)
    assert not checkpoints_tree(run_dir, "latest").outside_run


def test_a_checkpoint_folder_linked_out_of_its_tree_is_refused(tmp_path, run_dir):
    foreign = tmp_path / "other-run" / "checkpoint-20"
    foreign.mkdir(parents=True)
    (run_dir / "checkpoint-20").symlink_to(foreign)
    (run_dir / "checkpoint-10").mkdir()
    tree = checkpoints_tree(run_dir, ".")
    check_checkpoint_folder(tree, run_dir / "checkpoint-10")
    with pytest.raises(ForeignCheckpointsError) as error:
        check_checkpoint_folder(tree, run_dir / "checkpoint-20")
    assert "checkpoint-20" in _one_line(error)


# --- rows: a token JSON-escaped, and local paths, in tokenizer_config.json -------------------------------


def test_a_json_escaped_token_is_found_after_parsing(checkpoint, context):
    path = checkpoint / "tokenizer_config.json"
    escaped = HF_TOKEN.replace("_", "\\u005f")
    path.write_text(path.read_text().replace('"eos_token":', f'"note": "{escaped}", "eos_token":', 1))
    assert HF_TOKEN not in path.read_text()
    with pytest.raises(SecretInFileError) as error:
        vet_checkpoint(checkpoint, context)
    message = _one_line(error)
    assert (
        "checkpoint-10/tokenizer_config.json" in message and "a Hugging Face token (in field note)" in message
    )
    assert HF_TOKEN[3:] not in message


LOCAL_PATHS = [
    "/home/alice/models/qwen",
    "/root/models/qwen",
    "/scratch/u123/qwen",
    "/Users/bob/models/qwen",
    "C:\\Users\\bob\\models\\qwen",
    "/tmp/tmpab12/qwen",
    "/mnt/nvme0/qwen",
    "/data/models/qwen",
    # Cluster layouts: a path is local by its shape, whatever its file system is called.
    "/raid/alice/qwen",
    "/global/homes/a/alice/qwen",
    "/pscratch/sd/a/alice/qwen",
    "/scratch1/u123/qwen",
    "/home1/u123/qwen",
    "/lus/grand/projects/lab/qwen",
    "/p/project/lab/qwen",
    "/checkpoint/alice/qwen",
    "/export/home/alice/qwen",
    "/gpfs/alpine/lab/qwen",
    "/cephfs/team/alice/qwen",
]


@pytest.mark.parametrize("planted", [*LOCAL_PATHS, "RUN", "CACHE"])
def test_model_path_fields_become_the_hub_id_and_any_other_local_path_is_refused(
    checkpoint, context, planted
):
    planted = {"RUN": str(context.run_dir / "base"), "CACHE": str(context.cache_dirs[0] / "hub")}.get(
        planted, planted
    )
    path = checkpoint / "tokenizer_config.json"
    _rewrite_json(path, lambda c: c.update(name_or_path=planted, tokenizer_file=planted + "/tokenizer.json"))
    vetted = vet_file(path, kinds.TOKENIZER_CONFIG, context)
    published = json.loads(vetted.data)
    assert published["name_or_path"] == BASE_ID and "tokenizer_file" not in published
    assert planted not in vetted.data.decode() and planted not in json.dumps(published)
    assert vetted.notes

    _rewrite_json(path, lambda c: c.update(extra={"cache": [planted]}))
    with pytest.raises(LocalPathInFileError) as error:
        vet_file(path, kinds.TOKENIZER_CONFIG, context)
    message = _one_line(error)
    assert "(in field extra.cache.0)" in message and planted not in message


def test_base_model_name_or_path_in_the_adapter_config_becomes_the_hub_id(checkpoint, context):
    path = checkpoint / "adapter_config.json"
    _rewrite_json(path, lambda c: c.update(base_model_name_or_path="/scratch/alice/qwen3"))
    published = json.loads(vet_file(path, kinds.ADAPTER_CONFIG, context).data)
    assert published["base_model_name_or_path"] == BASE_ID


def test_words_and_url_paths_are_not_local_paths(context):
    text = (
        "/home and /tmp are words; https://huggingface.co/data/x, a/home/b, /gradio_api/call/x, km/h, "
        "critic/score/mean, #!/usr/bin/env python, /dev/null, 1/2/3"
    )
    assert vet_bytes("README.md", kinds.CARD, text.encode(), context).data == text.encode()


# --- row: a token and /root/... in the adapter's safetensors __metadata__ -------------------------------


def test_safetensors_metadata_keeps_only_format(checkpoint, context, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    weights = checkpoint / "adapter_model.safetensors"
    tensors = load_file(weights)
    save_file(tensors, weights, metadata={"format": "pt", "token": HF_TOKEN, "cwd": "/root/runs/r1"})
    vetted = vet_file(weights, kinds.ADAPTER_WEIGHTS, context)
    source = vetted.weights
    assert not source.saved_header_kept and "cwd" in vetted.notes[0]
    published = tmp_path / "published.safetensors"
    with weights.open("rb") as saved:
        saved.seek(source.data_start)
        published.write_bytes(source.header + saved.read())
    assert published.stat().st_size == vetted.size
    text = published.read_bytes().decode("latin-1")
    assert HF_TOKEN not in text and "/root/" not in text
    with safe_open(published, "pt") as f:
        assert f.metadata() == {"format": "pt"}
    assert all((load_file(published)[k] == v).all() for k, v in tensors.items())


def test_a_secret_in_a_tensor_name_is_refused(tmp_path, context):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "adapter_model.safetensors"
    save_file({f"base_model.model.{HF_TOKEN}.lora_A.weight": torch.ones(2, 2)}, path)
    with pytest.raises(SecretInFileError) as error:
        vet_file(path, kinds.ADAPTER_WEIGHTS, context)
    assert "a Hugging Face token (in a tensor name)" in _one_line(error) and HF_TOKEN not in str(error.value)


# --- row: a 2 GB sparse tokenizer.json -------------------------------------------------------------


def test_a_sparse_2_gb_tokenizer_is_refused_from_its_size_unread(tmp_path):
    path = tmp_path / "tokenizer.json"
    with path.open("wb") as f:
        f.truncate(2 * 1024**3)
    script = textwrap.dedent(
        f"""
        import resource, sys
        from pathlib import Path
        from hubkit.errors import OversizedFileError
        from hubkit.safety import VetContext, kinds, vet_file
        context = VetContext(hub_base_id="{BASE_ID}", run_dir=Path({str(tmp_path)!r}))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            vet_file(Path({str(path)!r}), kinds.TOKENIZER, context)
        except OversizedFileError as e:
            print(e)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    message, grown_mb = out.stdout.strip().splitlines()
    assert (
        message
        == "refusing to publish tokenizer.json: 2147.5 MB, more than the 50.0 MB allowed for a tokenizer"
    )
    assert int(grown_mb) < 20  # the peak resident set did not grow by the file's size (or any of it)


# --- row: 10 MB of junk in a valid adapter_config.json ---------------------------------------------------


def test_an_adapter_config_over_1_mb_is_refused_and_smaller_junk_is_dropped(checkpoint, context):
    from peft import LoraConfig

    path = checkpoint / "adapter_config.json"
    _rewrite_json(path, lambda c: c.update(junk="J" * 10_000_000))
    with pytest.raises(OversizedFileError) as error:
        vet_file(path, kinds.ADAPTER_CONFIG, context)
    assert "checkpoint-10/adapter_config.json: 10.0 MB" in _one_line(error)

    wandb_key = "3f786850e387550fdab836ed7e6dc881de23001b"
    _rewrite_json(path, lambda c: c.update(junk="J" * 500_000, extra={"token": HF_TOKEN}, **{wandb_key: 1}))
    vetted = vet_file(path, kinds.ADAPTER_CONFIG, context)
    published = json.loads(vetted.data)
    assert (
        set(published) <= LORA_CONFIG_FIELDS
        and "JJJJ" not in vetted.data.decode()
        and HF_TOKEN not in vetted.data.decode()
    )
    assert wandb_key not in vetted.data.decode() and wandb_key not in " ".join(vetted.notes)
    assert vetted.notes[-1] == "dropped what PEFT's LoraConfig does not read: extra, junk, 1 other"
    assert LoraConfig(**published).r == 2


# --- row: checkpoint-10 and a copy checkpoint-0010 ---------------------------------------------------


def test_two_folders_of_one_step_are_refused_before_anything(checkpoint, run_dir):
    from hubkit.runs import load_run
    from hubkit.runs.manifest import Manifest

    shutil.copytree(checkpoint, run_dir / "checkpoint-0010")
    Manifest(run_id="r1", framework="trl", base_model=BASE_ID).save(run_dir)
    run = load_run(run_dir)
    with pytest.raises(AmbiguousCheckpointError) as error:
        refuse_duplicate_steps((c.step, c.path) for c in run.checkpoints + run.pending)
    assert "both checkpoint-0010 and checkpoint-10 claim it" in _one_line(error)
    refuse_duplicate_steps([(10, run_dir / "checkpoint-10"), (20, run_dir / "checkpoint-20")])


# --- row: a symlink to /proc/self/environ, a device, a FIFO -----------------------------------------


@pytest.mark.parametrize("target", ["/proc/self/environ", "/dev/zero", "/proc"])
def test_a_known_file_linked_to_a_non_regular_file_is_refused_unread(checkpoint, context, target):
    (checkpoint / "tokenizer_config.json").unlink()
    (checkpoint / "tokenizer_config.json").symlink_to(target)
    with pytest.raises(UnsafeLinkError) as error:
        vet_checkpoint(checkpoint, context)
    assert "checkpoint-10/tokenizer_config.json: it is a symlink to a non-regular file" in _one_line(error)


def test_a_fifo_named_as_a_known_file_is_refused_without_waiting(checkpoint, context):
    (checkpoint / "tokenizer_config.json").unlink()
    os.mkfifo(checkpoint / "tokenizer_config.json")
    with pytest.raises(MalformedFileError) as error:
        vet_checkpoint(checkpoint, context)
    assert "not a regular file" in _one_line(error)


# --- each kind of secret, in each place a decoded string comes from ----------------------------------


def _plant(where: str, secret: str, checkpoint: Path) -> tuple[Path | None, bytes | None]:
    config = checkpoint / "tokenizer_config.json"
    if where == "json value":
        _rewrite_json(config, lambda c: c.update(extra={"values": ["x", secret]}))
    elif where == "json key":
        _rewrite_json(config, lambda c: c.update(extra={secret: 1}))
    elif where == "json escaped":
        escaped = json.dumps(secret, ensure_ascii=True).replace("-", "\\u002d").replace("_", "\\u005f")
        config.write_text(config.read_text().replace('"eos_token":', f'"extra": {escaped}, "eos_token":', 1))
    elif where == "chat template":
        (checkpoint / "chat_template.jinja").write_text("{# " + secret + " #}{{ messages }}")
        return checkpoint / "chat_template.jinja", None
    elif where == "card":
        return None, f"# Model\n\nTrained with care.\n{secret}\n".encode()
    return config, None


@pytest.mark.parametrize("where", ["json value", "json key", "json escaped", "chat template", "card"])
@pytest.mark.parametrize("secret_kind", sorted(SECRETS))
def test_every_kind_of_secret_is_refused_wherever_it_is_planted(checkpoint, context, secret_kind, where):
    secret, what = SECRETS[secret_kind]
    if where == "json key" and secret_kind in ("wandb", "netrc"):
        secret = secret.split()[-1].split("=")[-1]  # a bare 40-hex key is no secret; under its name it is:
        _rewrite_json(checkpoint / "tokenizer_config.json", lambda c: c.update(WANDB_API_KEY=secret))
        path, data = checkpoint / "tokenizer_config.json", None
    else:
        path, data = _plant(where, secret, checkpoint)
    with pytest.raises(SecretInFileError) as error:
        if data is not None:
            vet_bytes("README.md", kinds.CARD, data, context)
        else:
            vet_file(path, kinds.CHECKPOINT_KINDS[path.name], context)
    message = _one_line(error)
    assert f"it holds {what}" in message
    assert secret.split()[-1][-12:] not in message
    assert (path.name if path else "README.md") in message


@pytest.mark.parametrize(
    "value",
    [
        "3f786850e387550fdab836ed7e6dc881de23001b",  # a bare sha1 / git commit id
        "sk-learn-compatible-wrapper-for-models",
        "hf_hub_download_and_cache_the_files",  # underscores: not a token
        "password protected",
        "AKIAIOSFODNN7EXAMPLQQ",  # 17 characters after AKIA
    ],
)
def test_what_only_looks_like_a_secret_passes(context, value):
    results = {"revision": value, "commit": value, "checkpoints": [{"step": 10, "sha": value, "note": value}]}
    vetted = vet_bytes("eval/results.json", kinds.EVAL_RESULTS, json.dumps(results).encode(), context)
    assert json.loads(vetted.data) == results


# --- formats: each kind is written from what was read -----------------------------------------------


def test_a_json_document_is_written_from_its_parsed_value(context):
    data = b'{"a": "first \\u0068f_x", "a": "second", "b": [1, 2.5, null, true]}'
    vetted = vet_bytes("generation_config.json", kinds.GENERATION_CONFIG, data, context)
    assert vetted.data == b'{\n  "a": "second",\n  "b": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}\n'
    assert b"first" not in vetted.data


@pytest.mark.parametrize(
    ("data", "defect"),
    [
        (b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper than 64 levels"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deep to parse"),
        (b'{"a": "\\ud800"}', "not valid Unicode"),
        (b'{"a": 1', "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "not a JSON object"),
    ],
)
def test_a_json_config_that_is_not_one_is_refused_in_one_line(context, data, defect):
    with pytest.raises(MalformedFileError) as error:
        vet_bytes("generation_config.json", kinds.GENERATION_CONFIG, data, context)
    assert defect in _one_line(error)


def test_merges_vocab_and_templates_have_their_format(context):
    assert vet_bytes("merges.txt", kinds.MERGES, b"#version: 0.2\r\na b\r\nab c\r\n", context).data == (
        b"#version: 0.2\na b\nab c\n"
    )
    cases = [
        ("merges.txt", kinds.MERGES, b"a b\nthree parts here\n", "line 2 is not a merge"),
        ("vocab.json", kinds.VOCAB, b'{"a": 0, "b": 0}', "several tokens share one id"),
        ("vocab.json", kinds.VOCAB, b'{"a": "0"}', "not a non-negative integer"),
        ("chat_template.jinja", kinds.CHAT_TEMPLATE, b"{% for x in y %}", "not a Jinja template"),
        (
            "tokenizer.json",
            kinds.TOKENIZER,
            b'{"version": "1.0"}',
            "not a tokenizer the `tokenizers` library loads",
        ),
        ("tokenizer.json", kinds.TOKENIZER, b'{"version": "1.0", "junk": 1}', "not a tokenizer"),
    ]
    for name, kind, data, defect in cases:
        with pytest.raises(MalformedFileError) as error:
            vet_bytes(name, kind, data, context)
        assert defect in _one_line(error), name
    template = b"{% generation %}{{ m }}{% endgeneration %}"  # transformers' tag for assistant masks
    assert vet_bytes("chat_template.jinja", kinds.CHAT_TEMPLATE, template, context).data == template


def test_fields_tokenizers_does_not_know_are_dropped_from_a_tokenizer(qwen3_tokenizer_dir, context):
    value = json.loads((qwen3_tokenizer_dir / "tokenizer.json").read_text())
    value["model"]["planted"] = HF_TOKEN
    value["normalizer"]["planted"] = "/home/alice/x"
    vetted = vet_bytes("tokenizer.json", kinds.TOKENIZER, json.dumps(value).encode(), context)
    assert vetted.data == (qwen3_tokenizer_dir / "tokenizer.json").read_bytes()


def test_a_png_keeps_its_image_and_loses_its_text_chunks(context):
    import io

    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", HF_TOKEN)
    info.add_itxt("Where", "/home/alice/run")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 4), (200, 10, 10)).save(buffer, "PNG", pnginfo=info)
    vetted = vet_bytes("assets/reward.png", kinds.IMAGE, buffer.getvalue(), context)
    assert HF_TOKEN.encode() not in vetted.data and b"/home/" not in vetted.data
    assert Image.open(io.BytesIO(vetted.data)).getpixel((3, 2)) == (200, 10, 10)
    assert vetted.notes == ("dropped PNG chunks: iTXt, tEXt",)
    with pytest.raises(MalformedFileError):
        vet_bytes("assets/x.png", kinds.IMAGE, buffer.getvalue()[:40], context)


def test_the_manifest_goes_through_its_reader_and_its_fields_are_scanned(context):
    from hubkit.runs.manifest import Manifest

    manifest = Manifest(
        run_id="r1", framework="trl", base_model=BASE_ID, hyperparameters={"output_dir": "/scratch/a/r1"}
    )
    with pytest.raises(LocalPathInFileError) as error:
        vet_bytes("hubkit.json", kinds.MANIFEST, json.dumps(manifest.to_dict()).encode(), context)
    assert "(in field hyperparameters.output_dir)" in _one_line(error)
    with pytest.raises(MalformedFileError) as error:
        vet_bytes(
            "hubkit.json", kinds.MANIFEST, json.dumps({**manifest.to_dict(), "planted": 1}).encode(), context
        )
    assert "unknown fields" in _one_line(error)


def test_metrics_lines_are_scanned_and_rewritten(context):
    lines = b'{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.75}\n'
    assert vet_bytes("metrics.jsonl", kinds.METRICS, lines, context).data == lines
    planted = lines + json.dumps({"step": 3, f"rewards/{HF_TOKEN}": 1.0}).encode() + b"\n"
    with pytest.raises(SecretInFileError) as error:
        vet_bytes("metrics.jsonl", kinds.METRICS, planted, context)
    assert "metrics.jsonl record 3: it holds a Hugging Face token (in a top-level key)" in _one_line(error)


def test_training_events_are_read_scanned_and_written_again(context):
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    def event_file(*events: Event | bytes) -> bytes:
        out = io.BytesIO()
        writer = RecordWriter(out)
        for event in events:
            writer.write(event if isinstance(event, bytes) else event.SerializeToString())
        return out.getvalue()

    def scalar(tag: str, step: int, value: float, wall_time: float = 1.7e9) -> Event:
        return Event(
            wall_time=wall_time,
            step=step,
            summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)]),
        )

    name = "runs/events.out.tfevents.hubkit"
    # Written the way TensorBoard writes, read and written again: the wall times are gone, the scalars stay.
    written = event_file(Event(wall_time=1.7e9, file_version="brain.Event:2"), scalar("reward", 1, 0.5))
    vetted = vet_bytes(name, kinds.TRAINING_EVENTS, written, context).data
    assert vetted == write_scalars({"reward": [(1, 0.5)]}) and vetted != written
    with pytest.raises(SecretInFileError) as error:
        vet_bytes(name, kinds.TRAINING_EVENTS, event_file(scalar(f"rewards/{HF_TOKEN}", 1, 1.0)), context)
    assert f"{name}: it holds a Hugging Face token" in _one_line(error)
    with pytest.raises(LocalPathInFileError):
        vet_bytes(name, kinds.TRAINING_EVENTS, event_file(scalar("/home/alice/run/loss", 1, 1.0)), context)
    with pytest.raises(MalformedFileError, match="not TensorBoard events"):
        vet_bytes(name, kinds.TRAINING_EVENTS, event_file(scalar("reward", 1, 0.5), b"\xff" * 8), context)


def test_benchmark_results_are_read_as_the_hub_reads_them_and_written_again(context):
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    name = ".eval_results/gsm8k.yaml"
    entry = EvalResultEntry(dataset_id="openai/gsm8k", task_id="main", value=0.5, date="2026-12-01")
    data = ("# a comment\n" + yaml.safe_dump(eval_result_entries_to_yaml([entry]))).encode()
    vetted = vet_bytes(name, kinds.BENCHMARK_RESULTS, data, context).data
    assert yaml.safe_load(vetted) == eval_result_entries_to_yaml([entry]) and b"comment" not in vetted
    planted = yaml.safe_dump(
        eval_result_entries_to_yaml([EvalResultEntry(**{**entry.__dict__, "notes": HF_TOKEN})])
    )
    with pytest.raises(SecretInFileError):
        vet_bytes(name, kinds.BENCHMARK_RESULTS, planted.encode(), context)
    for bad in (b"value: 1\n", b"- value: 1\n", b"- dataset: {id: a/b}\n  value: 1\n"):
        with pytest.raises(MalformedFileError):
            vet_bytes(name, kinds.BENCHMARK_RESULTS, bad, context)
    assert kinds.kind_of(name) is kinds.BENCHMARK_RESULTS and kinds.kind_of(".eval_results/../x.yaml") is None


def test_the_context_from_the_environment_knows_the_caches(run_dir, tmp_path):
    cache = tmp_path / "cache-root"
    context = VetContext.for_run(
        run_dir, BASE_ID, None, environ={"HOME": "/home/alice", "HF_HOME": str(cache)}
    )
    assert cache in context.cache_dirs and context.home_dir == Path("/home/alice")
    data = json.dumps({"note": f"loaded from {cache}/hub/models--x"}).encode()
    with pytest.raises(LocalPathInFileError) as error:
        vet_bytes("eval/results.json", kinds.EVAL_RESULTS, data, context)
    assert "the path of a cache folder" in _one_line(error)


def test_kinds_by_place_in_the_repo():
    assert kind_of("checkpoints/global_step_20/adapter_config.json") is kinds.ADAPTER_CONFIG
    assert kind_of("checkpoints/global_step_20/README.md") is None
    assert kind_of("model-00001-of-00002.safetensors") is kinds.MODEL_WEIGHTS
    assert kind_of("assets/accuracy_vs_length.png") is kinds.IMAGE
    assert kind_of("optimizer.pt") is None and kind_of("assets/../x.png") is None
    assert kind_of("app.py", "space") is kinds.SPACE_MODULE and kind_of("app.py") is None
    assert all(
        issubclass(e, UnsafeFileError) for e in (SecretInFileError, OversizedFileError, UnsafeLinkError)
    )


@pytest.mark.parametrize(
    ("name", "kind", "data"),
    [
        ("tokenizer.json", kinds.TOKENIZER, json.dumps({"version": "1.0", "model": {"type": HF_TOKEN}})),
        ("chat_template.jinja", kinds.CHAT_TEMPLATE, "{{ messages " + HF_TOKEN + " }}"),
        (
            "hubkit.json",
            kinds.MANIFEST,
            json.dumps({"run_id": "r", "framework": "trl", "base_model": BASE_ID, HF_TOKEN: 1}),
        ),
        ("chat_template.jinja", kinds.CHAT_TEMPLATE, "{{ messages /home/alice/x }}"),
    ],
)
def test_a_reader_s_message_quoting_a_secret_or_a_path_is_withheld(context, name, kind, data):
    with pytest.raises(UnsafeFileError) as error:
        vet_bytes(name, kind, data.encode(), context)
    message = _one_line(error)
    assert HF_TOKEN[3:] not in message and "/home/alice" not in message and name in message


def test_a_tokenizer_linked_from_a_cache_is_vetted_as_its_target(checkpoint, context, qwen3_tokenizer_dir):
    (checkpoint / "tokenizer.json").unlink()
    (checkpoint / "tokenizer.json").symlink_to(qwen3_tokenizer_dir / "tokenizer.json")
    files, _ = vet_checkpoint(checkpoint, context)
    tokenizer = next(f for f in files if f.path_in_repo == "tokenizer.json")
    assert tokenizer.data == (qwen3_tokenizer_dir / "tokenizer.json").read_bytes()


def test_a_merged_model_s_config_and_index(context, tmp_path):
    config = {
        "model_type": "qwen3",
        "_name_or_path": "/home/alice/qwen",
        "text_config": {"_name_or_path": "/x"},
    }
    published = json.loads(
        vet_bytes("config.json", kinds.MODEL_CONFIG, json.dumps(config).encode(), context).data
    )
    assert published["_name_or_path"] == published["text_config"]["_name_or_path"] == BASE_ID
    index = {"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}
    assert vet_bytes("model.safetensors.index.json", kinds.WEIGHTS_INDEX, json.dumps(index).encode(), context)
    index["weight_map"]["b"] = "../other-run/model.safetensors"
    with pytest.raises(MalformedFileError) as error:
        vet_bytes("model.safetensors.index.json", kinds.WEIGHTS_INDEX, json.dumps(index).encode(), context)
    assert "shard files beside the index" in _one_line(error)


def test_what_a_model_wrote_is_refused_for_secrets_and_this_machines_folders_only(context):
    from hubkit.formats import parquet

    def table(answer: str) -> bytes:
        return parquet.write_table(parquet.table_of({"answer": ["42", answer]}, {"answer": "string"}))

    def samples(answer: str) -> bytes:
        return (json.dumps({"answer": "42"}) + "\n" + json.dumps({"answer": answer}) + "\n").encode()

    # A path's shape in an answer is text a model writes: code, LaTeX, a random model's tokens.
    for written in ("see \\\\frac\\alpha", "open('/scratch/bob/data/x.csv')", "C:\\Users\\me\\x.txt"):
        assert vet_bytes("eval/samples.parquet", kinds.SAMPLES_TABLE, table(written), context)
        assert vet_bytes("eval/samples.jsonl", kinds.EVAL_SAMPLES, samples(written), context)
    # This machine's own folders, by name, and secrets are still refused, naming the row.
    for planted, error in (
        (f"{context.run_dir}/out/x", LocalPathInFileError),
        (f"token {HF_TOKEN}", SecretInFileError),
    ):
        with pytest.raises(error, match="row 2"):
            vet_bytes("eval/samples.parquet", kinds.SAMPLES_TABLE, table(planted), context)
        with pytest.raises(error, match="record 2"):
            vet_bytes("eval/samples.jsonl", kinds.EVAL_SAMPLES, samples(planted), context)
    # Anywhere else the shape of a path is still refused.
    with pytest.raises(LocalPathInFileError):
        vet_bytes(
            "metrics.jsonl", kinds.METRICS, b'{"step": 1, "note": "/scratch/bob/data/x.csv"}\n', context
        )
