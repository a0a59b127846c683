"""The course's home URL, stamped into every notebook: its install cell (what Colab runs) and its Colab link.

The URL is kept in one place, ``[project.urls] Homepage`` of pyproject.toml. The generator
(course_tools.make_student, and course_tools.translate for the editions) writes two things from it:

* in the first code cell, the default of ``os.environ.get("TFS_INSTALL_URL", "git+<home>@main")``: what pip
  installs where ``helpers`` cannot be imported (Google Colab); TFS_INSTALL_URL overrides it (a local
  path, a zip or a tarball: anything pip installs);
* in the link cell near the top, ``https://colab.research.google.com/github/<owner>/<repo>/blob/main/<path>``,
  where path is the student notebook's own path (notebooks/<name>.ipynb, editions/<language>/notebooks/...).

Only URLs already in a notebook are rewritten: the cells themselves are written by the authors
(tests/test_colab.py checks that every notebook has both).

    course_url()                   the home page, from pyproject.toml
    install_url(home)              git+<home>@main, what the install cell installs
    colab_link(home, path)         the Colab address of the notebook at path in the repository
    stamp_colab(notebook, path)    rewrite both in a notebook (in place); True when anything changed
    without_urls(text)             text with both blanked, to compare texts but for the URLs
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BRANCH = "main"
INSTALL_DEFAULT = re.compile(r"""(os\.environ\.get\(\s*["']TFS_INSTALL_URL["']\s*,\s*)(["'])[^"'\n]*\2""")
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^\s)\"'<>]+")


def course_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The course's home page: ``Homepage`` of ``[project.urls]`` in pyproject.toml (a GitHub repository)."""
    with open(pyproject, "rb") as file:
        urls = tomllib.load(file).get("project", {}).get("urls", {})
    home = urls.get("Homepage", "")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", home):
        raise ValueError(f"{pyproject}: [project.urls] Homepage must name a GitHub repository, "
                         f"https://github.com/<owner>/<repo>, got {home!r}")
    return home


def install_url(home: str) -> str:
    """What pip installs in Colab: the repository's main branch, git+https://github.com/<owner>/<repo>@main."""
    return f"git+{home}@{BRANCH}"


def colab_link(home: str, path: str) -> str:
    """The address that opens the notebook at path (relative to the repository) in Google Colab."""
    return f"https://colab.research.google.com/github/{home.removeprefix('https://github.com/')}/blob/{BRANCH}/{path}"


def stamp_colab(notebook: nbformat.NotebookNode, path: str, home: str | None = None) -> bool:
    """Write the install URL and the Colab link of the student notebook at path (relative to the repository)
    into every cell that holds one (in place); True when anything changed. home defaults to course_url()."""
    home = home or course_url()
    changed = False
    for cell in notebook.cells:
        source = INSTALL_DEFAULT.sub(lambda m: f"{m[1]}{m[2]}{install_url(home)}{m[2]}", cell.source)
        source = COLAB_LINK.sub(colab_link(home, path), source)
        if source != cell.source:
            cell.source, changed = source, True
    return changed


def without_urls(text: str) -> str:
    """text with its install URL and Colab link blanked: two texts equal but for the course's URLs give equal
    results (so a change of pyproject's URL leaves the translations reviewed: course_tools.translate)."""
    return COLAB_LINK.sub("<colab link>", INSTALL_DEFAULT.sub(lambda m: f"{m[1]}<install url>", text))


def student_notebook_path(name: str, language: str | None = None) -> str:
    """The path, in the repository, of the student notebook named name: notebooks/<name> for the English
    course, editions/<language>/notebooks/<name> for an edition's."""
    return f"{'editions/' + language + '/' if language else ''}notebooks/{name}"
