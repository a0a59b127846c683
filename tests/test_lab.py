"""The JupyterLab students open (`make lab`, or `jupyter lab` in a conda environment after
`python -m course_tools.jupyter`) has no news pop-up and no nbgrader; `make lab-instructor COURSE=...` opens an
nbgrader course with nbgrader's interface on, and leaves the students' settings as they were."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

from course_tools import jupyter as settings

JUPYTER = Path(sys.executable).parent / "jupyter"
NBGRADER_SERVER = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
                   "nbgrader.server_extensions.course_list", "nbgrader.server_extensions.validate_assignment"]


def test_the_students_settings_are_what_the_course_says():
    assert json.loads((settings.HERE / "overrides.json").read_text(encoding="utf-8")) == {
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
    page = json.loads((settings.HERE / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
    assert page == {"disabledExtensions": {"@jupyter/nbgrader": True}}
    server = json.loads((settings.HERE / "jupyter_server_config.json").read_text(encoding="utf-8"))
    assert server == {"ServerApp": {"jpserver_extensions": {name: False for name in NBGRADER_SERVER}}}
    instructor_page = json.loads((settings.INSTRUCTOR / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
    assert instructor_page == {"disabledExtensions": {"@jupyter/nbgrader": False}}
    instructor = json.loads((settings.INSTRUCTOR / "jupyter_server_config.json").read_text(encoding="utf-8"))
    assert instructor == {"ServerApp": {"jpserver_extensions": {name: True for name in NBGRADER_SERVER}}}


def test_they_are_installed_where_this_environments_jupyter_reads_them():
    from jupyter_core.paths import ENV_CONFIG_PATH
    from jupyterlab.commands import get_app_dir

    assert Path(ENV_CONFIG_PATH[0]) == Path(sys.prefix) / "etc" / "jupyter"
    assert Path(get_app_dir()) / "settings" == Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
    assert settings.differences(Path(sys.prefix)) == [], \
        "the students' settings are not installed: run `python -m course_tools.jupyter` (make setup does)"


def test_the_install_command_merges_into_an_environment(tmp_path, capsys):
    """What make setup runs, and conda users run once: merged into the files there, other settings kept."""
    etc = tmp_path / "etc" / "jupyter"
    (etc / "labconfig").mkdir(parents=True)
    (etc / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyter/nbgrader": False, "other": True}, "lockedExtensions": {"x": True}}),
        encoding="utf-8")
    (etc / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"root_dir": "/srv"}}),
                                                    encoding="utf-8")
    assert settings.main(["--prefix", str(tmp_path), "--check"]) == 1
    assert settings.main(["--prefix", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("installed the students' JupyterLab settings") == 3
    page = json.loads((etc / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
    assert page == {"disabledExtensions": {"@jupyter/nbgrader": True, "other": True}, "lockedExtensions": {"x": True}}
    server = json.loads((etc / "jupyter_server_config.json").read_text(encoding="utf-8"))["ServerApp"]
    assert server["root_dir"] == "/srv" and server["jpserver_extensions"] == {n: False for n in NBGRADER_SERVER}
    installed = tmp_path / "share/jupyter/lab/settings/overrides.json"
    assert json.loads(installed.read_text(encoding="utf-8")) == json.loads(
        (settings.HERE / "overrides.json").read_text(encoding="utf-8"))
    assert settings.main(["--prefix", str(tmp_path)]) == 0 and capsys.readouterr().out == "", "nothing to write"
    assert settings.main(["--prefix", str(tmp_path), "--check"]) == 0


def test_the_students_server_extensions_are_off():
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    result = subprocess.run([str(JUPYTER), "server", "extension", "list"], capture_output=True, text=True,
                            timeout=120, env=env)
    listed = [line for line in (result.stdout + result.stderr).splitlines() if line.strip().startswith("nbgrader.")
              and ("enabled" in line or "disabled" in line)]
    assert len(listed) == len(NBGRADER_SERVER) and all("disabled" in line for line in listed), listed


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def _serve(command: list[str], env: dict, url: str, cwd: Path = ROOT) -> subprocess.Popen:
    """Start a JupyterLab (in its own process group) and wait until url answers."""
    server = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return server
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                _stop(server)
                raise RuntimeError(f"JupyterLab did not start: {server.stderr.read()[-2000:]}")
            time.sleep(0.5)


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _page_config(base: str, token: str) -> dict:
    """The configuration the /lab page hands to the front end (its disabled extensions among it)."""
    status, page = _get(f"{base}/lab?token={token}")
    assert status == 200
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.DOTALL)
    return json.loads(found[1])


def _disabled(config: dict) -> set:
    disabled = config.get("disabledExtensions", [])
    return {k for k, v in disabled.items() if v} if isinstance(disabled, dict) else set(disabled)


def _user_dirs(tmp_path: Path) -> dict:
    """The environment of a JupyterLab with a fresh user folder, which reads only the environment's settings
    (and those JUPYTER_CONFIG_PATH names)."""
    env = {k: v for k, v in os.environ.items() if k not in {"JUPYTER_CONFIG_PATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    return env | {"JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
                  "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),
                  "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}


def test_the_students_jupyterlab_has_no_news_and_no_nbgrader(tmp_path):
    port, token = _free_port(), "course-test"
    base = f"http://127.0.0.1:{port}"
    server = _serve([str(JUPYTER), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                     f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0", f"--notebook-dir={ROOT}",
                     "--allow-root"], _user_dirs(tmp_path), f"{base}/api/status?token={token}")
    try:
        status, body = _get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}")
        defaults = json.loads(body)["schema"]["properties"]  # the override becomes the defaults the front end uses
        config = _page_config(base, token)
        formgrader = _get(f"{base}/formgrader?token={token}")[0]
    finally:
        _stop(server)
    assert defaults["fetchNews"]["default"] == "false" and defaults["checkForUpdates"]["default"] is False
    assert "@jupyter/nbgrader" in _disabled(config)
    assert formgrader == 404


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_lab_instructor_opens_the_course_with_nbgrader_on(tmp_path):
    """make lab-instructor COURSE=... starts JupyterLab in the course folder, nbgrader's lab extension and
    formgrader on; the environment still holds the students' settings afterwards."""
    course = tmp_path / "my course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "tfs"\n',
                                               encoding="utf-8")
    port, token = _free_port(), "course-instructor-test"
    base = f"http://127.0.0.1:{port}"
    lab_args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} --ServerApp.port_retries=0"
    server = _serve(["make", "--no-print-directory", "-s", "lab-instructor", f"COURSE={course}",
                     f"LAB_ARGS={lab_args}"], _user_dirs(tmp_path), f"{base}/api/status?token={token}")
    try:
        config = _page_config(base, token)
        formgrader, page = _get(f"{base}/formgrader?token={token}")
        contents = json.loads(_get(f"{base}/api/contents?token={token}")[1])
    finally:
        _stop(server)
    assert "@jupyter/nbgrader" not in _disabled(config), _disabled(config)
    assert formgrader == 200 and "formgrader" in page.lower()
    assert [item["name"] for item in contents["content"]] == ["nbgrader_config.py"], "opened in the course folder"
    assert settings.differences(Path(sys.prefix)) == [], "the students' settings stay as they were"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_lab_instructor_says_what_it_needs(tmp_path):
    done = subprocess.run(["make", "--no-print-directory", "-s", "lab-instructor"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "make lab-instructor COURSE=/path/to/course" in done.stderr
    done = subprocess.run(["make", "--no-print-directory", "-s", "lab-instructor", f"COURSE={tmp_path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "has no nbgrader_config.py" in done.stderr and "nbgrader quickstart" in done.stderr
