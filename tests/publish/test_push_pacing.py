"""A push's API calls within the Hub's window: a 200-checkpoint release against a local Hub that enforces a
free account's API quota (scaled down to seconds) and answers with `RateLimit` headers completes in one
invocation, waiting where the headers say, with no 429 on any API call; past `--max-wait` it stops in one
line saying when to run it again."""

from __future__ import annotations

import re
import time

import httpx2
import pytest
from helpers import push_adapters
from huggingface_hub import HfApi
from test_push_limits import REPO_ID, _free_hub, _one_error_line

from hubkit.errors import RateLimitedError
from hubkit.hub.pacing import PACER, RESERVE, Pacer
from tests.support.runs import TINY_SHAPES, make_run


def _is_api_call(path: str) -> bool:
    """The Hub's "api" bucket, as the local Hub counts it (its own `/api/local-hub/` aside)."""
    path = path.split("?")[0]
    return (path.startswith("/api/") and not path.startswith("/api/local-hub/")) or ".git/info/lfs/" in path


def test_two_hundred_checkpoints_stay_within_a_free_accounts_api_window(tmp_path, tiny_qwen3, caplog):
    """The free plan's 1,000 calls per 300 s, scaled to 250 per 3 s (the same calls per window's share of a
    push: the push needs about 4 calls per checkpoint, so 200 checkpoints fill about 3.3 windows either way,
    and the waits are the headers' `t`, seconds instead of minutes)."""
    steps = tuple(range(1, 201))
    run_dir = make_run(tmp_path / "runs", steps, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    limits = "free.api_calls=250,api_window=3,commits_per_repo=off"
    with _free_hub(tmp_path / "hub", tiny_qwen3, limits) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        start = len(hub.request_log)
        calls_before, waits_before = sum(PACER.stats.calls.values()), PACER.stats.waits
        started = time.monotonic()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        took = time.monotonic() - started
        log = hub.request_log[start:]
        branches = {b.name for b in api.list_repo_refs(REPO_ID).branches}
    api_calls = [(m, p, s) for m, p, s in log if _is_api_call(p)]
    refused = [(m, p) for m, p, s in api_calls if s == 429]
    assert not refused, refused[:5]
    assert branches == {"main", *(f"step-{s}" for s in steps)}
    waits = [r.getMessage() for r in caplog.records if "for it to reset" in r.getMessage()]
    # More calls than one window holds: the push waited, each time saying until when.
    assert len(api_calls) > 250 and waits, (len(api_calls), waits)
    assert all(re.search(r"waiting until \d\d:\d\d:\d\d UTC \([0-3] s\)", w) for w in waits), waits
    # The calls a checkpoint costs: its branch, its commit, its card's YAML check, and the commit's
    # question about its small files; the weights are sent to main in groups, not one call each.
    assert len(api_calls) <= 4 * len(steps) + 40, len(api_calls)
    counted = sum(PACER.stats.calls.values()) - calls_before
    # Every call the Hub counted was counted by the client first (hf_xet's write tokens included).
    assert counted >= len(api_calls), (counted, len(api_calls))
    print(
        f"\n200 checkpoints at 250 API calls per 3 s (reserve {RESERVE}): 1 invocation, {len(log)} requests, "
        f"{len(api_calls)} API calls (the client counted {counted}), {PACER.stats.waits - waits_before} waits, "
        f"no 429, {took:.1f} s"
    )


def test_a_window_that_resets_after_max_wait_stops_the_push_in_one_line(tmp_path, tiny_qwen3, capsys):
    run_dir = make_run(tmp_path / "runs", (1, 2, 3), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3, "free.api_calls=20,api_window=3600") as hub:
        capsys.readouterr()
        start = len(hub.request_log)
        assert push_adapters(run_dir, REPO_ID, hub.endpoint, "--max-wait", "5") == 1
        error = _one_error_line(capsys)
        log = hub.request_log[start:]
    assert not [p for _m, p, s in log if _is_api_call(p) and s == 429]
    assert error.startswith("Error: the Hub's window of api calls is spent"), error
    assert re.search(r"commits are left: run the push again after \d\d:\d\d:\d\d UTC", error), error
    assert "--max-wait" in error


def test_one_accounts_spent_window_holds_none_of_anothers_calls():
    """The Hub counts each account apart: a window another token spent (or an anonymous caller's) is not
    this token's, so its calls go out at once; the spent account's own call past the reserve would wait."""
    pacer = Pacer()
    pacer.max_wait = 0.0  # a wait would raise instead of sleeping
    url = "http://127.0.0.1:9/api/whoami-v2"
    spent = httpx2.Request("GET", url, headers={"Authorization": "Bearer hf_spent"})
    pacer.after(httpx2.Response(429, headers={"RateLimit": '"api";r=0;t=300'}, request=spent))
    for headers in ({"Authorization": "Bearer hf_other"}, {}):
        pacer.before(httpx2.Request("GET", url, headers=headers))
    with pytest.raises(RateLimitedError, match="window of api calls is spent"):
        pacer.before(spent)
