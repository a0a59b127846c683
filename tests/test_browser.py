"""The course as a student sees it: JupyterLab in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium).

One JupyterLab server, started the way `make lab` starts it, and one browser serve every test. For
every English student notebook, and notebook 01 of every other edition (editions/*/EDITION), the test
runs all cells from the Run menu and asserts what the student must see: every exercise's check line
(📝 in a pristine notebook), no error output, every figure as an image. A notebook with one exercise
solved right and one wrong shows a ✅ and a ❌ line. No nbgrader menu shows. When an assertion
fails, a screenshot is saved in .cache/browser-screenshots/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, solution_source, with_answers

from helpers.checks import exercises_in

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SCREENSHOTS = ROOT / ".cache" / "browser-screenshots"
WORK = ROOT / ".cache" / "browser-notebooks"  # notebooks written for a test, served by the same JupyterLab
RUN_TIMEOUT = 600  # seconds for one notebook to run (notebook 06 trains its model when no checkpoint is cached)

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the browser test: install Chromium with "
                           "`apt-get install chromium chromium-driver` (.ci/run does)")
    pytest.skip("no Chromium here: `apt-get install chromium chromium-driver` to run the browser test",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402  (only once Chromium is known to be here)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

EDITIONS = sorted(path.parent.name for path in (ROOT / "editions").glob("*/EDITION"))
ENGLISH = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    """A JupyterLab server as `make lab` starts it (the environment's settings: no nbgrader, no news),
    with a fresh user folder in which notebooks render whole (no windowing), so every output is in the page,
    and hidden folders served (the notebooks a test writes live in .cache/)."""
    home = Path(tempfile.mkdtemp(prefix="tfs-lab-"))
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), "course-browser-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               MPLCONFIGDIR=str(ROOT / ".cache" / "matplotlib"), OMP_WAIT_POLICY="PASSIVE")
    log = open(home / "lab.log", "w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0", f"--notebook-dir={ROOT}",
         "--allow-root", "--ContentsManager.allow_hidden=True"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("JupyterLab did not start: " + (home / "lab.log").read_text()[-2000:])
            time.sleep(0.5)
    yield {"base": base, "token": token, "log": home / "lab.log"}
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1400,1000",
                     f"--user-data-dir={tempfile.mkdtemp(prefix='tfs-chromium-')}"):
        options.add_argument(argument)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def _screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / f"{name.replace('/', '_')}.png"
    driver.save_screenshot(str(target))
    return target


def _wait(driver, condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - the page is still being built
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


def _click_menu(driver, menu: str, command: str) -> None:
    """Open a menu of the menu bar by its label and click the item of a JupyterLab command."""
    item = _wait(driver, lambda: next(e for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
                                      if e.text.strip() == menu), 30, f"the {menu} menu")
    item.click()
    entry = _wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, f'.lm-Menu-item[data-command="{command}"]'),
                  10, f"the {command} menu item")
    entry.click()


def run_all(driver, lab, relative: str) -> dict:
    """Open a notebook in JupyterLab, run all its cells from the Run menu, and read what the page shows."""
    driver.get(f"{lab['base']}/lab/tree/{relative}?reset&token={lab['token']}")
    _wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 120, "the notebook")
    _wait(driver, lambda: "| Idle" in driver.find_element(By.CSS_SELECTOR, ".jp-StatusBar-Widget").text, 120,
          "the kernel")

    def started():
        return any(p.text.strip("[]: ") for p in driver.find_elements(By.CSS_SELECTOR, ".jp-CodeCell .jp-InputPrompt"))

    for attempt in range(3):  # a kernel that reports idle a moment before it takes requests ignores Run All
        _click_menu(driver, "Run", "runmenu:run-all")
        try:
            _wait(driver, started, 20, "the first cell to start")
            break
        except AssertionError:
            if attempt == 2:
                raise

    def idle():
        prompts = [p.text for p in driver.find_elements(By.CSS_SELECTOR, ".jp-CodeCell .jp-InputPrompt")]
        status = driver.find_element(By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator").get_attribute("data-status")
        return status == "idle" and not any("*" in p for p in prompts)

    def finished():  # idle twice, a second apart: the queue of Run All is empty
        if not idle():
            return False
        time.sleep(1)
        return idle()

    time.sleep(2)
    _wait(driver, finished, RUN_TIMEOUT, f"every cell of {relative} to run")
    outputs = driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")
    return {
        "text": "\n".join(o.text for o in outputs),
        "errors": [o.text[:300] for o in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")
                   if o.get_attribute("data-mime-type") == "application/vnd.jupyter.stderr"
                   and ("Traceback" in o.text or "Error" in o.text)],
        "images": [(img.size["width"], img.size["height"])
                   for img in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")],
        "menus": [e.text.strip() for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")],
    }


def stored_images(solution: Path) -> int:
    """How many figures the executed solution notebook shows (the student's notebook shows as many)."""
    notebook = nbformat.read(solution, as_version=4)
    return sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []))


def _assert_page(driver, name: str, page: dict, symbols: dict[str, str], images: int) -> None:
    try:
        assert not page["errors"], f"error output in {name}: {page['errors'][0]}"
        for exercise, symbol in symbols.items():
            assert f"{symbol} {exercise}:" in page["text"], f"{name}: no '{symbol} {exercise}:' line"
        assert len(page["images"]) == images, f"{name}: {len(page['images'])} figures shown, {images} expected"
        assert all(w > 50 and h > 50 for w, h in page["images"]), f"{name}: a figure did not render"
        assert not any("nbgrader" in m.lower() or "formgrader" in m.lower() for m in page["menus"]), page["menus"]
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(driver, name)})") from None


@pytest.mark.parametrize("name", ENGLISH)
def test_every_student_notebook_runs_from_the_run_menu(browser, lab, name):
    page = run_all(browser, lab, f"notebooks/{name}")
    stem = name[:-len(".ipynb")]
    _assert_page(browser, f"notebooks/{name}", page, {e.name: "📝" for e in exercises_in(stem)},
                 stored_images(ROOT / "solutions" / name))


@pytest.mark.parametrize("language", [language for language in EDITIONS if language != "en"])
def test_notebook_01_of_every_edition_runs_from_the_run_menu(browser, lab, language):
    name = "01_positional_encoding.ipynb"
    page = run_all(browser, lab, f"editions/{language}/notebooks/{name}")
    _assert_page(browser, f"editions/{language}/notebooks/{name}", page,
                 {e.name: "📝" for e in exercises_in("01_positional_encoding")},
                 stored_images(ROOT / "editions" / language / "solutions" / name))


def test_a_right_and_a_wrong_answer_show_their_lines(browser, lab):
    wrong_rotation = ("def rotation_matrix(k, d_model):\n"
                      "    return np.eye(d_model)  # forgot to rotate\n")
    WORK.mkdir(parents=True, exist_ok=True)
    with_answers(WORK, "01_positional_encoding", {
        "create_position_matrix": solution_source("01_positional_encoding", "create_position_matrix"),
        "rotation_matrix": wrong_rotation})
    page = run_all(browser, lab, f"{WORK.relative_to(ROOT).as_posix()}/01_positional_encoding.ipynb")
    _assert_page(browser, "solved_01", page, {"create_position_matrix": "✅", "rotation_matrix": "❌",
                                              "apply_rope": "📝"},
                 stored_images(ROOT / "solutions" / "01_positional_encoding.ipynb"))


def test_the_log_has_no_nbgrader_warning(lab):
    assert "nbgrader" not in lab["log"].read_text().lower()


def test_the_grading_report_renders(browser, tmp_path):
    from course_tools.report import write_report

    from test_report import REPORTS

    target = tmp_path / "report.html"
    write_report(REPORTS, target, language="en")
    browser.get(target.as_uri())
    try:
        chart = browser.find_element(By.ID, "mistake-chart")
        assert chart.size["width"] > 300 and chart.size["height"] > 40
        assert len(chart.find_elements(By.TAG_NAME, "rect")) == 3, "one bar per mistake found"
        rows = browser.find_elements(By.CSS_SELECTOR, "#students tr")
        assert len(rows) == 3, "a header and a row per graded notebook"
        failed = browser.find_elements(By.CSS_SELECTOR, "#students td.fail")
        assert failed and failed[0].value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
        assert all(bar.size["width"] > 0 for bar in browser.find_elements(By.CSS_SELECTOR, "svg.bar"))
        _screenshot(browser, "report")  # kept, to look at
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(browser, 'report')})") from None
