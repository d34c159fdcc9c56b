"""What a web page the user opens can do to the open local Hub, tried in a real browser (Debian's chromium,
driven by playwright): a page on another loopback address sends no-cors writes and a CORS request with a
token, and a page whose name rebinds to 127.0.0.1 reads the Hub as its own origin. Each request reaches
the Hub (its log says so) and is refused; the repository is unchanged and `git fsck --strict` clean."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from huggingface_hub import HfApi

from hubkit.localhub import LocalHub

ATTACKER_HOST = "127.0.0.3"  # another loopback address than the Hub's (127.0.0.1) and its CDN's (127.0.0.2)
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
BROWSER_ARGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]

# The page's script: every write a page can send without the browser asking the server first, then one
# that needs asking (a CORS preflight). `window.results` says what the page could tell of each.
ATTACK_SCRIPT = """
async (hub) => {
  const results = {};
  const attempt = async (name, url, init) => {
    try {
      const response = await fetch(url, init);
      results[name] = response.type === "opaque" ? "opaque" : "read " + response.status;
    } catch (e) {
      results[name] = "blocked";
    }
  };
  const commit = '{"key":"header","value":{"summary":"from a page"}}\\n' +
    '{"key":"file","value":{"path":"pwned.txt","content":"cHduZWQ=","encoding":"base64"}}\\n';
  await attempt("delete", hub + "/api/repos/delete",
    {method: "POST", mode: "no-cors", body: '{"name":"target","organization":"me"}'});
  await attempt("commit", hub + "/api/models/me/target/commit/main",
    {method: "POST", mode: "no-cors", body: commit});
  await attempt("commit-with-token", hub + "/api/models/me/target/commit/main",
    {method: "POST", mode: "no-cors", headers: {"Authorization": "Bearer page"}, body: commit});
  await attempt("branch", hub + "/api/models/me/target/branch/planted", {method: "POST", mode: "no-cors"});
  const form = new FormData();
  form.append("name", "planted");
  await attempt("create-form", hub + "/api/repos/create", {method: "POST", mode: "no-cors", body: form});
  await attempt("create-cors", hub + "/api/repos/create",
    {method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Bearer page"},
     body: '{"name":"planted"}'});
  await attempt("read-cors", hub + "/api/models/me/target", {});
  return results;
}
"""

REBOUND_SCRIPT = """
async () => {
  const read = await fetch("/api/models/me/target");
  const create = await fetch("/api/repos/create", {method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer page"}, body: '{"name":"rebound"}'});
  return {read: read.status, readBody: await read.text(), create: create.status};
}
"""


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        page = b"<!doctype html><title>an ordinary page</title><p>nothing to see"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def attacker_page() -> Iterator[str]:
    """An unrelated web site on another loopback address: the page the user happens to open."""
    server = ThreadingHTTPServer((ATTACKER_HOST, 0), _PageHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{ATTACKER_HOST}:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[LocalHub]:
    """An open local Hub (no token: the default), holding me/target."""
    with LocalHub(tmp_path / "hub") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo("me/target")
        api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="a.txt", repo_id="me/target")
        yield hub


@pytest.fixture
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed (`make test` installs it)")
    return path


def _statuses(hub: LocalHub, method: str, path: str) -> list[int]:
    return [status for m, p, status in hub.request_log if m == method and p == path]


def _assert_unchanged(hub: LocalHub, head: str) -> None:
    api = HfApi(endpoint=hub.endpoint, token="any")
    assert api.model_info("me/target").sha == head
    assert api.list_repo_files("me/target") == [".gitattributes", "a.txt"]
    assert [b.name for b in api.list_repo_refs("me/target").branches] == ["main"]
    assert not api.repo_exists("me/planted") and not api.repo_exists("me/rebound")
    for git_dir in (Path(hub.root) / "repos").glob("*/*/*.git"):
        fsck = subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict"], capture_output=True)
        assert fsck.returncode == 0, fsck.stderr


def test_a_web_page_cannot_write_to_the_open_hub(hub, attacker_page, chromium):
    from playwright.sync_api import sync_playwright

    head = HfApi(endpoint=hub.endpoint, token="any").model_info("me/target").sha
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.goto(attacker_page)
            results = page.evaluate(ATTACK_SCRIPT, hub.endpoint)
        finally:
            browser.close()
    # The page learns nothing from its no-cors requests, and is not allowed its CORS ones.
    assert results == {
        "delete": "opaque",
        "commit": "opaque",
        "commit-with-token": "opaque",
        "branch": "opaque",
        "create-form": "opaque",
        "create-cors": "blocked",
        "read-cors": "blocked",
    }
    # Each no-cors write reached the Hub, and was refused: not JSON (415), or, with no body, no token (401).
    assert _statuses(hub, "POST", "/api/repos/delete") == [415]
    assert _statuses(hub, "POST", "/api/models/me/target/commit/main") == [
        200,
        415,
        415,
    ]  # the fixture's, then the page's
    assert _statuses(hub, "POST", "/api/models/me/target/branch/planted") == [401]
    assert _statuses(hub, "POST", "/api/repos/create") == [200, 415]
    # The CORS request with a token and a JSON body stopped at its preflight: never sent.
    assert ("OPTIONS", "/api/repos/create", 404) in hub.request_log
    _assert_unchanged(hub, head)


def test_a_page_whose_name_rebinds_to_the_hub_is_refused(hub, chromium):
    """DNS rebinding: `rebound.test` first served the page, now resolves to 127.0.0.1, so the page and the
    Hub share an origin and the page may read and send anything; only the Host it names gives it away."""
    from playwright.sync_api import sync_playwright

    port = urlsplit(hub.endpoint).port
    origin = f"http://rebound.test:{port}"
    head = HfApi(endpoint=hub.endpoint, token="any").model_info("me/target").sha
    # Chromium's own Local Network Access checks would block this page (public, in its eyes) from reaching
    # loopback at all; other browsers have none: turn them off, so that only the Hub stands in the way.
    args = [*BROWSER_ARGS, "--host-resolver-rules=MAP rebound.test 127.0.0.1"]
    args += ["--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=args)
        try:
            page = browser.new_page()
            # The attacker's own server answered the first lookup: the page comes from it.
            page.route(
                f"{origin}/", lambda route: route.fulfill(status=200, content_type="text/html", body="<p>hi")
            )
            page.goto(f"{origin}/")
            results = page.evaluate(REBOUND_SCRIPT)
        finally:
            browser.close()
    assert results["read"] == 421 and "does not answer for the host" in results["readBody"]
    assert '"sha"' not in results["readBody"]
    assert results["create"] == 421
    # Every request arrived, and was refused (Chromium sends a request once more after a 421).
    assert set(_statuses(hub, "GET", "/api/models/me/target")[1:]) == {421}
    assert set(_statuses(hub, "POST", "/api/repos/create")[1:]) == {421}
    _assert_unchanged(hub, head)
