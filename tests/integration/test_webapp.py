"""Our web page on a rehearsal node, in a real headless browser (Debian's chromium + chromedriver).

Through an SSH tunnel to the node's loopback port 5000 (what a student does), the browser uploads a
generated photo and reads the class and probability Triton answered; picks FastAPI while the stack
runs in triton mode and reads the "cannot be reached" sentence; uploads a text file and reads the
"not a picture" sentence. Then the node is deployed in fastapi mode and the same page answers from
FastAPI. The node is put back in triton mode at the end. Screenshots go to the test's tmp folder and,
when SERVE_SYSTEM_IT_SCREENSHOTS names a folder, there too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from serve_system.standin import CLASSES

from .browser import chromium, ensure_chromium
from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")

WEBAPP_PORT = 5000


@pytest.fixture(scope="module")
def node(rehearsal_cluster: RehearsalCluster) -> Iterator[str]:
    """The node these tests use; triton mode (as site.yml left it) is restored afterwards."""
    name = rehearsal_cluster.nodes[0].name
    yield name
    back = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=triton", limit=name)
    assert back.rc == 0, back.tail()


@pytest.fixture(scope="module")
def page_url(rehearsal_cluster: RehearsalCluster, node: str) -> Iterator[str]:
    """http://127.0.0.1:PORT/ on this machine, tunnelled by ssh -L to the node's 127.0.0.1:5000."""
    n = rehearsal_cluster.node(node)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    tunnel = subprocess.Popen(
        ["ssh", "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
         "-o", f"UserKnownHostsFile={rehearsal_cluster.known_hosts}", "-o", "StrictHostKeyChecking=yes",
         "-i", n.key_path, "-p", str(n.port), "-L", f"127.0.0.1:{local}:127.0.0.1:{WEBAPP_PORT}",
         f"{n.user}@{n.address}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if tunnel.poll() is not None:
                pytest.fail(f"ssh tunnel exited: {tunnel.stderr.read().decode() if tunnel.stderr else ''}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", local)) == 0:
                    break
            time.sleep(0.3)
        yield f"http://127.0.0.1:{local}/"
    finally:
        tunnel.terminate()
        tunnel.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    ensure_chromium()
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("uploads")
    x = [[((i * 3 + j) % 256, (i * 2) % 256, (200 - j) % 256) for j in range(160)] for i in range(120)]
    img = Image.new("RGB", (160, 120))
    img.putdata([px for row in x for px in row])
    img.save(d / "dish.jpg", format="JPEG")
    (d / "recipe.txt").write_text("2 eggs, 100 g flour: not a photo\n")
    return {"photo": d / "dish.jpg", "text": d / "recipe.txt"}


def _shot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    out = os.environ.get("SERVE_SYSTEM_IT_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(out) / name)
    return path


def _submit(driver: Any, upload: Path, backend: str) -> dict[str, str]:
    """Pick ``upload`` and ``backend``, press Classify; what the page then shows (result or error)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.find_elements(By.ID, f"backend-{backend}"))
    driver.execute_script("document.getElementById('result').style.display='none';"
                          "document.getElementById('error').style.display='none';")
    driver.find_element(By.ID, f"backend-{backend}").click()
    driver.find_element(By.ID, "photo").send_keys(str(upload))
    driver.find_element(By.ID, "submit").click()
    wait.until(lambda d: d.find_element(By.ID, "result").is_displayed()
               or d.find_element(By.ID, "error").is_displayed())
    if driver.find_element(By.ID, "error").is_displayed():
        return {"error": driver.find_element(By.ID, "error").text}
    return {k: driver.find_element(By.ID, k).text
            for k in ("prediction", "probability", "answered-by", "standin")}


def _assert_answer(shown: dict[str, str], backend_words: str) -> None:
    assert "error" not in shown, shown
    assert shown["prediction"] in CLASSES, shown
    prob = float(shown["probability"].split()[0])
    assert 0.0 < prob <= 1.0 and f"({prob * 100:.1f} %)" in shown["probability"], shown
    assert backend_words in shown["answered-by"], shown
    assert "stand-in weights" in shown["standin"], shown  # rehearsal nodes serve generated weights


def test_webapp_runs_on_loopback_in_place_of_flask(rehearsal_cluster: RehearsalCluster, node: str) -> None:
    out = rehearsal_cluster.exec(node, "docker", "ps", "--format", "{{.Names}} {{.Ports}}").stdout
    ports = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "flask" not in ports and ports.get("webapp", "").startswith(f"127.0.0.1:{WEBAPP_PORT}->"), out
    assert "Web page on " + node + ": http://localhost:5000/" in rehearsal_cluster.site.flat


def test_page_classifies_with_triton_then_says_fastapi_is_down(
        browser: Any, page_url: str, files: dict[str, Path], tmp_path: Path) -> None:
    browser.get(page_url)
    assert browser.title == "Food-11 classifier"
    shown = _submit(browser, files["photo"], "triton")
    _assert_answer(shown, "Triton (food_classifier")
    _shot(browser, tmp_path, "webapp-triton.png")
    # the stack runs in triton mode: FastAPI is not there, and the page says so in a sentence
    shown = _submit(browser, files["photo"], "fastapi")
    assert shown["error"].startswith("FastAPI cannot be reached at http://fastapi_server:8000"), shown
    assert "serve_stack_mode=fastapi" in shown["error"] and "Traceback" not in shown["error"]
    _shot(browser, tmp_path, "webapp-fastapi-down.png")


def test_page_refuses_a_file_that_is_not_a_photo(browser: Any, page_url: str, files: dict[str, Path]) -> None:
    browser.get(page_url)
    shown = _submit(browser, files["text"], "triton")
    assert shown["error"].startswith("recipe.txt: image is not a picture"), shown
    assert "Traceback" not in shown["error"]


def test_switch_to_fastapi_and_the_page_answers_again(
        rehearsal_cluster: RehearsalCluster, node: str, browser: Any, page_url: str, files: dict[str, Path],
        tmp_path: Path) -> None:
    up = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=fastapi", limit=node)
    assert up.rc == 0, up.tail()
    browser.get(page_url)  # the tunnel goes on: the page is the same port, now with FastAPI behind it
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.ID, "backend-fastapi"))
    assert browser.find_element(By.ID, "backend-fastapi").is_selected()  # the mode's server by default
    shown = _submit(browser, files["photo"], "fastapi")
    _assert_answer(shown, "FastAPI (http://fastapi_server:8000/predict)")
    _shot(browser, tmp_path, "webapp-fastapi.png")
    shown = _submit(browser, files["photo"], "triton")
    assert shown["error"].startswith("Triton cannot be reached at http://triton_server:8000"), shown
