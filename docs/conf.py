"""Sphinx configuration of the skbayes documentation.

Build (from the repository root)::

    .venv/bin/pip install -c constraints.txt -e ".[docs]"
    .venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

``-D plot_gallery=0`` renders the example gallery without running the examples
(CI does this); by default every example runs and its figure is shown.
"""

import inspect
import os
import re
import sys
from pathlib import Path

from sphinx.util import logging

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "sphinxext"))

import skbayes  # noqa: E402

logger = logging.getLogger("skbayes.docs")

# -- Project --------------------------------------------------------------------------------

project = "skbayes"
author = "the skbayes developers"
copyright = "the skbayes developers"
release = skbayes.__version__
version = release

# -- General --------------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "sphinxext", "_templates", "auto_examples/*.ipynb", "**/*.md5"]
# Every cross-reference to skbayes must resolve (nitpicky; an error under -W in CI). Other projects'
# objects are left unlinked: intersphinx would need their inventories from the network.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(sklearn|torch|numpy|scipy|joblib|dask|dask_ml|distributed)(\..*)?")]
default_role = "literal"  # a single-backquoted name in a docstring is code, as in the Markdown pages
toc_object_entries_show_parents = "hide"  # "fit()" in a page's table of contents, not "SLANGRegressor.fit()"

# -- Markdown (MyST) ------------------------------------------------------------------------

# The pages are plain Markdown, written to read well on a code host too. Heading anchors
# (``slang.md#learning-the-prior-precision``) follow the GitHub slugs.
myst_heading_anchors = 4
myst_enable_extensions = ["deflist", "smartquotes"]

# -- API reference (autodoc, autosummary, numpydoc) ----------------------------------------

# api.rst lists the estimators and posteriors through placeholders that the source-read hook
# fills in from skbayes.all_estimators(); autosummary reads its files from disk, so it is
# given a copy with the placeholders expanded (written here, excluded from the pages).
from skbayes_docs_hooks import expand_registry_lists  # noqa: E402

(HERE / "generated").mkdir(exist_ok=True)
_api = expand_registry_lists((HERE / "api.rst").read_text()).replace(":toctree: generated/", ":toctree: ./")
(HERE / "generated" / "_api_expanded.rst").write_text(_api)
exclude_patterns.append("generated/_api_expanded.rst")
autosummary_generate = ["generated/_api_expanded.rst"]
autosummary_ignore_module_all = False  # a module's page lists what its __all__ names
autodoc_typehints = "none"  # the numpydoc sections carry the types
autodoc_member_order = "groupwise"
numpydoc_show_class_members = False  # autodoc documents the members below the class
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# -- Gallery (sphinx-gallery) ---------------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Every example runs (unless -D plot_gallery=0); _toy_data.py is a helper module.
    "filename_pattern": re.escape(os.sep) + r"(plot_|demo)",
    "ignore_pattern": r"^_",  # matched against the file name
    "within_subsection_order": "FileNameSortKey",
    # The examples are command-line scripts: each runs with ``--out`` in the build tree.
    "reset_argv": "skbayes_docs_hooks.example_argv",
    "reset_modules": ("matplotlib", "skbayes_docs_hooks.reset_example_file"),
    "reset_modules_order": "both",
    # "Examples using X" on the API pages.
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("skbayes",),
    "min_reported_time": 1,
    # The scripts parse command-line options and import examples/_toy_data.py: they run
    # from a clone, not as notebooks or from a download of one file.
    "notebook_extensions": set(),
    "download_all_examples": False,
    "show_memory": False,
}

# -- HTML -----------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = "skbayes"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False
html_theme_options = {
    "header_links_before_dropdown": 6,
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# Pages without sub-pages get no (empty) section navigation.
html_sidebars = {page: [] for page in ("index", "installation", "benchmarks", "changelog", "architecture")}


# -- Checks and hooks -----------------------------------------------------------------------


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document only what skbayes defines: not the methods inherited from scikit-learn,
    torch or ``object`` (``get_params``, ``set_params``, ``score`` ... are scikit-learn's)."""
    if what not in ("class", "exception"):
        return None
    target = getattr(obj, "fget", obj)  # properties
    target = getattr(target, "__func__", target)  # class and static methods
    module = getattr(target, "__module__", None)
    if not (isinstance(module, str) and module.startswith("skbayes")):
        return True
    return None


def _check_api_reference(app):
    """Warn (an error under ``-W``) if a public name of ``skbayes`` is missing from api.rst."""
    from skbayes_docs_hooks import expand_registry_lists

    text = expand_registry_lists((HERE / "api.rst").read_text())
    listed = set(re.findall(r"^ {3}([A-Za-z_][\w.]*)\s*$", text, flags=re.M))
    for name in skbayes.__all__:
        obj = getattr(skbayes, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and name not in listed:
            logger.warning(f"skbayes.{name} is public (skbayes.__all__) but not listed in docs/api.rst")


def setup(app):
    from skbayes_docs_hooks import fill_registry_lists, rewrite_links

    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("builder-inited", _check_api_reference)
    app.connect("source-read", rewrite_links)
    app.connect("source-read", fill_registry_lists)
