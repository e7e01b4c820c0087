"""Dependencies run one way: tablestore -> catalog -> filestore | logstore, and a package uses another only
through its root (`from filestore import X`, never `from filestore.commit import X`): what it may use is the
root's `__all__`. Checked on every import statement."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tablestore", "catalog", "filestore", "logstore")
ALLOWED = {
    "tablestore": {"tablestore", "catalog", "filestore", "logstore"},
    "catalog": {"catalog", "filestore", "logstore"},
    "filestore": {"filestore"},
    "logstore": {"logstore"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_what_it_may(package: str) -> None:
    violations = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, top in _imports(path):
            if top in PACKAGES and top not in ALLOWED[package]:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    assert not violations, "dependency direction broken:\n" + "\n".join(violations)


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import os\nfrom logstore.errors import LogStoreError\n")
    assert (2, "logstore") in _imports(bad)


def _cross_package_imports(path: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of another project package, as written."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names
                      if a.name.split(".")[0] in PACKAGES and a.name.split(".")[0] != package]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in PACKAGES and top != package:
                found.append((node.lineno, node.module, [a.name for a in node.names]))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_meet_only_at_package_roots(package: str) -> None:
    violations = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module, names in _cross_package_imports(path, package):
            where = f"{path.relative_to(ROOT)}:{line}"
            if "." in module:
                violations.append(f"{where} imports {module}: import from {module.split('.')[0]} instead")
                continue
            exported = set(getattr(importlib.import_module(module), "__all__", ()))
            hidden = [n for n in names if n != "*" and n not in exported]
            if hidden:
                violations.append(f"{where} imports {hidden} from {module}, which its __all__ does not export")
    assert not violations, "a package reached past another's root:\n" + "\n".join(violations)


@pytest.mark.parametrize("package", ("catalog", "filestore", "logstore"))
def test_package_roots_export_what_they_list(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ == sorted(module.__all__, key=str)  # one sorted list, easy to review
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_the_root_check_sees_a_submodule_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("from filestore.commit import FileStoreCommit\nimport logstore.writer\nfrom catalog import X\n")
    assert _cross_package_imports(bad, "tablestore") == [
        (1, "filestore.commit", ["FileStoreCommit"]), (2, "logstore.writer", []), (3, "catalog", ["X"])]



def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            inside |= {id(n) for child in node.body for n in ast.walk(child)}
    return inside


def _module_graph(package: str, *, types: bool) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (anywhere in the file, lazy imports too; `types`: also those
    under `if TYPE_CHECKING:`), leaving out imports of a package's root (`from filestore import X` in
    filestore/*.py re-exports, it does not layer)."""
    roots = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / package).rglob("__init__.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = set() if types else _type_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d.split(".")[0] == package and d not in roots and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """The modules that reach themselves."""
    found = []
    for start in sorted(graph):
        seen: set[str] = set()
        stack = [start]
        while stack:
            for d in graph.get(stack.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        if start in seen:
            found.append(start)
    return found


KNOWN_TYPE_CYCLES: dict[str, list[str]] = {}
"""Cycles through type annotations only, listed so that a new one fails (the file store's parts once took the whole
`FileStore` that creates them; they take a `filestore.context.StoreContext` now)."""


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_between_modules(package: str) -> None:
    cycles = _cycles(_module_graph(package, types=False))
    assert not cycles, f"modules of {package} that import themselves through others: {cycles}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_type_annotation_cycle(package: str) -> None:
    assert _cycles(_module_graph(package, types=True)) == KNOWN_TYPE_CYCLES.get(package, [])


def test_the_cycle_check_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c"]


JAVA_SOURCES = (ROOT / "tablestore" / "spark" / "java", ROOT / "tablestore" / "spark" / "java_versions")
JVM = "tablestore.spark.jvm"
MIRROR = f"{JVM}.mirror"
JAVA_LAYERS = (MIRROR, JVM, f"{JVM}.cdc", f"{JVM}.read", f"{JVM}.write", f"{JVM}.catalog", f"{JVM}.provider",
               "managed")
"""The Spark jar's packages, lowest first; a package uses only those before it. `mirror` holds the JVM twins of
rules Python owns (the key encoder, the bucket function, the data file writer, the materializer's history, the
generated `Contract`), each naming its Python owner, and uses nothing else of the jar, so that a twin reads as a
translation of its Python module alone; the root holds what the other packages share (Hadoop files, task errors,
the Python source bridge) and the upsert materializer operator; `read` the raw-split reader; `write` the JVM
writer; `catalog` the SQL catalog and the one table class both front doors load (its scans, clustered writes,
procedures); `provider` the `format("managed")` data source and its own catalog, which load that table; `managed`
the name Spark looks the source up by."""
_JAVA_REF = re.compile(r"\b((?:tablestore\.spark\.jvm|managed)(?:\.[a-z]\w*)*)\.(?:[A-Z]\w*|\*)")


def _java_package(text: str) -> str:
    found = re.search(r"^package\s+([\w.]+)\s*;", text, flags=re.M)
    assert found, "a Java source without a package"
    return found.group(1)


def _java_references(text: str) -> set[str]:
    """The tablestore packages a Java source names (imports and fully qualified names), comments left out."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    code = re.sub(r"^package[^\n]*", "", code, flags=re.M)
    return {m.group(1) for m in _JAVA_REF.finditer(code)}


def test_java_packages_depend_downwards_only() -> None:
    violations = []
    for root in JAVA_SOURCES:
        for path in sorted(root.rglob("*.java")):
            text = path.read_text()
            package = _java_package(text)
            assert package in JAVA_LAYERS, f"{path.relative_to(ROOT)}: package {package} is in no layer"
            level = JAVA_LAYERS.index(package)
            for used in sorted(_java_references(text) - {package}):
                if used not in JAVA_LAYERS or JAVA_LAYERS.index(used) > level:
                    violations.append(f"{path.relative_to(ROOT)} ({package}) uses {used}")
    assert not violations, "the jar's package direction broken:\n" + "\n".join(violations)


def test_the_java_check_sees_an_upward_reference() -> None:
    source = ("package tablestore.spark.jvm.write;\nimport tablestore.spark.jvm.catalog.PythonService;\n"
              "// tablestore.spark.jvm.provider.ProviderTable in a comment\n"
              "class X { Object p = tablestore.spark.jvm.read.RawSplits.newPlanFile(); }\n")
    assert _java_package(source) == f"{JVM}.write"
    assert _java_references(source) == {f"{JVM}.catalog", f"{JVM}.read"}


_JAVA_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def test_java_sources_spell_no_name_python_owns() -> None:
    """Every name the jar shares with Python (tablestore/spark/jvm_contract.py) reaches Java through the generated
    `Contract` class: a Java string literal equal to one of them is a second declaration."""
    from tablestore.spark.jvm_contract import jvm_constants

    owned = {value: name for name, value in jvm_constants().items()}
    violations = []
    for root in JAVA_SOURCES:
        for path in sorted(root.rglob("*.java")):
            code = re.sub(r"/\*.*?\*/|//[^\n]*", "", path.read_text(), flags=re.S)
            for literal in _JAVA_STRING.findall(code):
                if literal in owned:
                    violations.append(f"{path.relative_to(ROOT)}: \"{literal}\" (use Contract.{owned[literal]})")
    assert not violations, "a name Python owns spelled in Java:\n" + "\n".join(violations)


def test_the_generated_contract_has_every_name_once() -> None:
    from tablestore.spark.jvm_contract import java_source, jvm_constants

    constants = jvm_constants()
    assert len(set(constants.values())) == len(constants)   # two names for one value would hide a mix-up
    source = java_source()
    for name, value in constants.items():
        assert f'public static final String {name} = "{value}";' in source


_PYTHON_OWNER = re.compile(r"Python owner: \{@code ([\w./]+\.py)\}\.")
_JAVA_TYPE = re.compile(r"^(?:public\s+)?(?:final\s+|abstract\s+)*(?:class|interface|enum|record)\s+\w+", flags=re.M)


def _class_doc(text: str) -> str:
    """The text of the Javadoc right before a Java source's first type declaration, one line ("" when none)."""
    declared = _JAVA_TYPE.search(text)
    head = text[:declared.start()].rstrip() if declared else ""
    if not head.endswith("*/") or "/**" not in head:
        return ""
    doc = head[head.rfind("/**") + 3:-2]
    return " ".join(line.strip().lstrip("*").strip() for line in doc.splitlines()).strip()


def _python_owner(text: str) -> str | None:
    """The Python file a mirror class names as the first words of its class Javadoc, or None."""
    found = _PYTHON_OWNER.match(_class_doc(text))
    return found.group(1) if found else None


def test_every_mirror_names_its_python_owner_and_nothing_else_claims_one() -> None:
    """The Java classes that implement a Python module's rules again live in one package, each naming its Python
    owner in one form (package-info.java), so a change to a Python rule finds its twin there and nowhere else."""
    from tablestore.spark.jvm_contract import java_source

    sources = {"generated Contract.java": java_source()}
    for root in JAVA_SOURCES:
        sources |= {str(p.relative_to(ROOT)): p.read_text() for p in sorted(root.rglob("*.java"))}
    mirrors, violations = [], []
    for name, text in sources.items():
        if _java_package(text) != MIRROR:
            if "Python owner:" in text:
                violations.append(f"{name}: says \"Python owner:\" outside {MIRROR}")
        elif not name.endswith("package-info.java"):
            mirrors.append(name)
            owner = _python_owner(text)
            if owner is None:
                violations.append(f"{name}: its class Javadoc does not begin with \"Python owner: {{@code <file>}}.\"")
            elif not (ROOT / owner).is_file():
                violations.append(f"{name}: its Python owner {owner} is no file of the repository")
    assert len(mirrors) >= 5, mirrors   # the key encoder, the bucket function, the data file, the history, Contract
    assert not violations, "a Java mirror of a Python rule out of place or unnamed:\n" + "\n".join(violations)


def test_the_owner_check_reads_the_class_javadoc() -> None:
    source = ("package tablestore.spark.jvm.mirror;\nimport x.Y;\n/** A file comment. */\n\n/**\n"
              " * Python owner: {@code filestore/bucket.py}. The bucket.\n *\n * <p>More.\n */\n"
              "public final class B {\n    /** Python owner: {@code filestore/other.py}. */\n    class C {}\n}\n")
    assert _python_owner(source) == "filestore/bucket.py"
    assert _python_owner(source.replace("Python owner: ", "The owner: ")) is None
    assert _python_owner("package p;\n/** The bucket (Python owner: {@code filestore/bucket.py}.) */\nclass B {}\n"
                         ) is None   # not the first words: the form is one, so a reader finds it
    assert _python_owner("package p;\nclass B {}\n") is None
