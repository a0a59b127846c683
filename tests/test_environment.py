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
    requirements = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    environment = pinned((ROOT / "environment.yml").read_text(encoding="utf-8").splitlines())
    assert requirements == environment
    assert requirements["torch"] == "2.13.0"  # the only version with a local CPU wheel
    for needed in ("jupyterlab", "numpy", "matplotlib", "nbval", "pytest", "torch", "nbgrader", "ruff"):
        assert needed in requirements
    env_text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    assert "python=3.11" in env_text and "-e ." in env_text


def test_readme_commands_exist_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "make lab" in readme and "make test" in readme
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "--allow-root" in makefile
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)


def test_ci_installs_bubblewrap_and_runs_the_other_pythons_in_environments_it_keeps():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)" in ci
    lines = ci.splitlines()
    other = next(i for i, line in enumerate(lines) if line.startswith("make test-pythons"))
    assert other > lines.index("make test") and 'PYTHONS_DIR="$HOME/.cache/' in lines[other]


def test_make_test_pythons_says_which_pythons_it_skips_and_why():
    """Without installing anything: the environment's own Python and one that is not here are skipped, each with
    its reason, and the summary names none run."""
    import subprocess
    import sys

    own = "%d.%d" % sys.version_info[:2]
    done = subprocess.run(["make", "--no-print-directory", "-o", "setup", "-o", "checkpoints", "test-pythons",
                           f"PYTHON_VERSIONS={own} 3.99", f"PY={sys.executable}"], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Python {own}: skipped, it is .venv's own" in done.stdout
    assert "Python 3.99: skipped, there is none here" in done.stdout
    assert "make test-pythons: passed on: none; failed on: none" in done.stdout


def test_readme_layout_lists_every_module():
    readme = (ROOT / "docs" / "course-authors.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout"):readme.index("## Dependencies")]
    for package in ("helpers", "course_tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__init__.py":
                assert f" {path.name} " in layout, f"README's layout does not list {path.relative_to(ROOT)}"
        for folder in sorted(p for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()):
            assert f" {folder.name}/ " in layout, f"README's layout does not list {folder.relative_to(ROOT)}/"


def test_readme_says_what_every_pinned_package_is_for():
    readme = (ROOT / "docs" / "course-authors.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Dependencies"):readme.index("## Conventions")]
    for package in pinned((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()):
        assert f"`{package}" in table, f"README's dependency table does not explain {package}"


def test_makefile_never_hides_a_failing_command():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "pipefail" in makefile
    for line in makefile.splitlines():
        if "pip install" in line:
            assert "|| true" not in line, line


def _make_test_dry_run(*overrides):
    """What `make -n test` would run: [(the pytest command's words, {notebook paths, folders expanded})]."""
    import subprocess

    done = subprocess.run(["make", "-n", "--no-print-directory", "test", *overrides], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stderr
    runs = []
    for line in done.stdout.replace("\\\n", " ").splitlines():
        if " -m course_tools.pretrain" in line:
            runs.append((line.split(), set()))
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


def test_make_test_runs_the_student_notebooks_where_a_student_runs_them():
    """Where Chromium is installed, the browser test runs the English student notebooks and notebook 01 of every
    edition whose EDITION lists it; elsewhere lax nbval runs the English ones. The editions' other student notebooks
    run nowhere again: they are generated from their solutions (the drift tests), which strict nbval runs."""
    runs = _make_test_dry_run("BROWSER_HERE=yes")
    assert _notebooks_run(runs, "--nbval-lax") == []
    assert any("tests/test_browser.py" in words for words, _ in runs)
    runs = _make_test_dry_run("BROWSER_HERE=")
    assert sorted(_notebooks_run(runs, "--nbval-lax")) == sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_make_test_trains_the_checkpoints_once_before_any_run_that_executes_a_notebook():
    runs = _make_test_dry_run()
    pretrain = [i for i, (words, _) in enumerate(runs) if "course_tools.pretrain" in words]
    assert len(pretrain) == 1, "make checkpoints runs once"
    executing = [i for i, (words, paths) in enumerate(runs) if paths or any(
        w in ("tests", "tests/test_browser.py", "tests/test_nbgrader.py", "tests/test_grade.py") for w in words)
                 and "--ignore=tests/test_grade.py" not in words]
    assert executing and min(executing) > pretrain[0], "a run that executes notebooks starts after make checkpoints"


def test_make_test_runs_every_solution_strictly_once_the_english_at_the_default_thread_count():
    runs = _make_test_dry_run()
    solutions = set((ROOT / "solutions").glob("*.ipynb")) | set((ROOT / "editions").glob("*/solutions/*.ipynb"))
    assert sorted(_notebooks_run(runs, "--nbval")) == sorted(solutions)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    one_thread = re.search(r"^ONE_THREAD := (.*)$", makefile, re.M).group(1).split()
    assert re.search(r"^\$\(ONE_THREAD\) nbval-solutions-% nbval-notebooks-%: export OMP_NUM_THREADS := 1$",
                     makefile, re.M)
    assert "nbval-solutions" not in one_thread and "unit-grader" in one_thread and "browser" in one_thread
    unit = [words for words, _ in runs if "tests" in words or any(w.startswith("tests/test_") for w in words)]
    # a run that takes a whole file (not one test of it with -k, as make test-setup takes the one test that only
    # runs under TFS_TEST_SETUP=1) has it left out of the run of the others
    named = {w for words in unit if "-k" not in words for w in words
             if w.startswith("tests/test_") and "--ignore" not in w}
    ignored = {w.split("=", 1)[1] for words in unit for w in words if w.startswith("--ignore=")}
    assert named == ignored, "every test file that a run of its own takes is left out of the run of the others"


def test_make_outputs_trains_the_checkpoints_before_it_executes_the_solutions():
    """docs/course-authors.md: make outputs and make outputs-es run make checkpoints first, so that the notebooks
    they execute load the one-thread models rather than train their own."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("outputs", "outputs-%"):
        rule = re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.M)
        assert rule and "checkpoints" in rule.group(1).split(), target
