"""The course as a student sees it: JupyterLab in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium), and the grader's report in the same browser.

One JupyterLab server, started the way `make lab` starts it (the environment's settings: nbgrader off; its kernels
start as a student's do), and one browser page serve the whole module. For every English student notebook, and
notebook 01 of every edition whose EDITION lists it, the test opens a byte-for-byte copy in .cache/browser-notebooks/
(autosave is off, and the copy must be unchanged afterwards), runs all cells from the Run menu and asserts what the
student must see:

- every exercise's check line exactly once, in that exercise's check cell (📝 in a pristine notebook, and no ✅ or
  ❌ anywhere in it);
- no error output (found by its output type, whatever its text says; a warning on stderr is no error), and no
  output that JupyterLab failed to render;
- every figure as an image that loaded (naturalWidth), as many as the executed solution shows.

A notebook with one exercise solved right and one wrong shows its ✅ and ❌ lines. No nbgrader plugin, command,
menu, side panel or launcher item exists, /formgrader answers 404, and the log never names nbgrader. The grader's
report renders (bars, the chart of mistakes with their hints, the table's colours matching its legend, a sticky
student column, no request leaving the page), and `tfs-grade FOLDER --report` on small English and Spanish folders
writes a page whose counts, unreadable file and skipped file are right; its --feedback pages show each student, in
the edition's language, their exercises' messages, points and the version that graded. When an assertion fails, a
screenshot is saved in .cache/browser-screenshots/.

The server exposes the application object to the page (--LabApp.expose_app_in_browser), as JupyterLab's own
browser tests do: the test opens notebooks with JupyterLab's docmanager:open command instead of reloading the
page, and reads each output's type from the notebook model, which the page does not show.

Every wait is for an event (a server that answers, a kernel that is idle, a cell that finished) and long enough
for a cold run on a machine half as fast as a busy CI machine: a notebook may take as long as it needs while its
cells keep finishing (notebooks 06 and 07 load the models that `make checkpoints` trained, or train them when run
alone).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, solution_source, with_answers

from course_tools.grade import check_cells
from helpers.checks import exercises_in
from helpers.i18n import tr

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SCREENSHOTS = ROOT / ".cache" / "browser-screenshots"
WORK = ROOT / ".cache" / "browser-notebooks"  # the copies JupyterLab opens (the repository's notebooks stay shut)
CELL_TIMEOUT = 1200  # seconds one cell may run (notebooks 06 and 07 train their models when no checkpoint is cached)
START_TIMEOUT = 300  # seconds for a server, a page or a kernel to start on a busy machine
POLL = 0.25  # seconds between two looks at the page

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the browser test: install Chromium with "
                           "`apt-get install chromium chromium-driver` (.ci/run does)")
    pytest.skip("no Chromium here: `apt-get install chromium chromium-driver` to run the browser test",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402  (only once Chromium is known to be here)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

NB01 = "01_positional_encoding"
ENGLISH = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
EDITIONS = sorted(path.parent.name for path in (ROOT / "editions").glob("*/EDITION")
                  if NB01 in path.read_text(encoding="utf-8").split())
SYMBOLS = "📝✅❌"
CHECK_LINE = re.compile(rf"^([{SYMBOLS}]) (\w+):", re.MULTILINE)
NBGRADER = re.compile(r"nbgrader|formgrader|assignment|course list", re.IGNORECASE)  # its menu, panels, items


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(folder: Path, plugin: str, values: dict) -> None:
    """A user setting of a JupyterLab plugin ("@jupyterlab/x-extension:name")."""
    package, name = plugin.split(":")
    target = folder / package / f"{name}.jupyterlab-settings"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(values), encoding="utf-8")


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except OSError:  # not listening yet
        return 0, b""


@pytest.fixture(scope="module")
def lab():
    """A JupyterLab server as `make lab` starts it (the environment's settings: no nbgrader, no news), with a
    fresh user folder in which notebooks render whole (no windowing: every output is in the page), autosave is
    off, closing a notebook shuts its kernel down, and hidden folders are served (the copies live in .cache/)."""
    home = Path(tempfile.mkdtemp(prefix="tfs-lab-"))
    _settings(home / "settings", "@jupyterlab/notebook-extension:tracker", {"windowingMode": "none",
                                                                            "kernelShutdown": True})
    _settings(home / "settings", "@jupyterlab/docmanager-extension:plugin", {"autosave": False})
    port, token = _free_port(), "course-browser-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               MPLCONFIGDIR=str(ROOT / ".cache" / "matplotlib"), OMP_WAIT_POLICY="PASSIVE")
    env.pop("JUPYTER_CONFIG_PATH", None)  # the students' settings only
    log = open(home / "lab.log", "w", encoding="utf-8")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0", f"--notebook-dir={ROOT}",
         "--allow-root", "--ContentsManager.allow_hidden=True", "--LabApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while _get(f"{base}/api/status?token={token}")[0] != 200:
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError("JupyterLab did not start: " + (home / "lab.log").read_text(encoding="utf-8")[-2000:])
        time.sleep(POLL)
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
    profile = tempfile.mkdtemp(prefix="tfs-chromium-")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(argument)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(START_TIMEOUT)
    driver.set_script_timeout(START_TIMEOUT)
    # selenium waits 120 s for chromedriver's answer to a command: longer than the page and script time-outs, so
    # that a slow command ends with chromedriver's own time-out error rather than a read time-out of the socket
    driver.command_executor.client_config.timeout = START_TIMEOUT + 60
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def jupyterlab(browser, lab):
    """The browser on JupyterLab (loaded once, unless a test took the page elsewhere)."""
    if not browser.execute_script("return !!window.jupyterapp"):
        browser.get(f"{lab['base']}/lab?reset&token={lab['token']}")
        _wait(browser, lambda: browser.execute_script("return !!(window.jupyterapp && window.jupyterapp.started)"),
              START_TIMEOUT, "JupyterLab to load")
        browser.execute_async_script("window.jupyterapp.restored.then(() => arguments[0](true))")
    return browser


def _screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
    driver.save_screenshot(str(target))
    return target


def _wait(driver, condition, seconds: float, what: str, progress=None):
    """condition()'s first true value, looked for every POLL seconds for up to seconds; with progress (a function),
    the seconds count from the last change of progress() (a notebook that is still finishing cells is waited for)."""
    deadline, last = time.monotonic() + seconds, None
    while True:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - the page is still being built
            value = None
        if value:
            return value
        if progress is not None:
            try:
                now = progress()
            except Exception:  # noqa: BLE001 - as above
                now = last
            if now != last:
                deadline, last = time.monotonic() + seconds, now
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what} "
                                 f"(screenshot: {_screenshot(driver, 'timeout')})")
        time.sleep(POLL)


def _click_menu(driver, menu: str, command: str) -> None:
    """Open a menu of the menu bar by its label and click the item of a JupyterLab command."""
    item = _wait(driver, lambda: next(e for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
                                      if e.text.strip() == menu), START_TIMEOUT, f"the {menu} menu")
    item.click()
    entry = _wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, f'.lm-Menu-item[data-command="{command}"]'),
                  60, f"the {command} menu item")
    entry.click()


# Every code cell of the notebook in the main area: its outputs as the model holds them (type) and as the page
# shows them (mime type, text, images).
READ_CELLS = """
const panel = window.jupyterapp.shell.currentWidget;
return panel.content.widgets.map(cell => {
  if (cell.model.type !== 'code') return null;
  const nodes = [...cell.node.querySelectorAll('.jp-OutputArea-output')];
  return {
    outputs: cell.model.outputs.toJSON().map(o => ({type: o.output_type, name: o.name || null, ename: o.ename || null,
      evalue: o.evalue || null, png: !!(o.data && o.data['image/png'])})),
    mimes: nodes.map(n => n.getAttribute('data-mime-type')),
    text: nodes.map(n => n.innerText).join('\\n'),
    images: [...cell.node.querySelectorAll('.jp-OutputArea-output img')].map(
      img => [img.complete, img.naturalWidth, img.naturalHeight]),
  };
});
"""
# The notebook in the main area: its kernel's status, how many cells run or wait ([*]), how many have run.
STATE = """
const panel = window.jupyterapp.shell.currentWidget, cells = panel.content.widgets.filter(c => c.model.type === 'code');
return [panel.sessionContext.session?.kernel?.status || null,
        cells.filter(c => c.node.querySelector('.jp-InputPrompt').textContent.includes('*')).length,
        cells.filter(c => c.model.executionCount !== null).length];
"""


def run_all(driver, relative: str) -> list:
    """Open a notebook in JupyterLab (closing the one before and shutting its kernel down), run all its cells
    from the Run menu, and read what the page shows."""
    opened = driver.execute_async_script("""
        const [path, done] = arguments;
        const app = window.jupyterapp;
        Promise.all([...app.shell.widgets('main')].map(async w => {
          if (w.sessionContext) await w.sessionContext.shutdown();
          w.dispose();
        })).then(() => app.commands.execute('docmanager:open', {path, factory: 'Notebook'}))
           .then(panel => panel.sessionContext.ready).then(() => done(true), e => done(String(e)));
    """, relative)
    assert opened is True, f"JupyterLab could not open {relative}: {opened}"
    _wait(driver, lambda: driver.execute_script(STATE)[0] == "idle", START_TIMEOUT, f"the kernel of {relative}")

    def started():
        _, running, ran = driver.execute_script(STATE)
        return running or ran

    for attempt in range(3):  # a kernel that reports idle a moment before it takes requests ignores Run All
        _click_menu(driver, "Run", "runmenu:run-all")
        try:
            _wait(driver, started, 60, "the first cell to start")
            break
        except AssertionError:
            if attempt == 2:
                raise

    def idle():
        status, running, _ = driver.execute_script(STATE)
        return status == "idle" and not running

    def finished():  # idle twice, a moment apart: the queue of Run All is empty
        if not idle():
            return False
        time.sleep(2 * POLL)
        return idle()

    _wait(driver, finished, CELL_TIMEOUT, f"every cell of {relative} to run",
          progress=lambda: driver.execute_script(STATE)[2])  # how many cells have run
    return driver.execute_script(READ_CELLS)


def stored_images(solution: Path) -> int:
    """How many figures the executed solution notebook shows (the student's notebook shows as many)."""
    notebook = nbformat.read(solution, as_version=4)
    return sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []))


def problems(cells: list, notebook: Path, symbols: dict[str, str], images: int) -> list[str]:
    """What is wrong with what the page shows (nothing when it is what the student must see)."""
    found = []
    where = check_cells(nbformat.read(notebook, as_version=4))
    for index, cell in enumerate(cells):
        if cell is None:
            continue
        for output in cell["outputs"]:
            if output["type"] == "error":
                found.append(f"cell {index}: error output {output['ename']}: {(output['evalue'] or '')[:200]}")
        shown_stderr = cell["mimes"].count("application/vnd.jupyter.stderr")
        model_stderr = sum(o["type"] == "error" or o["name"] == "stderr" for o in cell["outputs"])
        if shown_stderr > model_stderr:
            found.append(f"cell {index}: an output failed to render: {cell['text'][-200:]}")
        for symbol, name in CHECK_LINE.findall(cell["text"]):
            if name not in symbols:
                found.append(f"cell {index}: a check line for {name}, no exercise of this notebook")
            elif index not in where.get(name, []):
                found.append(f"cell {index}: {symbol} {name} outside its check cell {where.get(name)}")
    for name, symbol in symbols.items():
        lines = [f"{s} {n}" for cell in cells if cell for s, n in CHECK_LINE.findall(cell["text"]) if n == name]
        if lines != [f"{symbol} {name}"]:
            found.append(f"{name}: check lines {lines}, expected exactly ['{symbol} {name}']")
    if set(symbols.values()) == {"📝"}:
        marks = [index for index, cell in enumerate(cells) if cell and re.search("[✅❌]", cell["text"])]
        if marks:
            found.append(f"a pristine notebook shows ✅ or ❌ in cells {marks}")
    shown = [image for cell in cells if cell for image in cell["images"]]
    if len(shown) != images or sum(o["png"] for cell in cells if cell for o in cell["outputs"]) != images:
        found.append(f"{len(shown)} figures shown, {images} expected")
    if not all(complete and width > 0 and height > 0 for complete, width, height in shown):
        found.append(f"a figure did not load: {shown}")
    return found


def check_notebook(driver, source: Path, symbols: dict[str, str], images: int, copy_as: str) -> None:
    """Open a copy of source, run all, assert what the page shows and that the copy was not written to."""
    copy = WORK / copy_as
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    cells = run_all(driver, copy.relative_to(ROOT).as_posix())
    found = problems(cells, copy, symbols, images)
    if hashlib.sha256(copy.read_bytes()).hexdigest() != before:
        found.append(f"{copy} was written to while it was open (autosave must be off)")
    if found:
        first = next((int(m[1]) for p in found if (m := re.match(r"cell (\d+)", p))), None)
        if first is not None:
            driver.execute_script("window.jupyterapp.shell.currentWidget.content.widgets[arguments[0]]"
                                  ".node.scrollIntoView()", first)
        raise AssertionError(f"{copy_as}: " + "; ".join(found) + f" (screenshot: {_screenshot(driver, copy_as)})")


@pytest.fixture(scope="module")
def untouched():
    """The repository's notebooks are byte-for-byte the same after the module as before it."""
    paths = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("editions/*/notebooks/*.ipynb"))
    before = {p: p.read_bytes() for p in paths}
    yield
    assert [p for p in paths if p.read_bytes() != before[p]] == [], "the browser test changed these notebooks"


@pytest.mark.parametrize("stem", ENGLISH)
def test_every_student_notebook_runs_from_the_run_menu(jupyterlab, untouched, stem):
    check_notebook(jupyterlab, ROOT / "notebooks" / f"{stem}.ipynb", {e.name: "📝" for e in exercises_in(stem)},
                   stored_images(ROOT / "solutions" / f"{stem}.ipynb"), f"en/{stem}.ipynb")


@pytest.mark.parametrize("language", [language for language in EDITIONS if language != "en"])
def test_notebook_01_of_every_edition_runs_from_the_run_menu(jupyterlab, untouched, language):
    edition = ROOT / "editions" / language
    check_notebook(jupyterlab, edition / "notebooks" / f"{NB01}.ipynb", {e.name: "📝" for e in exercises_in(NB01)},
                   stored_images(edition / "solutions" / f"{NB01}.ipynb"), f"{language}/{NB01}.ipynb")


def test_a_right_and_a_wrong_answer_show_their_lines(jupyterlab, untouched, tmp_path):
    wrong_rotation = ("def rotation_matrix(k, d_model):\n"
                      "    return np.eye(d_model)  # forgot to rotate\n")
    source = with_answers(tmp_path, NB01, {"create_position_matrix": solution_source(NB01, "create_position_matrix"),
                                           "rotation_matrix": wrong_rotation})
    check_notebook(jupyterlab, source, {"create_position_matrix": "✅", "rotation_matrix": "❌", "apply_rope": "📝"},
                   stored_images(ROOT / "solutions" / f"{NB01}.ipynb"), f"solved/{NB01}.ipynb")


def test_an_error_output_is_found_by_its_type_not_its_words(jupyterlab, untouched):
    """A SystemExit (no "Error" in sight) is an error output; a warning that says "Error" on stderr is not."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('import warnings\nwarnings.warn("an Error, in words only")'),
        nbformat.v4.new_code_cell('print("fine")'),
        nbformat.v4.new_code_cell('raise SystemExit("bye")')],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    copy = WORK / "errors" / "errors.ipynb"
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, copy)
    cells = run_all(jupyterlab, copy.relative_to(ROOT).as_posix())
    assert "Error" in cells[0]["text"] and cells[0]["mimes"] == ["application/vnd.jupyter.stderr"]
    assert problems(cells, copy, {}, 0) == ["cell 2: error output SystemExit: bye"]


def test_a_wait_follows_progress_not_a_fixed_budget(tmp_path, monkeypatch):
    """A notebook that keeps finishing cells is waited for past the seconds given; one that stops is not."""
    monkeypatch.setattr(sys.modules[__name__], "POLL", 0.02)
    monkeypatch.setattr(sys.modules[__name__], "SCREENSHOTS", tmp_path)

    class Page:  # a stand-in for the browser: the screenshot of a time-out is all _wait asks of it
        def save_screenshot(self, path):
            Path(path).write_bytes(b"")

    start = time.monotonic()
    cells = lambda: int((time.monotonic() - start) / 0.1)  # noqa: E731 - one more cell finished every 0.1 s
    assert _wait(Page(), lambda: cells() >= 10, 0.3, "ten cells", progress=cells)  # 1 s, past the 0.3 s
    start = time.monotonic()
    with pytest.raises(AssertionError, match="timed out after 0 s waiting for a stuck cell"):
        _wait(Page(), lambda: False, 0.3, "a stuck cell", progress=lambda: 3)
    assert 0.3 <= time.monotonic() - start < 5


def test_what_the_page_must_not_show_is_named():
    """problems() on made-up pages of notebook 01, whose check cells its own indices locate."""
    notebook = ROOT / "notebooks" / f"{NB01}.ipynb"
    where = check_cells(nbformat.read(notebook, as_version=4))
    symbols = {name: "📝" for name in where}
    first = where["create_position_matrix"][0]  # its check cell; the cell after it is no check cell
    assert first + 1 not in {i for found in where.values() for i in found}

    def page(**changes):
        cells = [{"outputs": [], "mimes": [], "text": "", "images": []} for _ in range(70)]
        for name, (index, *_) in where.items():
            cells[index] = {"outputs": [{"type": "execute_result", "name": None, "png": False}],
                            "mimes": ["text/plain"], "text": f"📝 {name}: not implemented yet", "images": []}
        for index, cell in changes.items():
            cells[int(index[1:])] = {"outputs": [], "mimes": [], "text": "", "images": []} | cell
        return cells

    assert problems(page(), notebook, symbols, 0) == []
    twice = page(**{f"c{first}": {"text": "📝 create_position_matrix: x\n📝 create_position_matrix: x"}})
    assert "check lines ['📝 create_position_matrix', '📝 create_position_matrix']" in " ".join(
        problems(twice, notebook, symbols, 0))
    assert any("outside its check cell" in p for p in problems(page(**{f"c{first + 1}": {"text": "📝 apply_rope: x"}}),
                                                                notebook, symbols, 0))
    assert any("shows ✅ or ❌" in p for p in problems(page(c3={"text": "✅ done"}), notebook, symbols, 0))
    broken = page(c4={"outputs": [{"type": "display_data", "name": None, "png": True}],
                      "mimes": ["application/vnd.jupyter.stderr"], "images": []})
    assert any("failed to render" in p for p in problems(broken, notebook, symbols, 1))
    unloaded = page(c4={"outputs": [{"type": "display_data", "name": None, "png": True}], "mimes": ["image/png"],
                        "images": [[True, 0, 0]]})
    assert any("did not load" in p for p in problems(unloaded, notebook, symbols, 1))


def test_no_instructor_tooling_in_the_students_jupyterlab(jupyterlab, lab):
    driver = jupyterlab
    try:
        plugins = driver.execute_script("return window.jupyterapp.listPlugins()")
        assert len(plugins) > 50 and not [p for p in plugins if NBGRADER.search(p)], "an nbgrader plugin is loaded"
        commands = driver.execute_script("return window.jupyterapp.commands.listCommands()")
        assert not [c for c in commands if NBGRADER.search(c)], "an nbgrader command exists"
        menus = [e.text.strip() for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")]
        assert "Run" in menus and not [m for m in menus if NBGRADER.search(m)], menus
        panels = driver.execute_script("return [...document.querySelectorAll('.jp-SideBar .lm-TabBar-tab')].map("
                                       "t => [t.title, t.getAttribute('data-id'), t.textContent].join(' '))")
        assert panels and not [p for p in panels if NBGRADER.search(p)], panels
        _click_menu(driver, "File", "launcher:create")
        cards = _wait(driver, lambda: [c.text for c in driver.find_elements(By.CSS_SELECTOR, ".jp-LauncherCard")],
                      30, "the launcher")
        assert any("Python 3" in c for c in cards) and not [c for c in cards if NBGRADER.search(c)], cards
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(driver, 'nbgrader')})") from None
    for path in ("formgrader", "assignments", "courses"):
        assert _get(f"{lab['base']}/{path}?token={lab['token']}")[0] == 404, f"/{path} is served"


def test_the_log_has_no_nbgrader_warning(lab):
    assert "nbgrader" not in lab["log"].read_text(encoding="utf-8").lower()


def test_jupyterlab_autosave_is_off(lab):
    status, body = _get(f"{lab['base']}/lab/api/settings/@jupyterlab/docmanager-extension:plugin?token={lab['token']}")
    assert status == 200 and json.loads(body)["settings"]["autosave"] is False


# ---------------------------------------------------------------------------------------- the grader's report
def _report_facts(driver) -> dict:
    """What the report page shows, read in one go."""
    return driver.execute_script("""
      const box = e => e.getBoundingClientRect();
      const bars = [...document.querySelectorAll('svg.bar')];
      const chart = document.getElementById('mistake-chart');
      return {
        resources: performance.getEntriesByType('resource').map(r => r.name),
        bars: bars.map(svg => [...svg.querySelectorAll('rect')].map(r => r.getBBox().width)),
        chart: chart && {width: box(chart).width, bars: [...chart.querySelectorAll('rect.mistake-bar')].map(
            r => r.getBBox().width), labels: [...chart.querySelectorAll('text')].map(t => {
              const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width]; }),
            svgWidth: chart.viewBox.baseVal.width},
        hints: [...document.querySelectorAll('#hints tr[id]')].map(tr => [...tr.cells].map(td => td.innerText)),
        summary: document.getElementById('summary').innerText,
        students: [...document.querySelectorAll('#students tr.student')].map(tr => [...tr.cells].map(
            td => [td.innerText, td.className, getComputedStyle(td).backgroundColor, getComputedStyle(td).color])),
        chips: Object.fromEntries([...document.querySelectorAll('.legend .chip')].map(c => [c.classList[1],
            [getComputedStyle(c).backgroundColor, getComputedStyle(c).color]])),
        ungraded: [...document.querySelectorAll('#ungraded tr')].map(tr => [...tr.cells].map(td => td.innerText)),
        skipped: [...document.querySelectorAll('#skipped li')].map(li => li.innerText),
        signs: [...document.querySelectorAll('#signs tr')].slice(1).map(tr => [...tr.cells].map(td => td.innerText)),
      };
    """)


def _assert_report_renders(facts: dict, distinct_mistakes: int) -> None:
    assert facts["resources"] == [], f"the page fetched {facts['resources']}"
    assert facts["bars"] and all(bar and all(w > 0 for w in bar) for bar in facts["bars"]), facts["bars"]
    chart = facts["chart"]
    assert chart and chart["width"] > 300 and len(chart["bars"]) == distinct_mistakes, chart
    assert all(w > 0 for w in chart["bars"])
    clipped = [t for t, left, right in chart["labels"] if left < 0 or right > chart["svgWidth"]]
    assert not clipped, f"labels outside the chart: {clipped}"
    assert len(facts["hints"]) == distinct_mistakes and all(row[-1].strip() for row in facts["hints"])
    for row in facts["students"]:
        for text, classes, background, colour in row[1:-1]:
            status = classes.split()[-1]
            assert (background, colour) == tuple(facts["chips"][status]), f"{status} cell unlike its legend"


def test_the_grading_report_renders(browser, tmp_path):
    from course_tools.report import write_report

    from test_report import REPORTS, hint_text

    driver = browser
    target = tmp_path / "report.html"
    write_report(REPORTS, target, language="en")
    driver.get(target.as_uri())
    try:
        facts = _report_facts(driver)
        _assert_report_renders(facts, 3)
        assert [row[1:4] for row in facts["hints"]] == [
            ["rotation_matrix", "i_for_2i", "2"], ["create_position_matrix", "sin_cos_swapped", "1"],
            ["apply_rope", "(unrecognised)", "1"]]
        assert facts["hints"][0][4] == hint_text("rotation_matrix", "i_for_2i")
        assert [row[0][0] for row in facts["students"]] == ["alice", "bob"], "by score, relative to the folder"
        sticky = driver.execute_script("""  // a narrow screen: the table scrolls sideways, the student column stays
          const box = document.querySelector('.scroll'), first = () => box.querySelector('tr.student td');
          box.style.maxWidth = '200px';
          const before = first().getBoundingClientRect().left;
          box.scrollLeft = 150;
          return [box.scrollLeft, before, first().getBoundingClientRect().left];""")
        assert sticky[0] > 0 and abs(sticky[1] - sticky[2]) < 1, sticky
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(driver, 'report')})") from None


def _class_folder(folder: Path, source: Path) -> None:
    """ana's pristine notebook 01 (in a folder of her own), beto's solved one, carla's with sin and cos swapped,
    dario's file named .ipynb that is no notebook, and a stray .json."""
    (folder / "ana").mkdir(parents=True)
    shutil.copyfile(source, folder / "ana" / f"{NB01}.ipynb")
    for student, swapped in (("beto", False), ("carla", True)):
        notebook = nbformat.read(source, as_version=4)
        for cell in notebook.cells:
            for name in ("create_position_matrix", "rotation_matrix", "apply_rope"):
                if cell.cell_type == "code" and cell.source.startswith(f"def {name}("):
                    cell.source = solution_source(NB01, name)
                    if swapped and name == "create_position_matrix":
                        cell.source = cell.source.replace("np.sin", "SIN").replace("np.cos", "np.sin").replace(
                            "SIN", "np.cos")
        nbformat.write(notebook, folder / f"{student}_{NB01}.ipynb")
    (folder / f"dario_{NB01}.ipynb").write_text('{"cells": "not a list"}', encoding="utf-8")
    (folder / "notas.json").write_text("{}", encoding="utf-8")


GRADED = ["en", "es"]  # the languages of the class folders tfs-grade grades


@pytest.fixture(scope="module", autouse=True)
def graded(request, tmp_path_factory):
    """`tfs-grade FOLDER --report FILE --feedback FOLDER/feedback` of an English and a Spanish class folder, run in
    the background from the module's start (while the notebooks run in JupyterLab) when a test of this module asks
    for its pages."""
    runs = {}
    if any("tfs_grade" in item.name for item in request.session.items):
        for language in GRADED:
            source = ROOT / ("notebooks" if language == "en" else f"editions/{language}/notebooks") / f"{NB01}.ipynb"
            if language != "en" and language not in EDITIONS:
                continue
            folder = tmp_path_factory.mktemp(f"class_{language}")
            _class_folder(folder / "submissions", source)
            runs[language] = (folder, subprocess.Popen(
                [str(Path(sys.executable).parent / "tfs-grade"), str(folder / "submissions"), "--report",
                 str(folder / "report.html"), "--feedback", str(folder / "feedback"), "--gradebook",
                 str(folder / "gradebook.csv"), "--gradebook-layout", "canvas" if language == "en" else "moodle"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, encoding="utf-8"))
    yield runs
    for _, run in runs.values():
        if run.poll() is None:
            run.kill()
        run.communicate()


@pytest.mark.parametrize("language", GRADED)
def test_tfs_grade_writes_a_report_of_a_folder(browser, graded, language):
    """tfs-grade FOLDER --report on a pristine, a solved and a wrong notebook 01, a file named .ipynb that is no
    notebook, and a stray .json: the page counts them right, in the edition's language, and lists the unreadable
    file and the skipped one."""
    if language not in graded:
        pytest.skip(f"no {language} edition of {NB01}")
    folder, run = graded[language]
    _, errors = run.communicate(timeout=CELL_TIMEOUT)
    assert run.returncode == 2, errors[-2000:]  # a file could not be read
    driver = browser
    driver.get((folder / "report.html").as_uri())
    try:
        facts = _report_facts(driver)
        _assert_report_renders(facts, 1)
        assert driver.execute_script("return document.documentElement.lang") == language
        assert [row[1:4] for row in facts["hints"]] == [["create_position_matrix", "sin_cos_swapped", "1"]]
        assert [[c[0] for c in row] for row in facts["students"]] == [
            ["beto", "✓", "✓", "✓", "3/3 · 8/8"], ["carla", "✗1", "✓", "✓", "2/3 · 6/8"],
            ["ana", "–", "–", "–", "0/3 · 0/8"]]
        # 5 of 9 exercises passed (56%); 3 notebooks graded, 3 students, 1 file not graded, 1 file skipped
        assert sorted(re.findall(r"\d+", facts["summary"])) == sorted(["5", "9", "56", "3", "3", "1", "1"])
        assert len(facts["ungraded"]) == 1 and facts["ungraded"][0][0] == f"dario_{NB01}.ipynb"
        assert "cannot read" not in facts["ungraded"][0][1] and str(folder) not in facts["ungraded"][0][1]
        assert facts["skipped"] == ["notas.json"]
        with open(folder / "gradebook.csv", encoding="utf-8-sig", newline="") as table:  # Canvas's, then Moodle's
            book = {row[0]: row[1:] for row in csv.reader(table)}
        earned = {"beto": 8, "carla": 6, "ana": 0}  # notebook 01: 2 + 3 + 3 points
        if language == "en":
            assert book["Points Possible"][4] == "8" and {s: int(book[s][4]) for s in earned} == earned
        else:
            assert list(book)[0] == "username" and {s: int(book[s][0]) for s in earned} == earned
            assert book["dario"][0] == "-", "no grade, Moodle's way"
        # beto handed in the public solution: a sign of copying on each exercise long enough to compare; carla's
        # other two answers are the solution's too
        signs = {tuple(cells[-3:-1]) for cells in facts["signs"]}
        assert signs == {(tr("report:the_solution", "the public solution", in_language=language), "beto, carla"),
                         (tr("report:the_solution", "the public solution", in_language=language), "beto")}, signs
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(driver, f'report_{language}')})") from None


def _feedback_facts(driver) -> dict:
    """What a student's feedback page shows, read in one go."""
    facts = driver.execute_script("""
      const text = id => document.getElementById(id).innerText;
      return {
        lang: document.documentElement.lang,
        resources: performance.getEntriesByType('resource').map(r => r.name),
        total: text('total'), provenance: text('provenance'),
        exercises: [...document.querySelectorAll('li.exercise')].map(li => [li.dataset.exercise,
            {status: li.classList[1], symbol: li.querySelector('.status').innerText,
             points: li.querySelector('.points').innerText, message: li.querySelector('.message').innerText,
             colours: [getComputedStyle(li).backgroundColor, getComputedStyle(li).borderLeftColor]}]),
        ungraded: [...document.querySelectorAll('#ungraded li')].map(li => li.innerText),
        overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      };
    """)
    return {**facts, "exercises": dict(facts["exercises"])}  # in the page's order


def _rgb(colour: str) -> str:
    """A #rrggbb colour as getComputedStyle writes it."""
    return "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (1, 3, 5)))


@pytest.mark.parametrize("language", GRADED)
def test_tfs_grade_writes_feedback_each_student_can_read(browser, graded, language):
    """tfs-grade FOLDER --feedback: one page per student; carla's (sin and cos swapped) shows, in the edition's
    language, the hint of her failed exercise, her two passing ones, her points and which version graded, on a
    phone's width too; ana's (pristine) shows every exercise still to do; dario's lists his unreadable file."""
    from course_tools.report import COLOURS
    from course_tools.versions import provenance
    from helpers import i18n
    from helpers.checks import EXERCISES

    if language not in graded:
        pytest.skip(f"no {language} edition of {NB01}")
    folder, run = graded[language]
    _, errors = run.communicate(timeout=CELL_TIMEOUT)
    assert run.returncode == 2, errors[-2000:]  # a file could not be read
    pages = folder / "feedback"
    assert sorted(p.name for p in pages.iterdir()) == ["ana.html", "beto.html", "carla.html", "dario.html"]
    names = [exercise.name for exercise in exercises_in(NB01)]
    weights = {name: EXERCISES[name].points for name in names}
    driver = browser
    try:
        driver.get((pages / "carla.html").as_uri())
        carla = _feedback_facts(driver)
        assert carla["lang"] == language and carla["resources"] == [], carla
        assert list(carla["exercises"]) == names
        failed = carla["exercises"]["create_position_matrix"]
        english = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
        hint = i18n.tr("create_position_matrix:sin_cos_swapped", english, in_language=language).replace("`", "")
        assert language == "en" or hint != english.replace("`", ""), "the hint is translated"
        assert failed["status"] == "fail" and failed["symbol"] == "❌" and hint in failed["message"], failed
        assert "sin_cos_swapped" not in driver.page_source, "the mistake's code is for instructors"
        assert re.findall(r"\d+", failed["points"]) == ["0", str(weights["create_position_matrix"])]
        assert failed["colours"] == [_rgb(COLOURS["fail"][0]), _rgb(COLOURS["fail"][1])]
        for name in names[1:]:
            passed = carla["exercises"][name]
            assert passed["status"] == "pass" and passed["symbol"] == "✅", passed
            assert re.findall(r"\d+", passed["points"]) == [str(weights[name])] * 2
        earned = sum(weights.values()) - weights["create_position_matrix"]
        assert re.findall(r"\d+", carla["total"]) == [str(earned), str(sum(weights.values())), "2", "3"]
        assert provenance().split(" + ")[0] in carla["provenance"]  # the mark of local changes may differ meanwhile
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", carla["provenance"])
        driver.set_window_size(390, 844)  # a phone: nothing wider than the screen
        try:
            assert _feedback_facts(driver)["overflow"] <= 0
        finally:
            driver.set_window_size(1400, 1000)

        driver.get((pages / "ana.html").as_uri())
        ana = _feedback_facts(driver)
        assert ana["lang"] == language and list(ana["exercises"]) == names
        assert all(e["status"] == "todo" and e["symbol"] == "📝" and e["message"] for e in ana["exercises"].values())
        assert re.findall(r"\d+", ana["total"]) == ["0", str(sum(weights.values())), "0", "3"]

        driver.get((pages / "dario.html").as_uri())
        dario = _feedback_facts(driver)
        assert dario["lang"] == language, "nothing of his graded: the class's language"
        assert dario["total"] == i18n.tr("feedback:nothing", "No notebook of yours was graded.", in_language=language)
        assert dario["exercises"] == {} and len(dario["ungraded"]) == 1, dario
        assert dario["ungraded"][0].startswith(f"dario_{NB01}.ipynb: ") and "cannot read" not in dario["ungraded"][0]
    except AssertionError as error:
        raise AssertionError(f"{error} (screenshot: {_screenshot(driver, f'feedback_{language}')})") from None
