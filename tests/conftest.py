import contextlib
import io
import linecache
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))

# A solution marker line, in either style: `# BEGIN SOLUTION` (today's) or nbgrader's older `### BEGIN SOLUTION`.
SOLUTION_MARKER = re.compile(r"^\s*#+\s*(BEGIN|END) SOLUTION\s*$")


@pytest.fixture
def root():
    return ROOT


def pytest_configure(config):
    config.addinivalue_line("markers", "guarded: the checks run with their off-limits guard on")


@pytest.fixture(autouse=True)
def _off_limits_guard(request, monkeypatch):
    """The checks' tests write many wrong answers as small changes of the reference (calling it): they
    run with the off-limits guard off. tests/test_off_limits.py (marked `guarded`) tests the guard itself,
    and the grader and nbgrader tests run real notebooks in their own kernels, with the guard on."""
    if request.node.get_closest_marker("guarded") is None:
        from helpers.checks import harness

        monkeypatch.setattr(harness, "forbidden", lambda exercise: contextlib.nullcontext([]))
        monkeypatch.setattr(harness, "off_limits_reached", lambda answer, names: None)
    yield


_CELLS = [0]


def define(source, namespace):
    """Run source in namespace as a notebook cell runs: under a file name of its own whose lines linecache
    holds (as IPython registers a cell's), so that the checks can read the answer's source. Returns namespace."""
    _CELLS[0] += 1
    filename = f"<answer-cell-{_CELLS[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def run_grader(*argv):
    """Run the grader in-process, `tfs-grade ARGV...`; return (exit status, stdout, stderr)."""
    from course_tools.grade import main

    out, err = io.StringIO(), io.StringIO()
    status = main([str(a) for a in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _defining_cell(notebook, name):
    starts = (f"def {name}(", f"class {name}(")
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts)]
    assert len(cells) == 1, f"the notebook should define {name} in exactly one cell, found {len(cells)}"
    return cells[0]


def with_answers(folder, notebook_name, answers, file_name=None):
    """A copy of a pristine student notebook, written to folder, in which each cell defining a name of
    answers (a function or a class) holds answers[name] instead."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{notebook_name}.ipynb", as_version=4)
    for name, source in answers.items():
        _defining_cell(notebook, name).source = source
    target = Path(folder) / (file_name or f"{notebook_name}.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def with_answer(tmp_path, notebook_name, function_name, function_source):
    """A copy of a pristine student notebook whose cell defining function_name (a function or a class)
    holds function_source instead."""
    return with_answers(tmp_path, notebook_name, {function_name: function_source})


def solution_source(notebook_name, name):
    """The solution's cell defining `name`, with its BEGIN/END SOLUTION marker lines removed (either style)."""
    notebook = nbformat.read(ROOT / "solutions" / f"{notebook_name}.ipynb", as_version=4)
    cell = _defining_cell(notebook, name)
    return "\n".join(line for line in cell.source.splitlines() if not SOLUTION_MARKER.match(line))


def verdict(check, candidate, capsys=None):
    """A check's verdict: returned as one line, never printed."""
    from helpers.checks import Verdict

    result = check(candidate)
    assert isinstance(result, Verdict) and "\n" not in str(result), "a check returns one verdict line"
    if capsys is not None:
        assert capsys.readouterr().out == "", "a check prints nothing"
    return result


# ---------------------------------------------------------------------- the fresh wrong answers (test_fresh_mistakes_*)
FRESH_GENERIC = (None, "raised_error", "wrong_shape", "not_finite", "not_an_array")  # the messages that name nothing


def assert_fresh(check, wrong, what, code):
    """A fresh wrong answer fails its check, which names code (with code None: gives only a generic message)."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    np.random.seed(0)
    result = check(wrong)
    assert not result, f"{what}: passed"
    if code is None:
        assert result.mistake in FRESH_GENERIC, f"{what}: named {result.mistake}: {result}"
    else:
        assert result.mistake == code, f"{what}: expected {code}, got {result.mistake}: {result}"


def assert_named_share(codes, share=0.85):
    """At least share of the fresh wrong answers expect a named hint (which assert_fresh holds each to)."""
    named = sum(code is not None for code in codes)
    assert named >= share * len(codes), f"{named} of {len(codes)} named"
