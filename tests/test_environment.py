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
