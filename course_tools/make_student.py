"""Generate the student notebooks from the solution notebooks (the single source).

    python -m helpers.make_student solutions notebooks          # write notebooks/*.ipynb
    python -m helpers.make_student solutions notebooks --check  # exit 1 if any differs

In a solution notebook, every exercise region sits between two marker lines (nbgrader's
convention, so instructors who use nbgrader can keep using it):

        ### BEGIN SOLUTION
        ...the reference answer...
        ### END SOLUTION

Each region becomes, at the marker's indentation,

        # Your Code Here
        raise NotImplementedError()

All outputs and execution counts are cleared: the student runs the notebook. Regions must sit
inside a function body, so that the pristine student notebook runs top to bottom.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from pathlib import Path

import nbformat

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = ["# Your Code Here", "raise NotImplementedError()"]
_MARKER = re.compile(r"^(\s*)### (BEGIN|END) SOLUTION\s*$")


class MarkerError(ValueError):
    """A solution region is malformed (unclosed, nested, or stubbed into invalid Python)."""


def strip_solutions(source: str, where: str = "cell") -> str:
    """Replace every BEGIN/END SOLUTION region of one cell's source with the stub."""
    out: list[str] = []
    inside = False
    for number, line in enumerate(source.split("\n"), start=1):
        match = _MARKER.match(line)
        if match and match.group(2) == "BEGIN":
            if inside:
                raise MarkerError(f"{where}, line {number}: BEGIN SOLUTION inside another region")
            inside = True
            indent = match.group(1)
            out.extend(indent + stub for stub in STUB)
        elif match:
            if not inside:
                raise MarkerError(f"{where}, line {number}: END SOLUTION without BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise MarkerError(f"{where}: BEGIN SOLUTION is never closed")
    return "\n".join(out)


def make_student_notebook(solution: nbformat.NotebookNode, where: str = "notebook") -> nbformat.NotebookNode:
    """Return the student version of a solution notebook (the input is left unchanged)."""
    student = copy.deepcopy(solution)
    for index, cell in enumerate(student.cells):
        cell.pop("id", None)
        if cell.cell_type != "code":
            continue
        cell_where = f"{where}, cell {index}"
        if BEGIN in cell.source or END in cell.source:
            cell.source = strip_solutions(cell.source, cell_where)
            try:
                ast.parse(cell.source)
            except SyntaxError as error:
                raise MarkerError(f"{cell_where}: the stubbed cell is not valid Python ({error})") from None
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
    student.metadata.pop("widgets", None)
    student.nbformat, student.nbformat_minor = 4, 5
    return student


def render(notebook: nbformat.NotebookNode) -> str:
    """The exact text written to disk (stable key order and indentation, final newline)."""
    return nbformat.writes(notebook) + "\n"


def _with_stable_ids(notebook: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    """nbformat 4.5 wants cell ids: derive stable ones from the position, so output is reproducible."""
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"{stem[:2]}-{index:03d}"
    return notebook


def generate(solutions_dir: Path, notebooks_dir: Path, check: bool = False) -> int:
    """Write (or, with check=True, compare) every student notebook. Returns an exit code."""
    solutions = sorted(Path(solutions_dir).glob("*.ipynb"))
    if not solutions:
        print(f"no notebooks found in {solutions_dir}", file=sys.stderr)
        return 2
    stale = []
    for path in solutions:
        solution = nbformat.read(path, as_version=4)
        try:
            student = _with_stable_ids(make_student_notebook(solution, str(path)), path.stem)
        except MarkerError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        text = render(student)
        target = Path(notebooks_dir) / path.name
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            stale.append(target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    extra = sorted({p.name for p in Path(notebooks_dir).glob("*.ipynb")} - {p.name for p in solutions})
    if check and (stale or extra):
        for target in stale:
            print(f"{target} differs from what {solutions_dir}/{target.name} generates.", file=sys.stderr)
        for name in extra:
            print(f"{notebooks_dir}/{name} has no solution notebook.", file=sys.stderr)
        print("Run `make student-notebooks` and commit the result.", file=sys.stderr)
        return 1
    if check:
        print(f"{len(solutions)} student notebooks match their solutions.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("solutions", type=Path, help="folder of solution notebooks (the source)")
    parser.add_argument("notebooks", type=Path, help="folder of student notebooks to write")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any student notebook is stale")
    args = parser.parse_args(argv)
    return generate(args.solutions, args.notebooks, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
