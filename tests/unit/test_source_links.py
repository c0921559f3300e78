"""scripts/lib/source_links.py: the editable install's finder swapped for symlinks and
a plain .pth path (start-up time), with the same module mapping."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location(
        "source_links", ROOT / "scripts" / "lib" / "source_links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_editable_install(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A site-packages with setuptools' finder layout for two mapped folders."""
    source = tmp_path / "src"
    for folder in ("core", "shell"):
        (source / folder).mkdir(parents=True)
        (source / folder / "__init__.py").write_text(f"WHERE = {folder!r}\n")
    site = tmp_path / "site"
    site.mkdir()
    mapping = {"fakepkg_sl.core": str(source / "core"),
               "fakepkg_sl.shell": str(source / "shell")}
    (site / "__editable___fake_finder.py").write_text(f"MAPPING = {mapping!r}\n")
    pth = site / "__editable__.spindle-0.1.0.pth"
    pth.write_text("import __editable___fake_finder; __editable___fake_finder.install()")
    return source, site, pth


def test_swap_links_the_mapped_folders_and_rewrites_the_pth(tmp_path, monkeypatch):
    source, site, pth = fake_editable_install(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    venv = tmp_path / "venv"
    tool = load_tool()
    tool.swap(str(venv), str(site))
    links = venv / "spindle-src"
    assert pth.read_text() == f"{links}\n"
    assert (links / "fakepkg_sl" / "core").resolve() == source / "core"
    assert (links / "fakepkg_sl" / "shell").resolve() == source / "shell"
    tool.swap(str(venv), str(site))               # idempotent: already a path entry
    assert pth.read_text() == f"{links}\n"
    probe = ("import fakepkg_sl.core as c, fakepkg_sl.shell as s; print(c.WHERE, s.WHERE)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": pth.read_text().strip()}, timeout=60)
    assert done.stdout.split() == ["core", "shell"], done.stderr


def test_the_installed_spindle_imports_from_the_working_tree():
    import spindle.core.version as version
    assert Path(version.__file__).resolve() == ROOT / "core" / "version.py"
