"""Every notebook runs in Google Colab as it is: its first code cell installs the course's helpers where they
cannot be imported (from pyproject.toml's [project.urls], or TFS_INSTALL_URL) and does nothing where they can;
each notebook links to itself in Colab; notebooks 05, 06 and 07 find the student's earlier notebooks in Google
Drive or say in one line how to provide them. The last test runs English notebooks the way Colab would: each copied
alone into an empty folder, in a fresh virtual environment that has torch, numpy, matplotlib and ipykernel but
not the course."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import types
import venv
from pathlib import Path

import nbformat
import pytest

import helpers
import helpers.earlier_notebooks as earlier_notebooks
from course_tools.colab import (colab_link, course_url, install_url, stamp_colab, student_notebook_path,
                                without_urls)
from course_tools.make_student import generate
from helpers.checkpoints import cache_dir
from helpers.earlier_notebooks import find_notebooks
from helpers.notebook_io import python_lines

from conftest import ROOT, SOLUTIONS

HOME = course_url()
LANGUAGES = sorted(p.parent.name for p in (ROOT / "editions").glob("*/EDITION"))
FOLDERS = {"solutions": None, "notebooks": None} | {f"editions/{lang}/{kind}": lang for lang in LANGUAGES
                                                    for kind in ("solutions", "notebooks")}
EVERY_NOTEBOOK = [(folder, path.name) for folder in FOLDERS for path in sorted((ROOT / folder).glob("*.ipynb"))]


def first_code_cell(notebook):
    return next(cell for cell in notebook.cells if cell.cell_type == "code")


# ------------------------------------------------------------------------------- the URL, kept in one place
def test_the_course_url_is_pyprojects_homepage():
    with open(ROOT / "pyproject.toml", "rb") as file:
        assert HOME == tomllib.load(file)["project"]["urls"]["Homepage"]
    owner_repo = HOME.removeprefix("https://github.com/")
    assert install_url(HOME) == f"git+{HOME}@main"
    assert colab_link(HOME, "notebooks/01_positional_encoding.ipynb") == (
        f"https://colab.research.google.com/github/{owner_repo}/blob/main/notebooks/01_positional_encoding.ipynb")


def test_a_homepage_that_is_no_github_repository_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nHomepage = "https://example.org/course"\n',
                                             encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[project.urls\] Homepage must name a GitHub repository"):
        course_url(tmp_path / "pyproject.toml")


@pytest.mark.parametrize("folder,name", EVERY_NOTEBOOK, ids=[f"{f}/{n}" for f, n in EVERY_NOTEBOOK])
def test_every_notebook_installs_from_and_links_to_pyprojects_url(folder, name):
    """The drift test: a notebook whose install URL or Colab link is not pyproject's fails here (run
    `make student-notebooks` and `make translations`, which stamp them)."""
    notebook = nbformat.read(ROOT / folder / name, as_version=4)
    install = first_code_cell(notebook).source
    assert "TFS_INSTALL_URL" in install and f'"{install_url(HOME)}"' in install, "the install cell, stamped"
    assert 'if importlib.util.find_spec("helpers") is None:' in install and "\nimport helpers\n" in install, (
        "installs only where helpers cannot be imported, and imports them at the top level, where the tools that "
        "read a notebook's imports (helpers.student_code, course_tools.pretrain) find them")
    path = student_notebook_path(name, FOLDERS[folder])
    (link,) = [cell for cell in notebook.cells[:3] if cell.cell_type == "markdown" and "colab-badge" in cell.source]
    assert f"]({colab_link(HOME, path)})" in link.source, "the Colab link opens this notebook's student version"
    assert (ROOT / path).is_file()


def test_the_generator_reports_and_restamps_a_url_that_is_not_pyprojects(tmp_path, capsys):
    solutions = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", solutions)
    path = solutions / "02_attention.ipynb"
    old = "https://github.com/someone/old-course"
    path.write_text(path.read_text(encoding="utf-8").replace(HOME, old), encoding="utf-8")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    assert generate(solutions, tmp_path / "notebooks", check=True) == 1
    assert f"{path}: its install URL or Colab link is not the one pyproject.toml's" in capsys.readouterr().err
    assert generate(solutions, tmp_path / "notebooks") == 0
    for written in (path, tmp_path / "notebooks" / path.name):
        assert old not in written.read_text(encoding="utf-8")
    assert path.read_bytes() == (ROOT / "solutions" / path.name).read_bytes()
    assert (tmp_path / "notebooks" / path.name).read_bytes() == (ROOT / "notebooks" / path.name).read_bytes()


def test_stamping_rewrites_only_the_two_urls():
    cell = nbformat.v4.new_code_cell('x = os.environ.get("TFS_INSTALL_URL", "git+https://github.com/a/b@main")\n'
                                     'y = "https://github.com/a/b"')
    link = nbformat.v4.new_markdown_cell("[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
                                         "(https://colab.research.google.com/github/a/b/blob/main/notebooks/x.ipynb)")
    notebook = nbformat.v4.new_notebook(cells=[cell, link])
    assert stamp_colab(notebook, "editions/es/notebooks/x.ipynb", HOME)
    assert f'"TFS_INSTALL_URL", "{install_url(HOME)}")' in cell.source and 'y = "https://github.com/a/b"' in cell.source
    assert link.source.endswith(f"colab-badge.svg)]({colab_link(HOME, 'editions/es/notebooks/x.ipynb')})")
    assert not stamp_colab(notebook, "editions/es/notebooks/x.ipynb", HOME), "stamping twice changes nothing"
    assert without_urls(cell.source.replace(HOME, "https://github.com/c/d")) == without_urls(cell.source)


# ------------------------------------------------------------------------------- the install cell
@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_the_install_cell_does_nothing_where_helpers_can_be_imported(path, monkeypatch, capsys):
    def no_pip(*args, **kwargs):
        raise AssertionError(f"pip ran: {args}")

    monkeypatch.setattr(subprocess, "run", no_pip)
    exec(python_lines(first_code_cell(nbformat.read(path, as_version=4)).source), {})
    assert capsys.readouterr() == ("", ""), "no output: the stored outputs stay as they are"


@pytest.mark.parametrize("given", [None, "/path/to/a/checkout"])
def test_the_install_cell_installs_the_course_where_helpers_cannot_be_imported(given, monkeypatch):
    ran, find_spec = [], importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "helpers" and not ran
                        else find_spec(name, *args))  # helpers cannot be imported until pip has run
    monkeypatch.setattr(subprocess, "run", lambda command, check: ran.append(command))
    if given:
        monkeypatch.setenv("TFS_INSTALL_URL", given)
    else:
        monkeypatch.delenv("TFS_INSTALL_URL", raising=False)
    namespace = {}
    exec(python_lines(first_code_cell(nbformat.read(SOLUTIONS[0], as_version=4)).source), namespace)
    assert ran == [[sys.executable, "-m", "pip", "install", "--quiet", given or install_url(HOME)]]
    assert namespace["helpers"] is helpers and "check_create_position_matrix" in namespace, "the imports that follow"


# ------------------------------------------------------------------------------- earlier notebooks, in Colab
def fake_colab(monkeypatch, tmp_path, allow=True):
    """A google.colab module whose drive.mount makes tmp_path/drive/MyDrive/Colab Notebooks (or refuses, as when
    the student does not allow it); returns the list of mount calls."""
    mounts = []

    def mount(where):
        mounts.append(where)
        if not allow:
            raise RuntimeError("credential propagation was unsuccessful")
        (Path(where) / "MyDrive" / "Colab Notebooks").mkdir(parents=True, exist_ok=True)

    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(earlier_notebooks, "DRIVE", tmp_path / "drive")
    return mounts


def test_notebooks_next_to_this_one_are_used_and_nothing_is_printed(tmp_path, capsys):
    (tmp_path / "01_positional_encoding.ipynb").write_text("{}", encoding="utf-8")
    assert find_notebooks(tmp_path, ["01_positional_encoding"]) == {
        "01_positional_encoding": tmp_path / "01_positional_encoding.ipynb"}
    assert capsys.readouterr().out == ""


def test_outside_colab_a_missing_notebook_is_named_in_one_line_and_drive_is_not_touched(tmp_path, capsys,
                                                                                           monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(earlier_notebooks, "drive_notebooks", lambda: pytest.fail("Drive asked outside Colab"))
    paths = find_notebooks(tmp_path, ["01_positional_encoding", "03_multi_head_attention"])
    assert paths["03_multi_head_attention"] == tmp_path / "03_multi_head_attention.ipynb"
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "01_positional_encoding.ipynb, 03_multi_head_attention.ipynb" in out
    assert "upload them next to this notebook" in out


def test_in_colab_the_students_drive_copies_are_found(tmp_path, capsys, monkeypatch):
    mounts = fake_colab(monkeypatch, tmp_path)
    drive = tmp_path / "drive" / "MyDrive" / "Colab Notebooks"
    drive.mkdir(parents=True)
    for name in ("01_positional_encoding.ipynb", "Copy of 01_positional_encoding.ipynb"):
        shutil.copy(ROOT / "solutions" / "01_positional_encoding.ipynb", drive / name)
    os.utime(drive / "01_positional_encoding.ipynb", (1, 1))  # older: the newest copy is used
    shutil.copy(ROOT / "solutions" / "03_multi_head_attention.ipynb", drive / "03_multi_head_attention.ipynb")
    here = tmp_path / "content"
    here.mkdir()
    earlier = helpers.your_attention_and_encoding(here)
    assert mounts == [], "Drive already mounted: not asked again"
    assert earlier.origin == {"create_position_matrix": "yours", "MultiHeadAttention": "yours"}
    assert "from Copy of 01_positional_encoding.ipynb" in earlier.reasons["create_position_matrix"]
    assert capsys.readouterr().out == ""


def test_in_colab_drive_is_mounted_once_asked_and_a_refusal_falls_back_in_one_line(tmp_path, capsys, monkeypatch):
    mounts = fake_colab(monkeypatch, tmp_path)
    assert find_notebooks(tmp_path, ["01_positional_encoding"]) == {
        "01_positional_encoding": tmp_path / "01_positional_encoding.ipynb"}
    assert mounts == [str(tmp_path / "drive")], "asked once, where Colab mounts Drive"
    assert capsys.readouterr().out.count("\n") == 1, "mounted, but no copy there: one line"
    shutil.rmtree(tmp_path / "drive")
    mounts = fake_colab(monkeypatch, tmp_path, allow=False)
    find_notebooks(tmp_path, ["01_positional_encoding"])
    assert len(mounts) == 1
    assert "Not found next to this notebook: 01_positional_encoding.ipynb" in capsys.readouterr().out


def test_your_recipe_looks_for_the_three_notebooks_at_once_and_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    recipe = helpers.your_recipe(tmp_path / "05_transformer.ipynb")
    assert set(recipe.origin.values()) == {"reference"}
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    assert "01_positional_encoding.ipynb, 03_multi_head_attention.ipynb, 05_transformer.ipynb" in out


# ------------------------------------------------------------------------------- as Colab runs a notebook
# Every English student notebook: about 2.6 CPU-minutes for the first six, 25 s of it notebook 01's (a busy 2-core
# machine, the models of notebooks 06 and 07 trained before, as make test trains them), plus notebook 07's run.
# TFS_COLAB_NOTEBOOKS="01_positional_encoding 06_training" runs only those.
AS_IN_COLAB = os.environ.get("TFS_COLAB_NOTEBOOKS", "").split() or sorted(p.stem for p in SOLUTIONS)


def environment_without_the_course(folder: Path) -> Path:
    """A fresh virtual environment in folder that has torch, numpy, matplotlib, ipykernel and pip but not the
    course; returns its Python.

    It is made over the base interpreter of the test's own environment (venv's default), and a .pth file lends
    it that environment's site-packages folder as a plain path. Python reads .pth files only in a site-packages
    folder of its own, so the .pth of the course's editable install (the import hook that finds `helpers` in
    this checkout) is never run: `import helpers` fails, everything else imports, and nothing is downloaded.
    pip sees the course's metadata there, but as installed outside this environment: it installs the course
    into the fresh one and leaves the lent one alone."""
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(folder)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "lent-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def kernel_spec(folder: Path, python: Path) -> str:
    """A kernel spec in folder (put on JUPYTER_PATH) that starts python's ipykernel; returns its name."""
    spec = folder / "kernels" / "colab-like"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (like Colab)", "language": "python"}), encoding="utf-8")
    return "colab-like"


@pytest.mark.parametrize("stem", AS_IN_COLAB)
def test_a_notebook_alone_in_a_fresh_environment_installs_the_course_and_runs(stem, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    python = environment_without_the_course(tmp_path / "venv")
    missing = subprocess.run([python, "-c", "import importlib.util as u; print([m for m in ('helpers', 'torch', "
                              "'numpy', 'matplotlib', 'ipykernel', 'pip') if u.find_spec(m) is None])"],
                             capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert missing == "['helpers']", "the fresh environment has everything but the course"
    folder = tmp_path / "content"  # Colab's working folder: the notebook, and nothing else
    folder.mkdir()
    shutil.copy(ROOT / "notebooks" / f"{stem}.ipynb", folder)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("TFS_INSTALL_URL", str(ROOT))
    monkeypatch.setenv("TFS_CACHE_DIR", str(cache_dir()))  # notebooks 06 and 07: the models make checkpoints trained
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # nothing is downloaded: the course's dependencies are all lent
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's inverted switch: "0" builds with the lent setuptools
    monkeypatch.delenv("PYTHONPATH", raising=False)
    notebook = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
    NotebookClient(notebook, kernel_name=kernel_spec(tmp_path / "jupyter", python), timeout=900,
                   resources={"metadata": {"path": str(folder)}}).execute()  # any error fails the test
    installed = subprocess.run([python, "-c", "import helpers, importlib.metadata as m; print(helpers.__file__); "
                                "print(m.distribution('transformers-from-scratch-helpers').read_text('direct_url.json'))"],
                               capture_output=True, text=True, check=True, cwd=tmp_path).stdout.splitlines()
    assert Path(installed[0]).is_relative_to(tmp_path / "venv"), "helpers installed by the first cell, in the fresh one"
    assert json.loads(installed[1])["url"] == ROOT.as_uri(), "from TFS_INSTALL_URL"
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".ipynb") == [f"{stem}.ipynb"]
    if stem in ("06_training", "07_gpt"):  # both read the student's notebooks 01, 03 and 05
        printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
        assert ("Not found next to this notebook: 01_positional_encoding.ipynb, 03_multi_head_attention.ipynb, "
                "05_transformer.ipynb.") in printed, "says in one line how to provide them, and runs on the reference"
