"""Generate the student notebooks from the solution notebooks (the single source).

    python -m course_tools.make_student solutions notebooks          # stamp solutions/, write notebooks/
    python -m course_tools.make_student solutions notebooks --check  # change nothing; exit 1 if anything is off

(`make student-notebooks` runs the first, `make check-student-notebooks` the second.)

In a solution notebook, every exercise region sits between two marker lines, each alone on its
line (the convention nbgrader and otter-grader both read; the old ``### `` form is refused,
since otter-grader does not open a region on it):

        # BEGIN SOLUTION
        ...the reference answer...
        # END SOLUTION

Writing first stamps the nbgrader metadata of each solution notebook from the exercise registry
(see ``course_tools.nbgrader``): only cell metadata changes, outputs stay, and the file is rewritten
only when something changed. Then each student notebook is written: a first markdown cell saying
where it comes from, every region replaced, at the marker's indentation, by

        # Your Code Here
        raise NotImplementedError()

all outputs and execution counts cleared (the student runs the notebook), the nbgrader metadata
kept, and stable cell ids. Regions must sit inside a function body, so that the pristine student
notebook runs top to bottom.

``--check`` exits 1, naming the notebook and cell, when a solution notebook's nbgrader metadata
differs from the registry's, when an exercise of the registry has no answer cell or check cell,
or when a student notebook is not what the generator writes.
"""

from __future__ import annotations

import argparse
import ast
import copy
import sys
from pathlib import Path

import nbformat

from course_tools.nbgrader import MetadataError, metadata_problems, stamp

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
STUB = ["# Your Code Here", "raise NotImplementedError()"]


class MarkerError(ValueError):
    """A solution region is malformed (old ### form, unclosed, nested, or stubbed into invalid Python)."""


def _marker(line: str, where: str, number: int) -> str | None:
    """BEGIN or END when the line is a solution marker, None when it is an ordinary line."""
    if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line:
        return None
    text = line.strip()
    if text in (BEGIN, END):
        return text.split()[1]
    if text.lstrip("#").strip() in ("BEGIN SOLUTION", "END SOLUTION"):
        raise MarkerError(f"{where}, line {number}: `{text}`: write the marker with a single #, as "
                          f"`{BEGIN}` / `{END}` (the form both nbgrader and otter-grader read).")
    raise MarkerError(f"{where}, line {number}: `{text}`: a solution marker stands alone on its line, as "
                      f"`{BEGIN}` / `{END}`.")


def strip_solutions(source: str, where: str = "cell") -> str:
    """Replace every BEGIN/END SOLUTION region of one cell's source with the stub."""
    out: list[str] = []
    inside = False
    for number, line in enumerate(source.split("\n"), start=1):
        kind = _marker(line, where, number)
        if kind == "BEGIN":
            if inside:
                raise MarkerError(f"{where}, line {number}: BEGIN SOLUTION inside another region")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(indent + stub for stub in STUB)
        elif kind == "END":
            if not inside:
                raise MarkerError(f"{where}, line {number}: END SOLUTION without BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise MarkerError(f"{where}: BEGIN SOLUTION is never closed")
    return "\n".join(out)


def header_cell(source: str, language: str = "en") -> nbformat.NotebookNode:
    """The first cell of a student notebook: where it comes from (in the notebook's language)."""
    from helpers.i18n import tr

    text = tr("make_student:header", "*Generated from `{source}`: edit that file, not this one, then run "
              "`make student-notebooks`. Your answers go where you read `# Your Code Here`.*",
              in_language=language, source=source)
    return nbformat.v4.new_markdown_cell(text)


def make_student_notebook(solution: nbformat.NotebookNode, where: str = "notebook",
                          source: str | None = None) -> nbformat.NotebookNode:
    """Return the student version of a solution notebook (the input is left unchanged).

    source names the solution file in the header cell (default: where)."""
    student = copy.deepcopy(solution)
    for index, cell in enumerate(student.cells):
        cell.pop("id", None)
        if cell.cell_type != "code":
            continue
        cell_where = f"{where}, cell {index}"
        if "SOLUTION" in cell.source:
            cell.source = strip_solutions(cell.source, cell_where)
            try:
                ast.parse(cell.source)
            except SyntaxError as error:
                raise MarkerError(f"{cell_where}: the stubbed cell is not valid Python ({error})") from None
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
    header = header_cell(source or where, solution.metadata.get("tfs", {}).get("language", "en"))
    header.pop("id", None)
    student.cells.insert(0, header)
    student.metadata.pop("widgets", None)
    student.nbformat, student.nbformat_minor = 4, 5
    return student


def render(notebook: nbformat.NotebookNode) -> str:
    """The exact text written to disk (stable key order and indentation, final newline)."""
    return nbformat.writes(notebook) + "\n"


def _with_stable_ids(notebook: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    """nbformat 4.5 wants cell ids: the header is <nn>-header, every other cell <nn>-<its index in the
    solution notebook>, so the output is reproducible."""
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"{stem[:2]}-header" if index == 0 else f"{stem[:2]}-{index - 1:03d}"
    return notebook


def _registry_problems(stems: set[str]) -> list[str]:
    """Exercises of the registry whose notebook is not among the solution notebooks."""
    from helpers.checks import EXERCISES

    return [f"exercise {e.name!r} of the registry names notebook {e.notebook!r}, which has no solution notebook."
            for e in EXERCISES.values() if e.notebook not in stems]


def generate(solutions_dir: Path, notebooks_dir: Path, check: bool = False, every_exercise: bool | None = None) -> int:
    """Stamp the solutions' nbgrader metadata and write every student notebook (with check=True: change
    nothing, report every difference). Returns an exit code: 0 fine, 1 --check found problems, 2 bad input."""
    solutions_dir, notebooks_dir = Path(solutions_dir), Path(notebooks_dir)
    solutions = sorted(solutions_dir.glob("*.ipynb"))
    if not solutions:
        print(f"no notebooks found in {solutions_dir}", file=sys.stderr)
        return 2
    if every_exercise is None:  # a translated edition may hold some of the notebooks only
        every_exercise = not any(nbformat.read(p, as_version=4).metadata.get("tfs") for p in solutions)
    problems = _registry_problems({p.stem for p in solutions}) if every_exercise else []
    stale = []
    for path in solutions:
        text = path.read_text(encoding="utf-8")
        solution = nbformat.reads(text, as_version=4)
        where = str(path)
        try:
            if check:
                problems.extend(metadata_problems(solution, path.stem, where))
            elif stamp(solution, path.stem, where) and render(solution) != text:
                path.write_text(render(solution), encoding="utf-8")
                print(f"stamped the nbgrader metadata of {path}")
            source = f"{solutions_dir.name}/{path.name}"
            student = _with_stable_ids(make_student_notebook(solution, where, source), path.stem)
        except (MarkerError, MetadataError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        rendered = render(student)
        target = notebooks_dir / path.name
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == rendered:
            continue
        if check:
            stale.append(target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rendered, encoding="utf-8")
            print(f"wrote {target}")
    extra = sorted({p.name for p in notebooks_dir.glob("*.ipynb")} - {p.name for p in solutions})
    if check and (problems or stale or extra):
        for problem in problems:
            print(problem, file=sys.stderr)
        for target in stale:
            print(f"{target} differs from what {solutions_dir}/{target.name} generates.", file=sys.stderr)
        for name in extra:
            print(f"{notebooks_dir}/{name} has no solution notebook.", file=sys.stderr)
        print("Run `make student-notebooks` and commit the result.", file=sys.stderr)
        return 1
    if not check and problems:  # a registry exercise without a notebook: nothing to stamp, but say so
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    if check:
        print(f"{len(solutions)} solution notebooks carry the registry's nbgrader metadata; "
              "their student notebooks are up to date.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("solutions", type=Path, help="folder of solution notebooks (the source)")
    parser.add_argument("notebooks", type=Path, help="folder of student notebooks to write")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any metadata or student notebook is off")
    args = parser.parse_args(argv)
    return generate(args.solutions, args.notebooks, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
