"""`make lab` opens JupyterLab without its news pop-up: the repository's settings override is in force."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

OVERRIDES = ROOT / "course_tools" / "jupyterlab-overrides.json"
INSTALLED = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def test_the_override_is_installed_in_the_environment():
    assert json.loads(OVERRIDES.read_text()) == {
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
    assert INSTALLED.exists(), "make setup copies course_tools/jupyterlab-overrides.json into the environment"
    assert json.loads(INSTALLED.read_text()) == json.loads(OVERRIDES.read_text())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not INSTALLED.exists(), reason="the environment was not set up with make")
def test_a_running_jupyterlab_serves_news_and_update_checks_switched_off(tmp_path):
    port, token = _free_port(), "course-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "user-settings"))
    jupyter = Path(sys.executable).parent / "jupyter"
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
         "--ServerApp.port_retries=0", f"--notebook-dir={ROOT}", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    settings = json.loads(response.read())
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    defaults = settings["schema"]["properties"]  # the override becomes the defaults the front end uses
    assert defaults["fetchNews"]["default"] == "false"
    assert defaults["checkForUpdates"]["default"] is False


def test_the_students_jupyterlab_has_nbgrader_switched_off():
    """make setup installs course_tools/jupyter/: nbgrader's lab extension and server extensions are off."""
    etc = Path(sys.prefix) / "etc" / "jupyter"
    if not (etc / "labconfig" / "page_config.json").exists():
        pytest.skip("the environment was not set up with make")
    page = json.loads((etc / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"]["@jupyter/nbgrader"] is True
    server = json.loads((etc / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert server and not any(server.values()), server
    result = subprocess.run([str(Path(sys.executable).parent / "jupyter"), "server", "extension", "list"],
                            capture_output=True, text=True, timeout=120)
    listed = [line for line in (result.stdout + result.stderr).splitlines() if line.strip().startswith("nbgrader.")
              and ("enabled" in line or "disabled" in line)]
    assert listed and all("disabled" in line for line in listed), listed
    instructor = json.loads((ROOT / "course_tools" / "jupyter" / "instructor" / "page_config.json").read_text())
    assert instructor["disabledExtensions"]["@jupyter/nbgrader"] is False, "make lab-instructor switches them on"
