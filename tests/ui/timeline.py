#!/usr/bin/env python3
"""The web UI of `toolhost serve` in a real browser (Debian's chromium,
driven through chromium-driver by Selenium; nothing is downloaded).

Run by `host/cli/tests/ui.rs` against a real server whose tenant `local`
has a profile `writer`, a chat per run, a policy asking approval for every
`workspace.write_file` and `workspace.commit`, and a scripted model
`script` that writes a long reply full of markup and a bidi override,
reads it back, commits, calls a tool name it invented, and finishes. Checks, in order: a run started
through the API appears in the list by itself; its timeline fills live;
the write's approval card shows its path first and the content cut with
its size and the tool's side effects; what of the chat the model read
first and each trimming to fit its window are shown; each call shows its alias, its
canonical id with its source, and its duration; the tools the profile
allows yet the snapshot left out are shown with why; a call under an
invented name is shown with its name, code and the calls used; a tool result
holding `<script>` is shown as text and never
runs, its bidi override shown as ⟨U+202E⟩; a pending commit is approved
from its card and the run completes; another
run's commit is denied with a note, which the model reads; a third run in
host-commit mode shows a card while it waits for the chat app and drops it
once the app answered; every control is
reachable with Tab and shows its focus; at 640 px nothing scrolls
sideways. Screenshots of the run list and a timeline go to --screenshots.

    python3 tests/ui/timeline.py --base http://127.0.0.1:PORT --screenshots DIR
"""

import argparse
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from browser_support import TIMEOUT, chrome, wait  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402



def api(base, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def start_run(base, chat):
    return api(base, "/v1/runs", {"profile": "writer", "model": "script", "chat": chat})["id"]


def open_run(driver, run_id):
    def click():
        # The list is drawn again every 2 s: find and click in one go.
        for button in driver.find_elements(By.CSS_SELECTOR, "button.open-run"):
            if button.text == run_id:
                button.click()
                return True
        return False

    wait(f"run {run_id} in the list", click)
    wait("the timeline", lambda: driver.find_element(By.ID, "run-title").text == run_id)


def card(driver, tool):
    return wait(f"an approval card for {tool}", lambda: [
        c for c in driver.find_elements(By.CSS_SELECTOR, "#approval-cards .card") if tool in c.text])[0]


def timeline_text(driver):
    return driver.find_element(By.ID, "lanes").text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--driver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    wait("the server", lambda: api(args.base, "/v1/tools"))

    driver = chrome(args.chromium, args.driver, size="1200,900")
    try:
        driver.get(args.base + "/")
        title = driver.title
        wait("the run list", lambda: "run(s)" in driver.find_element(By.ID, "status").text)

        # 1. A run started elsewhere appears by itself; its timeline is live.
        first = start_run(args.base, "chat-1")
        open_run(driver, first)
        wait("the first round", lambda: "Round 1" in timeline_text(driver))
        # The snapshot's omissions: the unregistered MCP tool, and why.
        omitted = wait("the left-out tool", lambda: [
            e.text for e in driver.find_elements(By.CSS_SELECTOR, ".entry.omitted")
            if "mcp/6f1c2e4a-0b7d-4c1e-9a53-2d8e0f4b7a61:echo" in e.text])
        assert "Left out" in omitted[0] and "refresh" in omitted[0], omitted

        # 2. The write's card: the path first, the long content cut with
        # its size, the bidi override visible rather than obeyed.
        write = card(driver, "workspace.write_file")
        fields = [li.text for li in write.find_elements(By.CSS_SELECTOR, "li.arg")]
        assert fields and fields[0] == 'path: "output/main.md"', fields
        assert fields[1].startswith('content: "Before <script>') and "KiB" in fields[1], fields
        assert "\u202e" not in write.text, write.text
        # Its side effects, as the tool's annotations say (seed §10).
        effects = write.find_element(By.CSS_SELECTOR, ".effects").text
        assert "read-only: no" in effects and "open world: no" in effects, effects
        assert "destructive:" in effects, effects
        # The call in the timeline: alias, canonical id and source.
        requested = wait("the write's call", lambda: [
            e.text for e in driver.find_elements(By.CSS_SELECTOR, ".entry.call")
            if "workspace_write_file" in e.text])
        assert "builtin:workspace.write_file" in requested[0] \
            and "workspace.write_file · builtin" in requested[0], requested
        write.find_element(By.CSS_SELECTOR, "button.approve").click()
        pending = card(driver, "workspace.commit")
        driver.save_screenshot(os.path.join(args.screenshots, "timeline.png"))

        # 3. Markup in a tool result is text: shown, never run.
        read = wait("the read's result button", lambda: [
            b for b in driver.find_elements(By.CSS_SELECTOR, ".entry button") if b.text == "Result text"])
        read[-1].click()
        shown = wait("the result text", lambda: driver.find_element(By.ID, "detail").text)
        assert "<script>" in shown and "<img" in shown, shown
        assert "evil⟨U+202E⟩txt.exe" in shown and "\u202e" not in shown, shown[:300]
        assert driver.execute_script("return window.pwned === undefined"), "a result's script ran"
        assert driver.title == title, "a result's script changed the title"
        assert not driver.find_elements(By.CSS_SELECTOR, "#lanes script, #detail img, #lanes img")

        # 4. Approve from the card: the commit runs and the run completes.
        pending.find_element(By.CSS_SELECTOR, "button.approve").click()
        wait("the run's end", lambda: "Run completed" in timeline_text(driver))
        assert "Committed output/main.md" in timeline_text(driver)
        # What the model read first, and what was trimmed to fit its window.
        assert re.search(r"Prompt from the chat: \d+ messages", timeline_text(driver)), timeline_text(driver)
        trimmed = re.search(r"Context trimmed: .* chars \(budget 40,000\)", timeline_text(driver))
        assert trimmed, timeline_text(driver)
        # Each ended call says how long it took.
        ended = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".entry")
                 if e.text.startswith("✓ workspace_read_file")]
        assert ended and re.search(r"\d+(\.\d+)? ms", ended[0]), ended
        assert "builtin:workspace.read_file" in ended[0], ended
        # The name the model invented in its last reply: shown with its
        # code and the calls used, though nothing ran.
        unknown = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".entry.unknown")]
        assert unknown and "web_search" in unknown[0], timeline_text(driver)
        assert "model.unknown_tool_call" in unknown[0] and re.search(r"calls used \d+ of \d+", unknown[0]), unknown
        assert api(args.base, f"/v1/runs/{first}")["status"] == "completed"

        # 5. Deny with a note: the model reads it in the call's result.
        driver.find_element(By.ID, "back").click()
        second = start_run(args.base, "chat-2")
        open_run(driver, second)
        card(driver, "workspace.write_file").find_element(By.CSS_SELECTOR, "button.approve").click()
        denial = card(driver, "workspace.commit")
        denial.find_element(By.CSS_SELECTOR, "input").send_keys("not in this chat")
        denial.find_element(By.CSS_SELECTOR, "button.deny").click()
        wait("the denied commit", lambda: "agent.tool_denied_by_user" in timeline_text(driver))
        denied = [e for e in driver.find_elements(By.CSS_SELECTOR, ".entry.error")
                  if "agent.tool_denied_by_user" in e.text and e.find_elements(By.TAG_NAME, "button")]
        assert denied, driver.find_element(By.ID, "lanes").get_attribute("outerHTML")
        [b for b in denied[0].find_elements(By.TAG_NAME, "button") if b.text == "Result text"][0].click()
        read_by_model = wait("what the model read", lambda: driver.find_element(By.ID, "detail").text)
        assert "not in this chat" in read_by_model, read_by_model
        wait("the next round", lambda: "Round 3" in timeline_text(driver))

        # 6. A host commit: the chat app saves the reply; the card says the
        # run waits for it, and goes once the app answered.
        driver.find_element(By.ID, "back").click()
        third = api(args.base, "/v1/runs", {"profile": "writer", "model": "script", "chat": "chat-3",
                                           "commit": "host"})["id"]
        open_run(driver, third)
        card(driver, "workspace.write_file").find_element(By.CSS_SELECTOR, "button.approve").click()
        card(driver, "workspace.commit").find_element(By.CSS_SELECTOR, "button.approve").click()
        waiting = wait("the commit's card", lambda: driver.find_elements(By.CSS_SELECTOR, "#approval-cards .card.commit"))[0]
        assert "Waiting for the chat app" in waiting.text and "a new message" in waiting.text, waiting.text
        assert "<script>" in waiting.text and "\u202e" not in waiting.text, waiting.text
        commit_id = waiting.get_attribute("data-commit")
        assert api(args.base, f"/v1/runs/{third}")["status"] == "awaiting_host_commit"
        api(args.base, f"/v1/runs/{third}/commits/{commit_id}", {"outcome": "committed", "messageIndex": 65})
        wait("the commit's card gone", lambda: not driver.find_elements(By.CSS_SELECTOR, "#approval-cards .card.commit"))
        wait("the third run's end", lambda: "Run completed" in timeline_text(driver))

        # 7. The run list, for the docs.
        driver.find_element(By.ID, "back").click()
        wait("both runs listed", lambda: len(driver.find_elements(By.CSS_SELECTOR, "button.open-run")) >= 2)
        driver.save_screenshot(os.path.join(args.screenshots, "runs.png"))

        # 8. Keyboard: Tab reaches every control, each showing its focus.
        driver.execute_script("document.activeElement && document.activeElement.blur()")
        seen = set()
        for _ in range(12):
            ActionChains(driver).send_keys(Keys.TAB).perform()
            focused = driver.switch_to.active_element
            if focused.tag_name in ("body", "html"):
                continue  # Tab went past the last control, out of the page
            label = focused.get_attribute("id") or focused.text or focused.tag_name
            seen.add(label)
            outline = driver.execute_script(
                "const s = getComputedStyle(document.activeElement); return s.outlineStyle + ' ' + s.outlineWidth;")
            assert not outline.startswith("none"), f"{label} shows no focus ({outline})"
        for wanted in ("token", "refresh", first, second):
            assert wanted in seen, f"Tab never reached {wanted}: {seen}"

        # 9. At 640 px nothing scrolls sideways, in the list and a timeline.
        driver.set_window_size(640, 900)
        for view in ("list", "timeline"):
            if view == "timeline":
                open_run(driver, first)
                wait("the timeline again", lambda: "Run completed" in timeline_text(driver))
            overflow = driver.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
            assert overflow <= 0, f"the {view} scrolls sideways by {overflow} px at 640 px"
        print("ui: ok")
    finally:
        driver.quit()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        import traceback
        traceback.print_exc()
        print(f"ui: FAILED: {error}", file=sys.stderr)
        sys.exit(1)
