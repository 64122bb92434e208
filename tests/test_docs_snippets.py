"""Every ```python block of the documentation runs as written.

The blocks of ``docs/*.md`` and ``README.md`` are extracted and each is executed on its own:
a fresh namespace (so a block that uses a name it does not define fails), one torch thread,
matplotlib's non-interactive ``Agg`` backend and a temporary working directory. A failure
names the page and the line of the block, and the traceback points at the line in the page.

A block that cannot run here on purpose (it needs a GPU, a dask cluster or a data set that is
not installed) carries a marker on the line just above its opening fence::

    <!-- skip-test: needs a CUDA GPU -->

A block that needs an optional package, or a release of a dependency newer than the oldest
one skbayes supports, names it instead, and is skipped where it is missing or older::

    <!-- requires: skops -->
    <!-- requires: scikit-learn>=1.8 -->

Such blocks are reported as skipped with their reason (``pytest -rs``); a marker without a
reason is an error. Other fenced blocks (``bash``, ``text``, untagged) are not run.
"""

import re
import warnings
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_SKIP = re.compile(r"^\s*<!--\s*skip-test:(.*?)-->\s*$")
_REQUIRES = re.compile(r"^\s*<!--\s*requires:\s*([A-Za-z0-9_.-]+)\s*(?:>=\s*([0-9.]+))?\s*-->\s*$")


def _version(text):
    """The leading release numbers of a version string ('1.8.0rc1' -> (1, 8, 0))."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def unmet_requirement(dist, minimum=None):
    """Why a block that needs the distribution ``dist`` (at least ``minimum``) cannot run here,
    or None when it can."""
    try:
        installed = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return f"needs {dist} (not installed)"
    if minimum and _version(installed) < _version(minimum):
        return f"needs {dist}>={minimum} ({installed} installed)"
    return None


def extract_blocks(text):
    """The ```python blocks of a Markdown text.

    Returns a list of ``(line, code, skip_reason)``: ``line`` is the 1-based line of the opening
    fence, ``code`` the block's source (its indentation removed) and ``skip_reason`` the reason
    of a ``<!-- skip-test: ... -->`` marker on the nearest non-blank line above the fence, or
    ``None``; a ``<!-- requires: ... -->`` marker gives the reason when the requirement is not
    met here, else ``None``. Blocks inside another fenced block (e.g. a Markdown example in a
    ``text`` block) are not extracted.
    """
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence, lang = match.groups()
        end = i + 1
        while end < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        if lang.lower() in ("python", "py"):
            body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : end]]
            above = i - 1
            while above >= 0 and not lines[above].strip():
                above -= 1
            skip = _SKIP.match(lines[above]) if above >= 0 else None
            reason = skip.group(1).strip() if skip else None
            if skip and not reason:
                raise ValueError(f"line {above + 1}: a skip-test marker needs a reason")
            requires = _REQUIRES.match(lines[above]) if above >= 0 else None
            if requires:
                reason = unmet_requirement(*requires.groups())
            blocks.append((i + 1, "\n".join(body) + "\n", reason))
        i = end + 1
    return blocks


def _collect():
    params = []
    for page in PAGES:
        rel = page.relative_to(ROOT).as_posix()
        for line, code, reason in extract_blocks(page.read_text(encoding="utf-8")):
            marks = [pytest.mark.skip(reason=f"{rel}:{line}: {reason}")] if reason else []
            params.append(pytest.param(rel, line, code, id=f"{rel}:{line}", marks=marks))
    return params


BLOCKS = _collect()


def test_pages_have_blocks():
    """The extraction finds the blocks (a broken pattern would make the suite pass vacuously)."""
    assert len(BLOCKS) >= 20
    assert any(p.values[0] == "README.md" for p in BLOCKS)


def test_extract_blocks():
    text = "\n".join(
        [
            "text",
            "```python",
            "x = 1",
            "```",
            "<!-- skip-test: needs a GPU -->",
            "",
            "```python",
            "import cuda_only",
            "```",
            "````text",
            "```python",
            "not extracted",
            "```",
            "````",
            "- item",
            "",
            "  ```python",
            "  y = 2",
            "  ```",
            "```bash",
            "ls",
            "```",
        ]
    )
    assert extract_blocks(text) == [
        (2, "x = 1\n", None),
        (7, "import cuda_only\n", "needs a GPU"),
        (17, "y = 2\n", None),
    ]
    with pytest.raises(ValueError, match="needs a reason"):
        extract_blocks("<!-- skip-test: -->\n```python\npass\n```\n")


def test_requires_markers():
    """A block that needs a package runs where it is installed and recent enough, else is skipped."""
    text = "\n".join(
        [
            "<!-- requires: pytest -->",
            "```python",
            "a = 1",
            "```",
            "<!-- requires: pytest>=7 -->",
            "```python",
            "b = 1",
            "```",
            "<!-- requires: pytest>=9999.1 -->",
            "```python",
            "c = 1",
            "```",
            "<!-- requires: no-such-distribution -->",
            "```python",
            "d = 1",
            "```",
        ]
    )
    installed = metadata.version("pytest")
    assert extract_blocks(text) == [
        (2, "a = 1\n", None),
        (6, "b = 1\n", None),
        (10, "c = 1\n", f"needs pytest>=9999.1 ({installed} installed)"),
        (14, "d = 1\n", "needs no-such-distribution (not installed)"),
    ]


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS)
def test_snippet_runs(page, line, code, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import torch

    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # Line numbers of the page: the code starts on the line after the opening fence.
    compiled = compile("\n" * line + code, str(ROOT / page), "exec")
    namespace = {"__name__": "__main__"}
    threads = torch.get_num_threads()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            exec(compiled, namespace)
    except Exception as exc:  # the page and line, then the original traceback
        raise AssertionError(f"the python block at {page}:{line} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        plt.close("all")
        torch.set_num_threads(threads)
