"""What the browser tests share (tests/ui/timeline.py,
tests/sillytavern/extension.py): a bounded wait for the page, and Debian's
headless chromium driven through chromium-driver (nothing downloaded)."""

import os
import time

os.environ.setdefault("SE_OFFLINE", "true")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

TIMEOUT = 60


def wait(what, check, timeout=TIMEOUT):
    """`check()`'s first truthy answer within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            found = check()
        except Exception:  # the page is changing under us: look again
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def chrome(chromium, driver, size="1200,900", console=False):
    """A headless chromium of `size`; with `console`, its console kept for
    `driver.get_log("browser")`."""
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=" + size):
        options.add_argument(flag)
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)
