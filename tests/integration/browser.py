"""A real headless browser for integration tests: Debian's chromium driven through chromedriver.

``ensure_chromium()`` installs the ``chromium`` and ``chromium-driver`` packages with apt when they
are missing (only the tests need them, so the test run installs them, not the bootstrap).
``chromium(user_data_dir)`` starts one headless browser with a fresh profile and the flags a root
user on a machine without a display, GPU or internet needs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1000,900",
)


def ensure_chromium() -> None:
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    apt = shutil.which("apt-get") or "apt-get"
    install = [apt, "install", "-y", "-qq", "--no-install-recommends", "chromium", "chromium-driver"]
    if subprocess.run(install, env=env, capture_output=True, text=True, check=False).returncode != 0:
        subprocess.run([apt, "update", "-qq"], env=env, check=True, capture_output=True, timeout=600)
        proc = subprocess.run(install, env=env, capture_output=True, text=True, check=False, timeout=1200)
        if proc.returncode != 0:
            raise RuntimeError(f"apt-get could not install chromium: {proc.stderr.strip()[-800:]}")


def chromium(user_data_dir: Path) -> Any:
    """A selenium WebDriver on a fresh headless chromium (the caller quits it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # selenium's driver manager must never go online (it is not needed: driver and browser are given)
    os.environ.setdefault("SE_OFFLINE", "true")
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    # the driver is given: selenium's driver manager (which would go online) is never run
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
