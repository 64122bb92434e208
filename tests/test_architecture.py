"""The import rules of docs/architecture.md, checked on the source (what must never import what),
and the page's table of imports against the code's real imports.

Run as a script (``python tests/test_architecture.py``) to print that table for the page.
"""

import ast
import pathlib
import re

from skbayes import all_estimators

ROOT = pathlib.Path(__file__).resolve().parents[1] / "skbayes"
#: The public estimator modules (skbayes/slang.py, ...), from the registry.
PUBLIC_ESTIMATORS = {e.estimator.__module__.rsplit(".", 1)[1] for e in all_estimators(network=True)}
#: Words that name a method or one of its step sizes (the registry's methods and modules, and a few more).
_WORDS = {"beta", "damping", "rank", "vprop"} | PUBLIC_ESTIMATORS | {e.method for e in all_estimators(network=True)}
METHOD_NAMES = re.compile(r"\b(" + "|".join(sorted(_WORDS)) + r")\b", re.IGNORECASE)
#: How the generated imports table names every public estimator module (one row for all of them).
METHOD_ROW = "<method>"


def _module_name(path):
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path):
    """Absolute names of the skbayes modules a file imports (and of the names it imports
    from them, which may be submodules), annotation-only imports included."""
    return _collect_imports(path, runtime_only=False)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _part(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_engine_packages_never_import_the_estimator_layer():
    """posteriors, _linalg, _curvature, _likelihoods, _prior, _networks, _start, _validation,
    _docs, metrics and exceptions know nothing of estimators, the loop or the families."""
    engine = {"posteriors", "_linalg", "_curvature", "_likelihoods", "_prior", "_networks", "_start", "_validation"}
    engine |= {"_docs", "metrics", "exceptions", "linear_model"}
    forbidden = {"_estimator", "_loop", "_families"} | PUBLIC_ESTIMATORS
    for name, path in MODULES.items():
        if _part(name) in engine:
            bad = {i for i in _imports(path) if _part(i) in forbidden}
            assert not bad, f"{name} imports {bad}"


def test_families_never_import_the_loop_or_the_estimators():
    for name, path in MODULES.items():
        if _part(name) == "_families":
            bad = {i for i in _imports(path) if _part(i) in {"_estimator", "_loop"} | PUBLIC_ESTIMATORS}
            assert not bad, f"{name} imports {bad}"


def test_the_loop_knows_the_family_interface_only():
    imports = _imports(MODULES["skbayes._loop"])
    families = {i for i in imports if _part(i) == "_families"}
    assert families and all(i.startswith("skbayes._families.base") for i in families), families
    code = MODULES["skbayes._loop"].read_text()
    assert not METHOD_NAMES.findall(code), METHOD_NAMES.findall(code)


def test_the_loop_trains_a_state_object_not_the_estimator():
    # _loop works on a TrainingState and LoopSettings; _estimator copies its fitted attributes in and out
    code = MODULES["skbayes._loop"].read_text()
    assert not re.findall(r"\best\b|\bself\.[a-z_]+_\b", code)


def test_public_estimator_modules_are_thin():
    for stem in PUBLIC_ESTIMATORS:
        parts = {_part(i) for i in _imports(MODULES[f"skbayes.{stem}"])}
        assert parts <= {"_docs", "_estimator", "_families"}, (stem, parts)


#: What computes a gradient: autograd (``torch.autograd``, ``enable_grad``, ``requires_grad_``),
#: a backward pass (``.backward(``, an op's ``*_backward``), the dense engine's taped forward
#: pass and weight gradients, the likelihoods' output gradient. Families take every gradient
#: from ``_curvature``.
GRADIENT_NAMES = {"autograd", "backward", "enable_grad", "requires_grad_", "forward_tape", "weight_grads"}
GRADIENT_NAMES |= {"local_reparam_tape", "nll_grad", "vjp", "jacrev", "jacfwd"}


def _gradient_names(path):
    """The names (attributes, variables, imports) of ``GRADIENT_NAMES`` and ``*_backward`` a file uses."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.alias):
            used.update(node.name.split("."))
    return {u for u in used if u in GRADIENT_NAMES or u.endswith("_backward")}


def test_families_compute_no_gradient_themselves():
    """No family calls ``torch.autograd``, ``.backward(`` or the dense engine's backward pass:
    minibatch gradients, per-example gradients and curvature come from ``_curvature``."""
    families = [(name, path) for name, path in MODULES.items() if _part(name) == "_families"]
    assert len(families) >= 6
    for name, path in families:
        assert not _gradient_names(path), (name, sorted(_gradient_names(path)))
        assert ".backward(" not in path.read_text() and "torch.autograd" not in path.read_text(), name


def test_only_the_loop_advances_the_step_counter():
    for name, path in MODULES.items():
        if name != "skbayes._loop":
            assert "t_ +=" not in path.read_text(), name


DOCS = ROOT.parent / "docs" / "architecture.md"
TABLE_START = "<!-- imports table: generated by `python tests/test_architecture.py` -->"
TABLE_END = "<!-- end of imports table -->"


def _runtime_imports(path):
    """Absolute names of the skbayes modules a file imports at run time: without the imports
    under ``if TYPE_CHECKING:`` (annotations only); ``from . import x`` counts as an import of ``x``."""
    return _collect_imports(path, runtime_only=True)


def _collect_imports(path, runtime_only):
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skip = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("skbayes"):
                continue
            if not runtime_only:
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
            elif node.module is None:  # from . import x, y
                out.update(f"{target}.{a.name}" for a in node.names)
            else:
                out.add(target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("skbayes"))
    return out


def _row(part):
    """The table's name of a part: every public estimator module is one row, ``<method>``, so
    that adding a method leaves the table as it is."""
    return METHOD_ROW if part in PUBLIC_ESTIMATORS else part


def import_table(collapse=True):
    """``{part: sorted parts it imports at run time}`` for every part of the package (a top-level
    module or subpackage; ``__init__`` is the package itself), as the docs page lists it: with
    ``collapse``, the public estimator modules as one part, ``<method>``."""
    table = {}
    name_of = _row if collapse else (lambda part: part)
    for name, path in MODULES.items():
        part = name_of(_part(name) or "__init__")
        deps = {name_of(_part(i) or "__init__") for i in _runtime_imports(path)} - {part}
        table.setdefault(part, set()).update(deps)
    return {k: sorted(v) for k, v in sorted(table.items())}


def format_table(table):
    lines = ["| part | imports at run time |", "| --- | --- |"]
    for part, deps in table.items():
        lines.append(f"| `{part}` | {', '.join(f'`{d}`' for d in deps) or '(nothing from skbayes)'} |")
    return "\n".join(lines)


def _documented_table():
    text = DOCS.read_text()
    assert TABLE_START in text and TABLE_END in text, f"{DOCS.name} has no generated imports table"
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()


def test_docs_table_of_imports_matches_the_code():
    """docs/architecture.md's table lists every part's run-time imports exactly (regenerate it
    with ``python tests/test_architecture.py`` after changing imports)."""
    assert _documented_table() == format_table(import_table())


def test_every_public_estimator_module_imports_the_same_parts():
    """The table's one ``<method>`` row stands for every public estimator module exactly."""
    full = import_table(collapse=False)
    rows = {stem: full[stem] for stem in PUBLIC_ESTIMATORS}
    assert len({tuple(v) for v in rows.values()}) == 1, rows
    assert import_table()[METHOD_ROW] == next(iter(rows.values()))


if __name__ == "__main__":
    print(TABLE_START)
    print(format_table(import_table()))
    print(TABLE_END)


def test_families_receive_and_read_only_the_parameters_they_declare():
    """A family gets only the estimator parameters in its ``parameter_constraints`` and its code
    reads no other estimator parameter (``self.<name>``)."""
    import inspect

    for entry in all_estimators(network=True):
        est = entry.estimator()
        family_cls = est._family
        declared = set(family_cls.parameter_constraints)
        family = est._make_family()
        params = set(est.get_params())
        assert params & set(vars(family)) <= declared, (entry.name, sorted(params & set(vars(family)) - declared))
        source = inspect.getsource(inspect.getmodule(family_cls)) + inspect.getsource(
            inspect.getmodule(family_cls.__mro__[-2])
        )
        read = set(re.findall(r"self\.([a-z][a-z_0-9]*)", source)) & params
        assert read <= declared, (entry.name, sorted(read - declared))
