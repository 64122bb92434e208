"""The import rules of docs/architecture.md, checked on the source (what must never import what)."""

import ast
import pathlib
import re

from skbayes import all_estimators

ROOT = pathlib.Path(__file__).resolve().parents[1] / "skbayes"
#: The public estimator modules (skbayes/slang.py, ...), from the registry.
PUBLIC_ESTIMATORS = {e.estimator.__module__.rsplit(".", 1)[1] for e in all_estimators(network=True)}
METHOD_NAMES = re.compile(r"\b(beta|damping|rank|slang|kfac|ekfac|vadam|vprop|vogn|bbb|dropout)\b", re.IGNORECASE)


def _module_name(path):
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path):
    """Absolute names of the skbayes modules a file imports."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("skbayes"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("skbayes"))
    return out


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _room(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_engine_rooms_never_import_the_estimator_layer():
    """posteriors, _linalg, _curvature, _likelihoods, _prior, _networks, _init, _validation,
    _docs, metrics and exceptions know nothing of estimators, the loop or the families."""
    engine = {"posteriors", "_linalg", "_curvature", "_likelihoods", "_prior", "_networks", "_init", "_validation"}
    engine |= {"_docs", "metrics", "exceptions", "linear_model"}
    forbidden = {"_estimator", "_loop", "_families"} | PUBLIC_ESTIMATORS
    for name, path in MODULES.items():
        if _room(name) in engine:
            bad = {i for i in _imports(path) if _room(i) in forbidden}
            assert not bad, f"{name} imports {bad}"


def test_families_never_import_the_loop_or_the_estimators():
    for name, path in MODULES.items():
        if _room(name) == "_families":
            bad = {i for i in _imports(path) if _room(i) in {"_estimator", "_loop"} | PUBLIC_ESTIMATORS}
            assert not bad, f"{name} imports {bad}"


def test_the_loop_knows_the_family_interface_only():
    imports = _imports(MODULES["skbayes._loop"])
    families = {i for i in imports if _room(i) == "_families"}
    assert families and all(i.startswith("skbayes._families.base") for i in families), families
    code = MODULES["skbayes._loop"].read_text()
    assert not METHOD_NAMES.findall(code), METHOD_NAMES.findall(code)


def test_public_estimator_modules_are_thin():
    for stem in PUBLIC_ESTIMATORS:
        rooms = {_room(i) for i in _imports(MODULES[f"skbayes.{stem}"])}
        assert rooms <= {"_docs", "_estimator", "_families"}, (stem, rooms)


def test_only_the_loop_advances_the_step_counter():
    for name, path in MODULES.items():
        if name != "skbayes._loop":
            assert "t_ +=" not in path.read_text(), name
