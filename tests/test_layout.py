"""Imports point one way: kernels <- transcribe <- streaming; web holds assets only.

streaming may import kettle.web only to find the asset folder; web imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Which project packages each package may import.
ALLOWED = {
    "kernels": set(),
    "transcribe": {"kernels", "transcribe"},
    # The server locates the page's assets through the kettle.web package.
    "streaming": {"kernels", "transcribe", "streaming", "web"},
    "web": set(),
}


def _absolute_imports(path: Path) -> list[list[str]]:
    """Every absolute import of a file, anywhere in it, as dotted parts."""
    found: list[list[str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(alias.name.split(".") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module.split("."))
    return found


def _project_imports(path: Path) -> set[str]:
    return {p[1] for p in _absolute_imports(path) if p[0] == "kettle" and len(p) > 1}


def test_import_arrows_point_one_way() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            bad = _project_imports(path) - allowed
            if bad:
                wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)


def test_kernels_use_no_relative_imports_outside() -> None:
    for path in (ROOT / "kernels").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1, f"{path} reaches outside kernels/"


# Inside kettle.streaming: which sub-packages each sub-package may import.
# core <- engine <- server; core <- protocols <- server; the client stands apart; cli may
# import anything. Imports under `if TYPE_CHECKING:` count too, except where noted.
STREAMING_ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "protocols": {"core", "protocols"},
    "server": {"core", "engine", "protocols", "server"},
    "client": {"client"},
    "cli": {"core", "engine", "protocols", "server", "client", "cli"},
}


def _streaming_imports(path: Path) -> set[str]:
    return {
        p[2] if len(p) > 2 else "<facade>"
        for p in _absolute_imports(path)
        if p[:2] == ["kettle", "streaming"]
    }


def test_streaming_layers_point_one_way() -> None:
    wrong = []
    for package, allowed in STREAMING_ALLOWED.items():
        for path in sorted((ROOT / "streaming" / package).rglob("*.py")):
            bad = _streaming_imports(path) - allowed
            if bad:
                wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)


def test_streaming_has_no_loose_modules() -> None:
    # Every module lives in the sub-package of its layer; only the facade sits at the top.
    loose = sorted(p.name for p in (ROOT / "streaming").glob("*.py") if p.name != "__init__.py")
    assert not loose, loose


def _runtime_imports(path: Path, package: str) -> set[str]:
    """Modules of kettle.streaming imported at import time (not inside functions or
    `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("kettle.streaming."):
                found.add(node.module)
                for alias in node.names:
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kettle.streaming."))
    return found


def test_streaming_has_no_import_cycle() -> None:
    # The server's modules once held a cycle together with imports inside functions; none
    # is left at import time either.
    modules = {}
    for path in (ROOT / "streaming").rglob("*.py"):
        rel = path.relative_to(ROOT / "streaming").with_suffix("")
        name = "kettle.streaming." + ".".join(rel.parts)
        name = name.removesuffix(".__init__")
        modules[name] = path
    graph = {
        name: {dep for dep in _runtime_imports(path, name) if dep in modules and dep != name}
        for name, path in modules.items()
    }
    # Functions that import lazily are allowed in the CLI only (to keep `kettle --help` fast).
    for name, path in modules.items():
        if ".cli." in name + ".":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith(
                        "kettle.streaming"
                    ):
                        graph[name].add(inner.module or "")
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle.extend([*trail[trail.index(dep) :], dep] if dep in trail else [node, dep])
                return True
            if dep not in state and visit(dep, [*trail, dep]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if start not in state and visit(start, [start]):
            break
    assert not cycle, " -> ".join(cycle)


def test_tests_mirror_the_source_tree() -> None:
    # tests/streaming/<dir>/test_<module>.py sits where streaming/<dir>/<module>.py does.
    # Files named test_<module>_<suffix>.py (test_session_model.py) or named for no module
    # (test_cross_protocol.py) are not checked.
    modules: dict[str, set[Path]] = {}
    for path in (ROOT / "streaming").rglob("*.py"):
        if path.stem != "__init__":
            modules.setdefault(path.stem, set()).add(path.parent.relative_to(ROOT / "streaming"))
    wrong = []
    for test in sorted((ROOT / "tests" / "streaming").rglob("test_*.py")):
        folders = modules.get(test.stem.removeprefix("test_"))
        where = test.parent.relative_to(ROOT / "tests" / "streaming")
        if folders and where not in folders:
            wrong.append(f"{test.relative_to(ROOT)} should sit in {sorted(map(str, folders))}")
    assert not wrong, "\n".join(wrong)


# -- no import cycle inside a sub-package ---------------------------------------------------


def _modules(top: str) -> dict[str, Path]:
    """kettle.<top>'s modules by dotted name (a package by its own name), with their files."""
    found = {}
    for path in (ROOT / top).rglob("*.py"):
        rel = path.relative_to(ROOT / top).with_suffix("")
        found[".".join(("kettle", top, *rel.parts)).removesuffix(".__init__")] = path
    return found


def _every_import(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules a file imports anywhere in it: at import time, under
    `if TYPE_CHECKING:` and inside functions alike (`from pkg import mod` names `mod`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if inner in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in modules}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph (its nodes in order, the first repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, trail: list[str]) -> list[str]:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*trail[trail.index(dep) :], dep]
            if dep not in state and (found := visit(dep, [*trail, dep])):
                return found
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return []


def _sub_packages() -> list[tuple[str, str]]:
    """Every sub-package of streaming and transcribe, as (top, dotted name)."""
    return [
        (top, ".".join(("kettle", top, *path.parent.relative_to(ROOT / top).parts)))
        for top in ("streaming", "transcribe")
        for path in sorted((ROOT / top).glob("*/__init__.py"))
    ]


def test_sub_packages_have_no_import_cycle() -> None:
    # Inside one sub-package (kettle.streaming.server, ...) the modules' imports form no
    # cycle, counting those under `if TYPE_CHECKING:` and inside functions: each module
    # can be read (and tested) knowing only the ones below it.
    cycles = []
    for top, package in _sub_packages():
        modules = _modules(top)
        inside = {name: path for name, path in modules.items() if name.startswith(package + ".")}
        graph = {
            name: {dep for dep in _every_import(path, modules) if dep in inside and dep != name}
            for name, path in inside.items()
        }
        cycle = _cycle(graph)
        if cycle:
            cycles.append(" -> ".join(name.removeprefix(package + ".") for name in cycle))
    assert not cycles, "\n".join(cycles)


def test_no_test_module_imports_another() -> None:
    # What several test modules share lives in a conftest.py or in a helper module named for
    # its job (tests/containers.py, tests/streaming/protocols/driver.py), never in a test_*.py
    # that another imports: a test file is run by pytest, not read by its neighbours.
    wrong = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        package = path.relative_to(ROOT).parent.parts
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else ()
                module = ".".join([*base, *filter(None, (node.module or "").split("."))])
                names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests" and any(p.startswith("test_") for p in parts):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
                    break


# Inside kettle.streaming.protocols: a vendor's package (deepgram/, openai/, ...) imports the
# shared modules beside it (base, handshake, fields, limits, lifecycle, params, words,
# error_codes) and itself, never another vendor's; the shared modules import no vendor's.
PROTOCOLS = ROOT / "streaming" / "protocols"


def _protocol_imports(path: Path) -> set[str]:
    """The parts of kettle.streaming.protocols a file imports: a vendor package's name, or a
    shared module's as "shared:<name>"."""
    found: set[str] = set()
    for parts in _absolute_imports(path):
        if parts[:3] != ["kettle", "streaming", "protocols"] or len(parts) < 4:
            continue
        found.add(parts[3] if (PROTOCOLS / parts[3]).is_dir() else f"shared:{parts[3]}")
    return found


def test_protocol_vendors_import_only_the_shared_modules() -> None:
    vendors = sorted(p.name for p in PROTOCOLS.iterdir() if (p / "__init__.py").exists())
    assert vendors == ["assemblyai", "deepgram", "kettle_v1", "openai", "wyoming"]
    wrong = []
    for path in sorted(PROTOCOLS.rglob("*.py")):
        rel = path.relative_to(PROTOCOLS)
        own = rel.parts[0] if len(rel.parts) > 1 else None
        bad = {i for i in _protocol_imports(path) if not i.startswith("shared:") and i != own}
        if bad:
            wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)


# Inside kettle.transcribe: the shared modules at the top (errors, types, words, transcript)
# <- model <- audio <- files; speakers <- files; corpus runs the file pipeline on Ray
# (corpus -> files, audio); cli, the commands, sits on all of them. Imports inside functions
# count too.
TRANSCRIBE = ROOT / "transcribe"
TRANSCRIBE_SHARED = {"errors", "types", "words", "transcript"}
TRANSCRIBE_ALLOWED = {
    "model": {"model"},
    "audio": {"audio", "model"},
    "speakers": {"speakers"},
    "files": {"files", "model", "audio", "speakers"},
    "corpus": {"corpus", "files", "audio"},
    "cli": {"cli", "corpus", "files", "audio", "speakers", "model"},
}


def _transcribe_imports(path: Path) -> set[str]:
    """The parts of kettle.transcribe a file imports: a sub-package's name, or "shared"."""
    found: set[str] = set()
    for parts in _absolute_imports(path):
        if parts[:2] != ["kettle", "transcribe"] or len(parts) < 3:
            continue
        found.add(parts[2] if (TRANSCRIBE / parts[2]).is_dir() else "shared")
    return found


def test_transcribe_sub_packages_point_one_way() -> None:
    packages = {p.name for p in TRANSCRIBE.iterdir() if (p / "__init__.py").exists()}
    shared = {p.stem for p in TRANSCRIBE.glob("*.py") if p.stem != "__init__"}
    assert packages == set(TRANSCRIBE_ALLOWED) and shared == TRANSCRIBE_SHARED
    wrong = []
    for path in sorted(TRANSCRIBE.rglob("*.py")):
        rel = path.relative_to(TRANSCRIBE)
        if len(rel.parts) == 1:  # a shared module: only the others
            allowed = {"shared"}
        else:
            allowed = TRANSCRIBE_ALLOWED[rel.parts[0]] | {"shared"}
        bad = _transcribe_imports(path) - allowed
        if bad:
            wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)
