"""What a person exploring in JupyterLab sees: the quickstart notebook run with Run All in a real browser.

JupyterLab runs as a subprocess on 127.0.0.1 with a token; headless Chromium (the system binary, driven by
playwright) opens a copy of the quickstart notebook whose parameters are the smoke profile plus a temporary
``output_root``, runs all cells, saves, and the test checks the page and the saved notebook. Screenshots go to
``$SEARCHRL_SCREENSHOTS`` (else the test's temporary folder) and their paths are printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from fakes import free_port
from searchrl.config import load_params_file

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"
PROFILE = ROOT / "params" / "quickstart" / "smoke.yaml"
PLOT_CALLS = ("exp.curves(", "exp.bars(")
# Flags for Chromium on a closed network: without the background-networking ones it keeps trying to reach hosts.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RUN_TIMEOUT_S = 300  # Run All on the smoke profile takes about a minute; a slow shared machine gets room

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _chromium() -> str:
    for candidate in (os.environ.get("SEARCHRL_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip("no chromium binary (install Debian's chromium, or set SEARCHRL_CHROMIUM to a Chromium binary)")


def _prepare_notebook(folder: Path, output_root: Path) -> Path:
    """A copy of the quickstart notebook with the smoke profile injected after its parameters cell (not run)."""
    from papermill.iorw import load_notebook_node  # gives every cell the metadata papermill expects
    from papermill.parameterize import parameterize_notebook

    values, _ = load_params_file(PROFILE)
    nb = load_notebook_node(str(NOTEBOOK))
    nb = parameterize_notebook(nb, {**values, "output_root": str(output_root)}, kernel_name="python3",
                               language="python")
    path = folder / NOTEBOOK.name
    nbformat.write(nb, str(path))
    return path


def _lab_settings(folder: Path) -> Path:
    """User settings for the test's JupyterLab: every cell stays rendered (JupyterLab 4 detaches cells that are
    scrolled out of view by default, which would hide outputs from the page), the notebook's own kernel starts
    without a "Select Kernel" dialog (which JupyterLab may raise late, and accepting it restarts the kernel,
    dropping the cells Run All queued), and no "fetch Jupyter news?" notice pops up over the screenshots."""
    tracker = folder / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none", "autoStartDefaultKernel": True}))
    notices = folder / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notices.parent.mkdir(parents=True)
    notices.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    return folder


def _start_lab(work: Path, tmp: Path, port: int, token: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("SEARCHRL_RUN_DIR", None)  # the kernel must create its own run folder under output_root
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "lib"), env.get("PYTHONPATH")]))
    env.update(OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               JUPYTERLAB_SETTINGS_DIR=str(_lab_settings(tmp / "lab-settings")),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "jupyterlab.log", "w")  # noqa: SIM115 (closed with the process, in the fixture)
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_for_server(proc: subprocess.Popen, url: str, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer {url} within {timeout} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def lab(tmp_path):
    """(base URL, token, notebook path, output root) of a running JupyterLab serving a smoke copy of quickstart."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    work, outputs = tmp_path / "work", tmp_path / "outputs"
    work.mkdir()
    notebook = _prepare_notebook(work, outputs)
    port, token = free_port(), "searchrl-browser-test"
    proc = _start_lab(work, tmp_path, port, token)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(proc, f"{base}/api/status?token={token}", tmp_path / "jupyterlab.log")
        yield base, token, notebook, outputs
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SEARCHRL_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _cells_containing(page, text: str):
    return page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=text))


def _accept_kernel_dialog(page) -> bool:
    """JupyterLab sometimes asks which kernel to start although the notebook names it (Python 3 is preselected);
    until someone answers, no kernel starts. True when such a dialog was answered."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and "Select Kernel" in dialog.inner_text():
        dialog.locator(".jp-mod-accept").click()
        return True
    return False


def _wait_for_idle_kernel(page, timeout_s: float = 240) -> None:
    """Wait for the kernel to report idle, answering a kernel dialog if one appears meanwhile. Generous: on two
    loaded cores a kernel can take minutes to start."""
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _accept_kernel_dialog(page)
        if idle.count():
            return
        page.wait_for_timeout(1000)
    raise AssertionError(f"the kernel did not report idle within {timeout_s} s")


def _run_all(page, attempts: int = 3) -> None:
    """Run > Run All Cells, as a person would. A click made while the kernel's connection is still being set up
    can be dropped without a trace (no cell starts), so the click is repeated until the first code cell starts."""
    from playwright.sync_api import expect

    _wait_for_idle_kernel(page)
    first_prompt = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").first
    dialog = page.locator(".jp-Dialog")
    for _ in range(attempts):
        if _accept_kernel_dialog(page):
            expect(dialog).to_have_count(0)
        elif dialog.count():
            raise AssertionError(f"JupyterLab shows a dialog instead of running: {dialog.inner_text()!r}")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        try:
            expect(first_prompt).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=20_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"Run All started no cell after {attempts} clicks (is the kernel running?)")


def _wait_for_finish(page, last_cell, timeout_s: float, reruns: int = 2) -> bool:
    """Wait until the last cell prints "Results in". On a loaded machine JupyterLab sometimes swaps the kernel just
    after Run All and the queued cells are dropped (nothing runs, cells stay unexecuted); then Run All again."""
    deadline = time.monotonic() + timeout_s
    idle_polls = 0
    done = last_cell.locator(".jp-OutputArea-output", has_text="Results in")
    while time.monotonic() < deadline:
        if done.count():
            return True
        prompts = page.locator(".jp-InputPrompt").all_inner_texts()
        busy = any("*" in p for p in prompts)
        idle_polls = 0 if busy else idle_polls + 1
        if idle_polls >= 3 and reruns > 0:  # 15 s with no cell running and the notebook unfinished
            reruns -= 1
            idle_polls = 0
            _run_all(page)
        time.sleep(5)
    return bool(done.count())


def test_run_all_in_jupyterlab_shows_plots_table_and_trajectories(lab, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    base, token, notebook, outputs = lab
    chromium = _chromium()
    shots = _screenshot_dir(tmp_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1400})
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{notebook.name}?token={token}")
            expect(page.locator(".jp-Notebook .jp-CodeCell").first).to_be_visible(timeout=120_000)
            _run_all(page)
            last = _cells_containing(page, "exp.finish()")
            if not _wait_for_finish(page, last, RUN_TIMEOUT_S):
                page.screenshot(path=str(shots / "quickstart_unfinished.png"), full_page=True)
                raise AssertionError(f"Run All did not finish; page: {shots / 'quickstart_unfinished.png'}, "
                                     f"prompts: {page.locator('.jp-InputPrompt').all_inner_texts()}")
            page.keyboard.press("Control+s")
            expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)

            for call in PLOT_CALLS:
                cell = _cells_containing(page, call)
                expect(cell).to_have_count(1)
                expect(cell.locator(".jp-OutputArea-output img")).not_to_have_count(0)
            table_cell = _cells_containing(page, "exp.stage_table()")
            expect(table_cell.locator(".jp-OutputArea-output table")).to_have_count(1)
            viewer = _cells_containing(page, "exp.show_trajectories(")
            trajectories = viewer.locator(".searchrl-trajectory")
            expect(trajectories).not_to_have_count(0)
            retrieved = viewer.locator(".retrieved")
            # The smoke profile's model searches, so at least one retrieved span is marked (and screenshotted).
            expect(retrieved).not_to_have_count(0)

            saved = [("curves", _cells_containing(page, "exp.curves(")), ("table", table_cell),
                     ("trajectories", viewer)]
            for name, cell in saved:
                cell.evaluate("element => element.scrollIntoView({block: 'start'})")  # the cell at the top
                path = shots / f"quickstart_{name}.png"
                page.screenshot(path=str(path), full_page=True)
                print(f"screenshot ({name}): {path}")
            n_shown, n_retrieved = trajectories.count(), retrieved.count()
        finally:
            browser.close()

    executed = nbformat.read(str(notebook), as_version=4)
    cells = [c for c in executed.cells if c.cell_type == "code"]
    errors = [(c.source[:60], o.get("ename"), o.get("evalue")) for c in cells for o in c.outputs
              if o.output_type == "error"]
    assert not errors, f"error outputs after Run All: {errors}"
    reporting = cells[next(i for i, c in enumerate(cells) if "exp.curves(" in c.source):]
    noise = [(c.source[:40], "".join(o.text)[:200]) for c in reporting for o in c.outputs
             if o.output_type == "stream" and o.name == "stderr"]
    assert not noise, f"warnings or other stderr text in the reporting cells: {noise}"

    # The viewer marks exactly the searches of the trajectories it shows (the most-searching ones of the stage):
    # one retrieved span per search, as written to the run folder's trajectories file.
    (run_dir,) = (outputs / "quickstart").iterdir()
    records = [json.loads(line) for line in (run_dir / "trajectories" / "after_RL.jsonl").read_text().splitlines()]
    searches = sorted((r["searches"] for r in records), reverse=True)[:n_shown]
    assert n_retrieved == sum(searches) >= 1, f"{n_retrieved} retrieved spans shown for searches {searches}"
    print(f"trajectories shown: {n_shown}, retrieved spans marked: {n_retrieved}")
