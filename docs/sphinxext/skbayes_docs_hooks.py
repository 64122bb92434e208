"""Build hooks for the skbayes documentation (imported by ``docs/conf.py``).

They live in a module rather than in ``conf.py`` so that the configuration
names them by import path: Sphinx caches its configuration between builds and
cannot pickle functions defined in ``conf.py`` (it warns, which ``-W`` turns
into an error).
"""

import builtins
import os
import re

# --- sphinx-gallery ---------------------------------------------------------------------

_FILE_UNSET = object()
_saved_file = _FILE_UNSET


def _gallery_dir(gallery_conf):
    """The folder of the rendered gallery (``docs/auto_examples``)."""
    dirs = gallery_conf["gallery_dirs"]
    return os.path.join(gallery_conf["src_dir"], dirs if isinstance(dirs, str) else dirs[0])


def _output_path(gallery_conf, fname):
    """Where an executed example writes its PNG: next to its rendered page, in the build tree."""
    return os.path.join(_gallery_dir(gallery_conf), os.path.splitext(os.path.basename(fname))[0] + ".png")


def reset_example_file(gallery_conf, fname, when):
    """Give the running example a ``__file__`` (sphinx-gallery never defines one).

    The example scripts locate their default output next to themselves through
    ``__file__``; sphinx-gallery executes them in a fresh namespace without it, so
    the name is provided through ``builtins`` while the example runs (the rendered
    copy in the gallery folder, so that nothing is written into ``examples/``) and
    removed afterwards.
    """
    global _saved_file
    if fname is None:
        return
    if when == "before":
        _saved_file = builtins.__dict__.get("__file__", _FILE_UNSET)
        builtins.__file__ = os.path.join(_gallery_dir(gallery_conf), os.path.basename(fname))
    else:
        if _saved_file is _FILE_UNSET:
            builtins.__dict__.pop("__file__", None)
        else:
            builtins.__file__ = _saved_file
        _saved_file = _FILE_UNSET


def example_argv(gallery_conf, script_vars):
    """Command-line arguments of an executed example: its PNG goes to the build tree.

    Every example takes ``--out``; the rest of its options keep their defaults.
    """
    return ["--out", _output_path(gallery_conf, script_vars["src_file"])]


# --- Markdown pages ----------------------------------------------------------------------

# A Markdown link to something outside docs/ (the pages are written to be read on a
# code host too, where ``../examples/plot_x.py`` is a file): in the built site, a link to
# an example goes to its gallery page, any other one becomes plain text.
_OUTSIDE_LINK = re.compile(r"\[([^\]\n]+)\]\(\.\./([^)\s#]*)\)")


def _rewrite_outside_link(match):
    text, target = match.group(1), match.group(2).rstrip("/")
    if target == "examples":
        return f"[{text}](project:auto_examples/index.rst)"
    m = re.fullmatch(r"examples/([A-Za-z0-9_]+)\.py", target)
    if m and not m.group(1).startswith("_"):
        return f"[{text}](project:auto_examples/{m.group(1)}.rst)"
    # e.g. ``[bench_uci.py](../benchmarks/bench_uci.py)``: the text already names the file
    return text if os.path.basename(target) in text else f"{text} (`{target}`)"


# A link whose text is the file it points to (``[slang.md](slang.md)``, natural on a code
# host): in the built site it shows the page's (or section's) title instead.
_FILE_NAMED_LINK = re.compile(r"\[`?([\w-]+\.md)`?\]\((\1(?:#[^)\s]*)?)\)")


def rewrite_links(app, docname, source):
    """``source-read`` handler for the Markdown pages: retarget the links that leave
    docs/, and let links named after their target file show the target's title."""
    if app.env.doc2path(docname).suffix != ".md":
        return
    text = _OUTSIDE_LINK.sub(_rewrite_outside_link, source[0])
    source[0] = _FILE_NAMED_LINK.sub(r"[](\2)", text)


# --- lists read from the registry of estimators ----------------------------------------------

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)@(?P<name>regressors|classifiers|posteriors|method pages)@[ \t]*$", re.M)


def registry_lists():
    """What the API reference and the user guide list, read from ``skbayes.all_estimators()``
    and ``skbayes.__all__``, so that a new method appears there without editing either page."""
    import inspect

    import skbayes

    entries = skbayes.all_estimators()
    pages = []
    for e in entries:
        page = e.docs.removesuffix(".md")
        if page not in pages:
            pages.append(page)
    posteriors = [
        name
        for name in skbayes.__all__
        if inspect.isclass(getattr(skbayes, name))
        and getattr(skbayes, name).__module__.startswith("skbayes.posteriors")
    ]
    return {
        "regressors": [e.name for e in entries if e.task == "regressor"],
        "classifiers": [e.name for e in entries if e.task == "classifier"],
        "posteriors": posteriors,
        "method pages": pages,
    }


def expand_registry_lists(text):
    """Replace each ``@regressors@``, ``@classifiers@``, ``@posteriors@`` or ``@method pages@``
    line by the registry's names, one per line with the placeholder's indentation."""
    lists = registry_lists()
    return _PLACEHOLDER.sub(lambda m: "\n".join(m["indent"] + n for n in lists[m["name"]]), text)


def fill_registry_lists(app, docname, source):
    """``source-read`` handler: expand the registry placeholders of api.rst and user_guide.md."""
    if docname in ("api", "user_guide"):
        source[0] = expand_registry_lists(source[0])
