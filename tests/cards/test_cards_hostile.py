"""What a card or page shows of text hubkit did not write (a sweep's Collection notes, a sibling's card, what
a model answered) is text, never live markup; a Collection's other items are left out, and however many it
holds the push reads a bounded number; a sibling's card changes only between its markers; an answer naming
a user's home is published with the home masked. Pushed to the local Hub, read back and rendered."""

from __future__ import annotations

import json
import re
import time
from base64 import b64encode
from pathlib import Path

import pytest
from eval_results import write_eval
from markdown_it import MarkdownIt

from hubkit.cards import text
from hubkit.cards.sweep_siblings import SIBLINGS_END, SIBLINGS_START
from hubkit.errors import UnsafeFileError
from hubkit.localhub.storage.collections import CollectionStore
from hubkit.publish import PushRequest, push_run
from hubkit.release.companions import SWEEP_PAGE
from hubkit.runs.eval_results import Sample, model_name
from hubkit.runs.manifest import Manifest, SweepInfo
from tests.support.runs import TINY_SHAPES, make_run

HOSTILE_ANSWERS = (
    "<a href=https://evil.example/a>x</a> a|b",
    "![](https://evil.example/p.png) <img src=https://evil.example/i.png>",
    "[click](https://evil.example/c)\n# heading",
    "plain",
)


def _run(root: Path, base: str, value: float, answers=HOSTILE_ANSWERS, sweep: str | None = None) -> Path:
    """A run of two steps evaluated on 4 problems, every model answering problem i with `answers[i]`."""
    run_dir = make_run(root, (1, 2), base_model=base, shapes=TINY_SHAPES, run_id=f"lp-{value}")
    if sweep is not None:
        manifest = Manifest.load(run_dir)
        manifest.with_updates(sweep=SweepInfo(sweep, "length_penalty_weight", value)).save(run_dir)
    samples = [
        Sample(model_name(step), step, i, f"problem {i}", "4", answers[i], i < 2, 50, False)
        for step in (None, 1, 2)
        for i in range(4)
    ]
    write_eval(run_dir, samples)
    return run_dir


def _push(run_dir: Path, repo_id: str, local_hub):
    request = PushRequest(
        run_dir,
        repo_id=repo_id,
        merged=False,
        space=False,
        endpoint=local_hub.endpoint,
        token=local_hub.token,
    )
    return push_run(request)


def _card(hub_api, repo_id: str, repo_type: str = "model") -> str:
    return Path(hub_api.hf_hub_download(repo_id, "README.md", repo_type=repo_type)).read_text()


def _live_markup(markdown: str) -> list[str]:
    """The links, images and HTML tags a CommonMark renderer (with GFM tables) makes of `markdown` that
    point at evil.example or are not hubkit's own."""
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    tags = re.findall(r"<(?:a|img)\b[^>]*>", html)
    return [t for t in tags if "evil.example" in t] + re.findall(r"<b>|<h1>heading", html)


def test_collection_notes_and_model_answers_are_text_on_every_card_and_page(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, new_repo_id
):
    sweep = "hostile " + new_repo_id.split("/")[1][-30:]
    first, second = make_repo_id("lp0"), make_repo_id("lp1")
    _push(_run(tmp_path / "0", tiny_qwen3.repo_id, 0.0, sweep=sweep), first, local_hub)
    collection = next(c for c in hub_api.list_collections(owner=first.split("/")[0]) if c.title == sweep)
    item = next(i for i in hub_api.get_collection(collection.slug).items if i.item_id == first)
    note = (
        "length_penalty_weight=<img src=//evil.example/v.png> · adapter: [click](https://evil.example/c) "
        "![](https://evil.example/p.png) <b>bold</b> <a href=https://evil.example/a>x</a> a|b"
    )
    hub_api.update_collection_item(collection.slug, item.item_object_id, note=note)

    _push(_run(tmp_path / "1", tiny_qwen3.repo_id, 1.0, answers=("ok",) * 4, sweep=sweep), second, local_hub)
    page = _card(hub_api, SWEEP_PAGE.sweep_repo_id(first.split("/")[0], sweep), "dataset")
    cards = {repo: _card(hub_api, repo) for repo in (first, second)}
    for shown in (page, *cards.values()):
        assert _live_markup(shown) == []
    # The note is listed as its text, on one line; the page's table keeps its columns around the value.
    lines = cards[second].split(SIBLINGS_START)[1].split(SIBLINGS_END)[0].strip().splitlines()
    (listed,) = [line for line in lines if "click" in line]
    assert listed.startswith("- `length_penalty_weight=<img src=//evil.example/v.png>`: ")
    rendered = MarkdownIt("commonmark").render(listed)
    assert (
        "[click](https://evil.example/c) ![](https://evil.example/p.png) &lt;b&gt;bold&lt;/b&gt;" in rendered
    )
    html = MarkdownIt("commonmark").enable("table").render(page)
    row = next(r for r in re.findall(r"<tr>.*?</tr>", html, re.S) if "v.png" in r)
    assert row.count("<td") == 6 and "&lt;img src=//evil.example/v.png&gt;</td>" in row
    # The first run's answers: text in the card's table and the page's, a pipe inside its cell.
    assert "<td>&lt;a href=https://evil.example/a&gt;x&lt;/a&gt; a|b</td>" in html
    card_html = MarkdownIt("commonmark").enable("table").render(cards[first])
    assert "<td>![](https://evil.example/p.png) &lt;img src=https://evil.example/i.png&gt;</td>" in card_html


def test_an_answer_naming_a_users_home_is_published_with_the_home_masked(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id
):
    from datasets import load_dataset

    answers = ("see /home/bob/notes.txt", "C:\\Users\\bob\\a.txt", "/Users/bob/x and /root/y", "plain")
    report = _push(_run(tmp_path / "run", tiny_qwen3.repo_id, 0.0, answers=answers), new_repo_id, local_hub)
    assert report.repos  # published, not refused
    card = _card(hub_api, new_repo_id)
    assert "~/notes.txt" in card and "/home/bob" not in card and "bob" not in card
    samples = load_dataset(f"{new_repo_id}-samples", "eval", split="train", cache_dir=str(tmp_path / "ds"))
    assert sorted(set(samples["answer"])) == ["plain", "see ~/notes.txt", "~/x and ~/y", "~\\a.txt"]
    published = Path(hub_api.hf_hub_download(new_repo_id, "eval/samples.jsonl")).read_text()
    assert {json.loads(line)["answer"] for line in published.splitlines()} == set(samples["answer"])


def test_a_collection_of_other_items_is_read_bounded_and_its_foreign_items_left_out(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, new_repo_id
):
    sweep = "foreign " + new_repo_id.split("/")[1][-30:]
    owner = new_repo_id.split("/")[0]
    theirs, plain, data = "mallory/" + new_repo_id.split("/")[1], make_repo_id("plain"), make_repo_id("data")
    for repo_id, repo_type in ((theirs, "model"), (plain, "model"), (data, "dataset")):
        hub_api.create_repo(repo_id, repo_type=repo_type)
    collection = hub_api.create_collection(sweep, namespace=owner)
    hub_api.add_collection_item(collection.slug, theirs, "model", note="length_penalty_weight=2 · adapter: x")
    hub_api.add_collection_item(collection.slug, plain, "model", note="length_penalty_weight=3 · adapter: y")
    hub_api.add_collection_item(collection.slug, data, "dataset")
    # Nearly as many items as a Collection may hold, added to its store: papers noted as hubkit notes its
    # runs, in the reverse order of their values (ordering them as runs would move each, one call each).
    store, collection_id = CollectionStore(local_hub.root), collection.slug.rsplit("-", 1)[1]
    for i in range(990):
        store.add_item(
            owner, collection_id, f"2401.{i:05d}", "paper", f"length_penalty_weight={990 - i} · adapter: z"
        )

    repo_id = make_repo_id("lp0")
    run_dir = _run(tmp_path / "run", tiny_qwen3.repo_id, 0.0, answers=("ok",) * 4, sweep=sweep)
    since, start = len(local_hub.request_log), time.monotonic()
    _push(run_dir, repo_id, local_hub)
    # Before, each paper was moved into the order of its value, one call each: 989 calls, 51 s here.
    calls = [r for r in local_hub.request_log[since:] if "/collections" in r[1]]
    assert len(calls) < 30 and time.monotonic() - start < 30
    listed = _card(hub_api, repo_id).split(SIBLINGS_START)[1].split(SIBLINGS_END)[0]
    assert theirs not in listed and "2401." not in listed
    page = _card(hub_api, SWEEP_PAGE.sweep_repo_id(owner, sweep), "dataset")
    assert f"Not compared: {text.literal(plain)}: not published by hubkit." in page
    assert theirs not in page


def _commit_raw(local_hub, repo_id: str, path_in_repo: str, data: bytes) -> None:
    """Commit `data` as the Hub's commit API takes it (the client refuses a README that is not UTF-8)."""
    import httpx

    lines = [
        {"key": "header", "value": {"summary": "edited by hand"}},
        {
            "key": "file",
            "value": {"path": path_in_repo, "encoding": "base64", "content": b64encode(data).decode()},
        },
    ]
    response = httpx.post(
        f"{local_hub.endpoint}/api/models/{repo_id}/commit/main",
        content="\n".join(json.dumps(line) for line in lines).encode(),
        headers={"Authorization": f"Bearer {local_hub.token}", "Content-Type": "application/x-ndjson"},
    )
    response.raise_for_status()


def test_a_sibling_cards_bytes_outside_its_list_are_left_as_they_are(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, new_repo_id
):
    sweep = "bytes " + new_repo_id.split("/")[1][-30:]
    first, second, third = make_repo_id("lp0"), make_repo_id("lp1"), make_repo_id("lp2")
    for value, repo_id in ((0.0, first), (1.0, second)):
        run_dir = _run(tmp_path / str(value), tiny_qwen3.repo_id, value, answers=("ok",) * 4, sweep=sweep)
        _push(run_dir, repo_id, local_hub)
    start, end = SIBLINGS_START.encode(), SIBLINGS_END.encode()
    edited = {}
    for repo_id, around in (
        (first, (b"caf\xc3\xa9 \r\n", b"\r\n\t \xe2\x80\x8b")),
        (second, (b"\xff\xfe\xc3(", b"\xf0\x9f")),
    ):
        before, rest = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_bytes().split(start)
        listed, after = rest.split(end)
        edited[repo_id] = (before + around[0], after[:1] + around[1] + after[1:])
        _commit_raw(
            local_hub, repo_id, "README.md", edited[repo_id][0] + start + listed + end + edited[repo_id][1]
        )
    card_of_second = Path(hub_api.hf_hub_download(second, "README.md")).read_bytes()

    run_dir = _run(tmp_path / "2", tiny_qwen3.repo_id, 2.0, answers=("ok",) * 4, sweep=sweep)
    report = _push(run_dir, third, local_hub)
    # A card of UTF-8 text: its list rewritten, every byte around it as it was.
    rewritten = Path(hub_api.hf_hub_download(first, "README.md")).read_bytes()
    before, after = edited[first]
    assert rewritten.startswith(before + start) and rewritten.endswith(end + after)
    assert f"[adapter](https://huggingface.co/{third})".encode() in rewritten.split(start)[1]
    # One the Hub's client cannot commit (not UTF-8): left as it is, and the report says so.
    assert Path(hub_api.hf_hub_download(second, "README.md")).read_bytes() == card_of_second
    assert (
        f"{second}: its card is not UTF-8 text: its list of the sweep's runs was left as it is"
        in report.notes
    )


def test_a_home_in_what_a_model_wrote_is_masked_and_still_refused_in_any_other_file(tmp_path):
    import pytest

    from hubkit.errors import LocalPathInFileError
    from hubkit.formats import parquet
    from hubkit.safety import VetContext, kinds, vet_bytes

    context = VetContext(
        hub_base_id="Qwen/Qwen3-0.6B", run_dir=tmp_path / "run", home_dir=Path("/home/alice")
    )
    answer = "see /home/alice/notes.txt, /home/bob/x and C:\\Users\\bob\\y"
    table = parquet.write_table(parquet.table_of({"answer": [answer]}, {"answer": "string"}))
    published = vet_bytes("eval/samples.parquet", kinds.SAMPLES_TABLE, table, context).data
    assert parquet.string_cells(parquet.read_table(published, "t")) == ["see ~/notes.txt, ~/x and ~\\y"]
    jsonl = vet_bytes(
        "eval/samples.jsonl", kinds.EVAL_SAMPLES, json.dumps({"answer": answer}).encode(), context
    )
    assert json.loads(jsonl.data)["answer"] == "see ~/notes.txt, ~/x and ~\\y"
    # The run directory by name is still refused in an answer, and a home in any other file.
    with pytest.raises(LocalPathInFileError):
        vet_bytes(
            "eval/samples.jsonl", kinds.EVAL_SAMPLES, json.dumps({"a": f"{tmp_path}/run/x"}).encode(), context
        )
    for path, kind, data in (
        ("metrics.jsonl", kinds.METRICS, b'{"step": 1, "note": "/home/bob/x"}\n'),
        ("README.md", kinds.CARD, b"# card\n\nsee /home/bob/notes.txt\n"),
    ):
        with pytest.raises(LocalPathInFileError):
            vet_bytes(path, kind, data, context)


def test_a_card_refused_after_the_repo_was_created_leaves_no_repo(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id
):
    """A card is written once the merge and the repo exist; a path it then holds (one no run file is
    refused for: what a model wrote) refuses the push, and the repo it created for it goes again."""
    answers = ("see /scratch/bob/notes.txt", "plain", "plain", "plain")
    start = len(local_hub.request_log)
    with pytest.raises(
        UnsafeFileError, match=r"^refusing to publish README\.md: it holds a path under /scratch"
    ):
        _push(_run(tmp_path / "run", tiny_qwen3.repo_id, 0.0, answers=answers), new_repo_id, local_hub)
    created = [r for r in local_hub.request_log[start:] if r[0] == "POST" and r[1] == "/api/repos/create"]
    assert created and not hub_api.repo_exists(new_repo_id)
