"""`.gitignore` applied at preupload as the Hub applies it, through the real client: matching files are
left out of the commit."""

from __future__ import annotations


def test_gitignore_drops_matching_paths_as_on_the_hub(hub_api, new_repo_id, tmp_path):
    """The repo's .gitignore, or the one a commit adds, decides `shouldIgnore`; the client then leaves the
    files out without an error."""
    hub_api.create_repo(new_repo_id)
    rules = "# logs\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/*.tmp\n"
    hub_api.upload_file(path_or_fileobj=rules.encode(), path_in_repo=".gitignore", repo_id=new_repo_id)
    folder = tmp_path / "run"
    for path in (
        "a.log",
        "keep.log",
        "sub/b.log",
        "build/x.bin",
        "src/build/y.txt",
        "top.txt",
        "sub/top.txt",
        "docs/a/b/c.tmp",
        "ok.txt",
    ):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(path)
    hub_api.upload_folder(folder_path=folder, repo_id=new_repo_id)
    assert sorted(hub_api.list_repo_files(new_repo_id)) == [
        ".gitattributes",
        ".gitignore",
        "keep.log",
        "ok.txt",
        "sub/top.txt",
    ]
    # `docs/**/*.tmp` matches docs/c.tmp too: `**/` is zero or more directories.
    # A commit that brings its own .gitignore is judged by it (the client sends it with the preupload).
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").write_text("*.bin\n")
    (other / "w.bin").write_bytes(b"w")
    (other / "again.log").write_text("now kept")
    hub_api.upload_folder(folder_path=other, repo_id=new_repo_id)
    files = hub_api.list_repo_files(new_repo_id)
    assert "again.log" in files and "w.bin" not in files
