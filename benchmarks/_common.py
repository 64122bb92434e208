"""Helpers shared by the benchmark scripts."""

import os


def library_version():
    """skbayes commit (and whether skbayes/ has uncommitted changes), for the record."""
    import subprocess

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "skbayes"], cwd=root, capture_output=True,
                               text=True).stdout.strip()
        return f"skbayes at commit {rev}" + (" (+ uncommitted changes in skbayes/)" if dirty else "")
    except OSError:
        return "skbayes (commit unknown)"
