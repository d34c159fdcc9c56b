"""The local Hub's path and special-file rules agree with git itself: for each name, and each .gitmodules or
.gitattributes content, `git fsck --strict` on a tree holding it decides, and the Hub refuses at least
what git refuses (git's own verdict is computed here, not written down)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hubkit.localhub.git.rules import check_special_file
from hubkit.localhub.storage.exceptions import InvalidInputError
from hubkit.localhub.storage.names import check_path

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(scope="module")
def fsck(tmp_path_factory: pytest.TempPathFactory):
    """`fsck(entries)`: whether `git fsck --strict` finds errors in a commit whose tree holds `entries`,
    (name, content, as_folder) each; a folder holds one file."""
    counter = iter(range(1_000_000))

    def run(entries: list[tuple[str, bytes, bool]]) -> bool:
        git_dir = tmp_path_factory.mktemp("fsck") / f"r{next(counter)}.git"

        def git(*args: str, data: bytes | None = None) -> str:
            done = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=data, capture_output=True)
            return done.stdout.decode().strip() if done.returncode == 0 else ""

        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
        lines = []
        for name, content, as_folder in entries:
            blob = git("hash-object", "-w", "--stdin", data=content)
            if as_folder:
                inner = git("mktree", data=f"100644 blob {blob}\tf\n".encode())
                lines.append(f"040000 tree {inner}\t".encode() + name.encode() + b"\n")
            else:
                lines.append(f"100644 blob {blob}\t".encode() + name.encode() + b"\n")
        tree = git("mktree", data=b"".join(lines))
        git("update-ref", "refs/heads/main", git("commit-tree", tree, "-m", "m"))
        result = subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict"], capture_output=True)
        return result.returncode != 0

    return run


COMMENT = b"# a line any .gitmodules or .gitattributes may hold\n"


def _hub_refuses(path: str, content: bytes = COMMENT) -> bool:
    try:
        check_special_file(check_path(path), content)
    except InvalidInputError:
        return True
    return False


NAMES = [
    ".git", ".GIT", ".Git", "git~1", "GIT~1", ".git.", ".git ", ".git. .", ".git::$INDEX_ALLOCATION", ".git:x",
    "GIT~1 .", "git~1:", "\u200c.git", ".g\u200cit", ".gi\ufefft", ".git\u200d", ".gitmodules", ".GITMODULES",
    "gitmod~1", "gi7eba~1", "gi7eba~9", ".gitmodules.", ".g\u200citmodules", ".gitattributes", "gi7d29~1",
    "gitatt~2",
    # names git accepts
    ".gitx", "git~2", "git~10", "xgit~1", ".gitignore", ". git", "..git", ".git~1", "g\u0131t~1", ".g\u0130t", "normal",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("as_folder", [False, True], ids=["file", "folder"])
def test_a_name_is_refused_exactly_when_git_refuses_it(fsck, name, as_folder):
    path = f"{name}/f" if as_folder else name
    assert _hub_refuses(path) == fsck([(name, COMMENT, as_folder)])


GITMODULES = [
    b'[submodule "x"]\n\turl = --upload-pack=touch /tmp/pwned\n\tpath = x\n',
    b'[SubModule "x"]\n\tURL = -x\n',
    b'[submodule "x"]\n\turl = https://example.com/x.git\n\tpath = -x\n',
    b'[submodule "x"]\n\tupdate = !rm -rf /\n\turl = ./x\n',
    b'[submodule "../x"]\n\turl = ./x\n',
    b'[submodule "x"]\n\turl = ../../:x\n',
    b'[submodule "x"]\n\turl = ./%0aevil\n',
    b'[submodule "x"]\n\turl = "--upload-pack=x"\n',
    b'[submodule "x"]\n\turl = \\\n-x\n',
    b"[submodule.x]\n\turl = -x\n",
    b'[submodule "x"] url = -x\n',
    b'[submodule "x"]\n\turl = http::https://example.com/%0a\n',
    b'[submodule "x"]\n\turl = https://example.com/a%0ab\n',
    # contents git accepts
    b'[submodule "x"]\n\turl = https://example.com/x.git\n\tpath = x\n',
    b'[submodule "x"]\n\turl = git@github.com:a/b.git\n',
    b'[submodule "x"]\n\turl\n',
    b"# just a comment\n",
    b"[core]\n\tfoo = -x\n",
]


@pytest.mark.parametrize("content", GITMODULES)
@pytest.mark.parametrize("name", [".gitmodules", "gitmod~1"])
def test_a_gitmodules_git_refuses_is_refused(fsck, content, name):
    assert _hub_refuses(name, content) == fsck([(name, content, False)])


@pytest.mark.parametrize("length", [2046, 2047, 2048, 3000])
def test_a_gitattributes_line_is_refused_exactly_when_git_refuses_it(fsck, length):
    content = b"*.bin filter=lfs diff=lfs merge=lfs -text\n" + b"a" * length + b"\n"
    assert _hub_refuses(".gitattributes", content) == fsck([(".gitattributes", content, False)])


def test_the_hubs_own_gitattributes_and_a_plain_gitmodules_pass(fsck):
    from hubkit.localhub.git.attributes import DEFAULT_GITATTRIBUTES

    plain = b'[submodule "x"]\n\turl = https://example.com/x.git\n\tpath = x\n'
    files = [(".gitattributes", DEFAULT_GITATTRIBUTES.encode(), False), (".gitmodules", plain, False)]
    assert not fsck(files)
    assert not any(_hub_refuses(name, content) for name, content, _ in files)


def test_the_hub_refuses_what_its_parser_cannot_read_as_git_does(fsck):
    """Outside the plain subset (quotes, escapes, keys outside a section, urls that are not plain), a
    .gitmodules is refused even where git accepts it: a parser reading it differently could let through
    what git would run."""
    for content in (
        b'[submodule "x"]\n\turl = "https://example.com/x.git"\n',
        b"garbage\n",
        b"url = https://example.com/x.git\n",
        b'[submodule "x"]\n\turl = https://exa mple.com/\n',
    ):
        assert not fsck([(".gitmodules", content, False)])
        assert _hub_refuses(".gitmodules", content)
