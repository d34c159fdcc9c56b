"""The package's layout, read from its own source: rooms named for their concern, no import circle, no
arrow from a lower layer to a higher one, no file a newcomer cannot read in one sitting."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hubkit"
# The modules that may stay loose in hubkit/: everything else lives in a package named for its concern.
LOOSE_MODULES = {"__init__.py", "__main__.py", "errors.py", "resources.py", "visible.py"}
MAX_LINES = 500
# Lowest first: a package imports only from lower layers (and from itself). Packages in one layer do not
# import each other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "resources", "visible"}),  # what every package raises, reads and shows
    frozenset({"formats", "rewards", "hub"}),
    frozenset({"runs", "localhub"}),  # the local Hub reads YAML with formats' bounded reader
    frozenset({"adapters", "safety"}),
    frozenset({"release"}),  # a release read back is checked as a run is: the adapters' and safety's checks
    frozenset({"merge"}),  # merging a run's checkpoint prepares its adapter first (merge/checkpoint.py)
    frozenset({"evaluate", "export"}),
    frozenset({"cards"}),
    frozenset({"verify"}),  # a merged model against its adapter: evaluate's loading, the card's merge record
    frozenset({"space"}),
    frozenset({"publish"}),
    frozenset({"integrations", "demo", "cli"}),
    frozenset({"__main__", "__init__"}),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The hubkit modules `path` imports anywhere: functions and TYPE_CHECKING blocks included (a circle
    of type annotations is still a circle a reader walks)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str | None] = set()

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names if alias.name.startswith("hubkit"))
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hubkit")
        ):
            found.update(resolve(f"{node.module}.{alias.name}") for alias in node.names)
    found.discard(None)
    return found  # type: ignore[return-value]


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) - {name} for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(room: str) -> int:
    for number, rooms in enumerate(LAYERS):
        if room in rooms or room.removesuffix(".py") in rooms:
            return number
    raise AssertionError(f"hubkit.{room} is in no layer of tests/test_structure.py: add it where it belongs")


def test_only_the_named_loose_modules_sit_beside_the_packages() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose <= LOOSE_MODULES, (
        f"move {sorted(loose - LOOSE_MODULES)} into a package named for its concern"
    )


def test_no_module_is_longer_than_a_newcomer_reads_in_one_sitting() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these files (over {MAX_LINES} lines): {long}"


def test_no_import_circle_among_hubkit_modules() -> None:
    assert _cycles(_graph()) == []


def test_no_package_imports_from_a_higher_layer() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _room(module) != _room(target) and _layer(_room(target)) >= _layer(_room(module))
    )
    assert upward == []


def test_the_walker_sees_circles_and_lazy_imports(tmp_path: Path) -> None:
    # The checks above are only as good as the import walk: it must see imports inside functions and
    # under TYPE_CHECKING, and Tarjan's walk must report a circle through three modules.
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from hubkit.b import x\n"
        "def f():\n    from hubkit.c import y\n"
    )
    assert _imports(source, {"hubkit.b", "hubkit.c", "hubkit.d"}) == {"hubkit.b", "hubkit.c"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("room", sorted({_room(m) for m in _graph()}))
def test_every_room_has_a_layer(room: str) -> None:
    _layer(room)


def test_no_module_ships_for_the_tests_or_benchmarks_alone() -> None:
    """What ships is what users run: a hubkit module imported only from tests/ or bench/ belongs in
    tests/support/. Modules nobody imports are the entry points (`python -m`, a worker started by path)."""
    graph = _graph()
    modules = set(graph)
    root = PACKAGE.parent
    shipped_users = set().union(*graph.values())
    for folder in ("spaces", "recipes"):
        for path in (root / folder).rglob("*.py"):
            shipped_users |= _imports(path, modules)
    test_users: set[str] = set()
    for folder in ("tests", "bench"):
        for path in (root / folder).rglob("*.py"):
            test_users |= _imports(path, modules)

    def used(module: str) -> bool:
        return any(user == module or user.startswith(module + ".") for user in shipped_users)

    only_tests = sorted(m for m in modules if not used(m) and m in test_users)
    assert only_tests == [], f"used only by tests or benchmarks, move to tests/support/: {only_tests}"
    assert not (PACKAGE / "testing").exists()


def test_the_wheel_holds_no_test_tooling() -> None:
    """setup.py ships `find_packages(include=["hubkit", "hubkit.*"])`: neither tests/ nor a testing package."""
    from setuptools import find_packages

    found = find_packages(str(PACKAGE.parent), include=["hubkit", "hubkit.*"])
    assert "hubkit" in found
    assert not [name for name in found if "testing" in name or "tests" in name]
    assert 'include=["hubkit", "hubkit.*"]' in (PACKAGE.parent / "setup.py").read_text(encoding="utf-8")


def test_no_fault_injector_ships() -> None:
    """The local Hub's failures on purpose live in tests/support/faults.py, injected through its hooks: the
    package holds none of their vocabulary, and `hubkit hub serve` offers no flag for them."""
    found = {
        str(p.relative_to(PACKAGE.parent)): word
        for p in PACKAGE.rglob("*.py")
        for word in ("FaultPlan", "crash_mid_", "drop_mid_upload", "local-hub/faults", "--faults")
        if word in p.read_text(encoding="utf-8")
    }
    assert found == {}, f"fault injection belongs in tests/support/faults.py: {found}"
    assert not (PACKAGE / "localhub" / "faults.py").exists()
    hubkit = Path(sys.executable).parent / "hubkit"
    result = subprocess.run(
        [str(hubkit), "hub", "serve", "--help"], capture_output=True, text=True, check=True
    )
    assert "--root" in result.stdout and "--no-limits" in result.stdout  # the real help, whole
    assert not re.search(r"\bfault", result.stdout, re.IGNORECASE), result.stdout


def test_each_companion_repo_is_named_in_its_table_alone() -> None:
    """A release's repos are one table (`hubkit.release.companions`): no other module spells a suffix in a
    string (``"-merged"``, ``repo_id + "-GGUF"``), and no template writes a repo type's URL prefix."""
    from hubkit.release.companions import COMPANIONS, SWEEP_PAGE

    suffixes = tuple(c.suffix for c in (*COMPANIONS, SWEEP_PAGE))
    table = PACKAGE / "release" / "companions.py"
    found = sorted(
        f"{p.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value[-40:]!r}"
        for p in PACKAGE.rglob("*.py")
        if p != table
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        # an option (--sweep, --no-merged) is not a repo's name
        and any(re.search(rf"(?<![-o]){re.escape(s)}$", node.value) for s in suffixes)
    )
    assert found == [], f"name these repos through hubkit.release.companions: {found}"
    templates = PACKAGE.parent / "model_cards"
    prefixed = [t.name for t in templates.glob("*.j2") if re.search(r"/(datasets|spaces)/\{", t.read_text())]
    assert prefixed == [], f"link these repos with their Companion's url: {prefixed}"
