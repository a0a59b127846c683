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
    """A copy of a pristine student notebook whose cell defining function_name holds function_source."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{notebook_name}.ipynb", as_version=4)
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(f"def {function_name}(")]
    assert len(cells) == 1, f"{notebook_name} should define {function_name} in exactly one cell"
    cells[0].source = function_source
    target = tmp_path / f"{notebook_name}.ipynb"
    nbformat.write(notebook, target)
    return target
