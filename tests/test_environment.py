"""The two ways of installing the course list the same packages, and the README's commands exist."""

import re

from conftest import ROOT


def pinned(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([\w.+]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_environment_yml_and_requirements_pin_the_same_packages():
    requirements = pinned((ROOT / "requirements.txt").read_text().splitlines())
    environment = pinned((ROOT / "environment.yml").read_text().splitlines())
    assert requirements == environment
    assert requirements["torch"] == "2.13.0"  # the only version with a local CPU wheel
    for needed in ("jupyterlab", "numpy", "matplotlib", "nbval", "pytest", "torch", "nbgrader", "ruff"):
        assert needed in requirements
    env_text = (ROOT / "environment.yml").read_text()
    assert "python=3.11" in env_text and "-e ." in env_text


def test_readme_commands_exist_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make lab" in readme and "make test" in readme
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "--allow-root" in makefile
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), re.M)


def test_readme_layout_lists_every_module():
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):readme.index("## Dependencies")]
    for package in ("helpers", "course_tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__init__.py":
                assert f" {path.name} " in layout, f"README's layout does not list {path.relative_to(ROOT)}"
        for folder in sorted(p for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()):
            assert f" {folder.name}/ " in layout, f"README's layout does not list {folder.relative_to(ROOT)}/"


def test_readme_says_what_every_pinned_package_is_for():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Dependencies"):readme.index("## Conventions")]
    for package in pinned((ROOT / "requirements.txt").read_text().splitlines()):
        assert f"`{package}" in table, f"README's dependency table does not explain {package}"


def test_makefile_never_hides_a_failing_command():
    makefile = (ROOT / "Makefile").read_text()
    assert "pipefail" in makefile
    for line in makefile.splitlines():
        if "pip install" in line:
            assert "|| true" not in line, line


def _make_test_dry_run(*overrides):
    """What `make -n test` would run: [(the pytest command's words, {notebook paths, folders expanded})]."""
    import subprocess

    done = subprocess.run(["make", "-n", "--no-print-directory", "test", *overrides], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs = []
    for line in done.stdout.replace("\\\n", " ").splitlines():
        if " -m pytest " not in line:
            continue
        words, paths = line.split(), set()
        for word in words:
            path = ROOT / word
            if word.startswith(("notebooks", "editions", "solutions")) and path.exists():
                paths |= set(path.glob("*.ipynb")) if path.is_dir() else {path}
        runs.append((words, paths))
    return runs


def _notebooks_run(runs, mode):
    """Every notebook the runs give to nbval in mode ("--nbval" or "--nbval-lax"), with repeats."""
    return [path for words, paths in runs if mode in words for path in sorted(paths)]


def test_make_test_runs_every_student_notebook_once_in_lax_nbval_or_in_the_browser():
    """Where Chromium is installed, the browser test runs the English student notebooks and notebook 01 of
    every edition whose EDITION lists it, and lax nbval runs the others; elsewhere lax nbval runs them all."""
    students = set((ROOT / "notebooks").glob("*.ipynb")) | set((ROOT / "editions").glob("*/notebooks/*.ipynb"))
    in_browser = set((ROOT / "notebooks").glob("*.ipynb")) | {
        path.parent / "notebooks" / "01_positional_encoding.ipynb" for path in (ROOT / "editions").glob("*/EDITION")
        if "01_positional_encoding" in path.read_text(encoding="utf-8").split()}
    runs = _make_test_dry_run("BROWSER_HERE=yes")
    lax = _notebooks_run(runs, "--nbval-lax")
    assert sorted(lax) == sorted(students - in_browser)
    assert any("tests/test_browser.py" in words for words, _ in runs)
    lax = _notebooks_run(_make_test_dry_run("BROWSER_HERE="), "--nbval-lax")
    assert sorted(lax) == sorted(students)


def test_make_test_runs_every_solution_strictly_once_the_english_at_the_default_thread_count():
    runs = _make_test_dry_run()
    solutions = set((ROOT / "solutions").glob("*.ipynb")) | set((ROOT / "editions").glob("*/solutions/*.ipynb"))
    assert sorted(_notebooks_run(runs, "--nbval")) == sorted(solutions)
    makefile = (ROOT / "Makefile").read_text()
    one_thread = re.search(r"^ONE_THREAD := (.*)$", makefile, re.M).group(1).split()
    assert re.search(r"^\$\(ONE_THREAD\) nbval-solutions-% nbval-notebooks-%: export OMP_NUM_THREADS := 1$",
                     makefile, re.M)
    assert "nbval-solutions" not in one_thread and "unit-grader" in one_thread and "browser" in one_thread
    unit = [words for words, _ in runs if "tests" in words or any(w.startswith("tests/test_") for w in words)]
    named = {w for words in unit for w in words if w.startswith("tests/test_") and "--ignore" not in w}
    ignored = {w.split("=", 1)[1] for words in unit for w in words if w.startswith("--ignore=")}
    assert named == ignored, "every test file that a run of its own takes is left out of the run of the others"
