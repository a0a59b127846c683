"""The checks when grading (issue 30): an extra case of drawn sizes and seeds when TFS_GRADING_SEED or
NBGRADER_EXECUTION is set at import, nbgrader's mode read once, and the checks standing on public ground
only (no private name of another package, no frame walk, no profile function)."""

import ast
import json
import os
import subprocess
import sys
import textwrap

import nbformat
import pytest

from helpers.checks import EXERCISES, harness

from conftest import ROOT

CHECKS = ROOT / "helpers" / "checks"

GRADE_ALL = textwrap.dedent("""
    import json, sys
    import numpy as np
    import helpers
    from helpers.checks import EXERCISES, harness
    harness.off_limits_reached = lambda answer, names: None  # each reference is off limits to itself

    # Answers precomputed for the fixed cases of a notebook's own runs, zeros elsewhere.
    fixed_pe = {(s, d): helpers.positional_encoding(s, d) for s, d in [(10, 16), (7, 6), (50, 512)]}
    fixed_masks = {size: helpers.causal_mask(size) for size in (5, 1, 8)}

    def create_position_matrix(seq_length, embed_size):
        return fixed_pe.get((seq_length, embed_size), np.zeros((seq_length, embed_size)))

    def causal_mask(size):
        return fixed_masks.get(size, np.zeros((size, size), dtype=bool))

    verdicts = {e.name: e.check.verdict_of(e.reference_object()).status for e in EXERCISES.values()}
    verdicts["precomputed"] = [helpers.check_create_position_matrix.verdict_of(create_position_matrix).status,
                               helpers.check_causal_mask.verdict_of(causal_mask).status]
    verdicts["seed"] = harness.GRADING_SEED
    json.dump(verdicts, sys.stdout)
""")


def graded_in_a_fresh_interpreter(**env):
    environment = {k: v for k, v in os.environ.items() if k not in ("TFS_GRADING_SEED", "NBGRADER_EXECUTION")}
    environment.update(env, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", GRADE_ALL], capture_output=True, text=True, cwd=ROOT,
                          env=environment, timeout=300, encoding="utf-8")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("env", [{}, {"TFS_GRADING_SEED": "3"}, {"NBGRADER_EXECUTION": "autograde"}],
                         ids=["notebook", "grader", "nbgrader"])
def test_the_references_pass_and_precomputed_answers_fail_only_when_grading(env):
    verdicts = graded_in_a_fresh_interpreter(**env)
    grading = bool(env)
    assert (verdicts.pop("seed") is not None) == grading
    assert verdicts.pop("precomputed") == (["fail", "fail"] if grading else ["pass", "pass"])
    assert verdicts == {name: "pass" for name in EXERCISES}


def test_a_notebook_s_own_runs_keep_exactly_the_fixed_cases():
    assert harness.GRADING_SEED is None and harness.grading_rng() is None
    assert harness.graded([1, 2], lambda rng: pytest.fail("nothing is drawn")) == [1, 2]


# ---------------------------------------------------------------------------------------- nbgrader
NOTEBOOK_CELLS = [
    "import helpers",
    "def create_position_matrix(seq_length, embed_size):\n"
    "    import os\n"
    "    os.environ.pop('NBGRADER_EXECUTION', None)\n"
    "    # Your Code Here\n"
    "    raise NotImplementedError()",
    "import os\nos.environ.pop('NBGRADER_EXECUTION', None)\n"
    "helpers.check_create_position_matrix(create_position_matrix)",
]


def test_under_nbgrader_an_answer_that_pops_the_variable_still_fails_its_check_cell(tmp_path):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    env = dict(os.environ, NBGRADER_EXECUTION="autograde", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    with pytest.raises(CellExecutionError, match="CheckFailed"):
        client.execute(env=env)
    outputs = notebook.cells[2].outputs
    assert outputs and outputs[-1].ename == "CheckFailed" and "not implemented yet" in outputs[-1].evalue


def test_verdict_of_never_raises_and_silenced_is_gone(monkeypatch):
    monkeypatch.setattr(harness, "NBGRADER", True)
    from helpers import check_softmax

    def stub(x, axis=-1):
        # Your Code Here
        raise NotImplementedError()

    assert check_softmax.verdict_of(stub).status == "todo"
    with pytest.raises(harness.CheckFailed):
        check_softmax(stub)
    assert not hasattr(harness, "silenced")  # entering it gave every exercise its point under nbgrader


# ---------------------------------------------------------------------------------------- public ground
PRIVATE = ("sys", "threading", "_thread", "inspect", "torch", "np", "numpy", "traceback", "linecache", "ast",
           "builtins", "importlib", "os", "F", "nn", "contextvars", "warnings", "types", "gc")


@pytest.mark.parametrize("path", sorted(CHECKS.glob("*.py")), ids=lambda p: p.name)
def test_the_checks_use_no_private_name_of_another_package(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                if root.attr.startswith("_") and not root.attr.endswith("__"):
                    break
                root = root.value
            if isinstance(root, ast.Name) and root.id in PRIVATE:
                private.append(ast.unparse(node))
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            private += [n for n in names if any(p.startswith("_") and not p.endswith("__") for p in n.split("."))]
    assert not private, private
    text = path.read_text(encoding="utf-8")
    for banned in ("setprofile", "settrace", "_getframe", "TorchDispatchMode", "_python_dispatch", "torch._ops",
                   "_qualified_op_name", "_start_new_thread", "co_consts", "_C._nn"):
        assert banned not in text, f"{path.name} uses {banned}"


def test_guard_does_not_import_the_harness():
    for name in ("guard.py", "off_limits.py", "source.py", "mistakes.py", "values.py"):
        tree = ast.parse((CHECKS / name).read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "harness" not in imported, name


@pytest.mark.parametrize("path", sorted(CHECKS.glob("*.py")), ids=lambda p: p.name)
def test_every_check_module_stays_under_400_lines(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) < 400
