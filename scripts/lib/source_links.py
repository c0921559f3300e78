"""Swap the editable install's import hook for a plain path entry (run by venv.sh).

`pip install -e` maps the top-level folders to `spindle.*` (core/ -> spindle.core, ...)
with setuptools' finder: a `.pth` file that imports it at every interpreter start,
and it imports pathlib, urllib and importlib.util (~8 ms of each `spindle` start).
The same mapping as a directory of symlinks costs nothing:

    VENV/spindle-src/spindle/core -> ROOT/core   (one link per mapped folder)

and the `.pth` then names that directory, which `site` just appends to sys.path.
The links point at the working tree, so edits and new modules show at once, as with
the finder. The mapping comes from the finder itself (setup.py's FOLDERS).

    python source_links.py VENV     (idempotent: does nothing once swapped)
"""
from __future__ import annotations

import glob
import importlib
import os
import sys
import sysconfig


def editable_pth_files(site_packages: str) -> list[str]:
    return glob.glob(os.path.join(site_packages, "__editable__.spindle-*.pth"))


def finder_mapping(pth_text: str) -> dict[str, str] | None:
    """{"spindle.core": "/root/core", ...} from the finder a `.pth` imports, or None
    if the file is not the finder's (already swapped)."""
    words = pth_text.split()
    if len(words) < 2 or words[0] != "import":
        return None
    finder = importlib.import_module(words[1].rstrip(";"))
    return dict(finder.MAPPING)


def link_folders(mapping: dict[str, str], links_dir: str) -> None:
    for name, folder in mapping.items():
        link = os.path.join(links_dir, *name.split("."))
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(folder, link)


def swap(venv: str, site_packages: str | None = None) -> None:
    links_dir = os.path.join(os.path.abspath(venv), "spindle-src")
    for pth in editable_pth_files(site_packages or sysconfig.get_paths()["purelib"]):
        with open(pth) as source:
            mapping = finder_mapping(source.read())
        if mapping is None:
            continue
        link_folders(mapping, links_dir)
        with open(pth + ".tmp", "w") as out:   # replaced whole: a start never sees half
            out.write(links_dir + "\n")
        os.replace(pth + ".tmp", pth)


if __name__ == "__main__":
    swap(sys.argv[1])
