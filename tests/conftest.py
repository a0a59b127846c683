import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.fixture
def root():
    return ROOT


def grade(path, *extra):
    """Run `python -m helpers.grade PATH --json`; return (exit status, report)."""
    result = subprocess.run([sys.executable, "-m", "helpers.grade", str(path), "--json", *extra],
                            capture_output=True, text=True, timeout=900)
    return result.returncode, json.loads(result.stdout)


def with_answer(tmp_path, notebook_name, function_name, function_source):
    """A copy of a pristine student notebook whose cell defining function_name (a function or a class)
    holds function_source instead."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{notebook_name}.ipynb", as_version=4)
    starts = (f"def {function_name}(", f"class {function_name}(")
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts)]
    assert len(cells) == 1, f"{notebook_name} should define {function_name} in exactly one cell"
    cells[0].source = function_source
    target = tmp_path / f"{notebook_name}.ipynb"
    nbformat.write(notebook, target)
    return target


def solution_source(notebook_name, name):
    """The solution's cell defining `name`, with its BEGIN/END SOLUTION marker lines removed."""
    notebook = nbformat.read(ROOT / "solutions" / f"{notebook_name}.ipynb", as_version=4)
    starts = (f"def {name}(", f"class {name}(")
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts)]
    return "\n".join(line for line in cell.source.splitlines() if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line)
