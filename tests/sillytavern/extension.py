#!/usr/bin/env python3
"""The SillyTavern extension (clients/sillytavern) in a real browser:
Debian's chromium driven through chromium-driver by Selenium, nothing
downloaded. The page is tests/sillytavern/harness — the part of
SillyTavern's page and `getContext()` the extension uses, with a real
chat array — served by this script on its own origin, with the extension's
real files where SillyTavern serves a third-party extension's.

Run by `host/cli/tests/sillytavern.rs` against real `toolhost serve`
processes with tokens: `--toolhost` lets this page's origin in
(`--allow-origin`), `--refusing` does not, `--closed` is a port nothing
listens on. The tenant has profiles `writer` and `researcher` and
scripted models: `script` and `swiper` write REPLY_A / REPLY_B and commit;
`careful` first rolls a die, which the tenant's policy makes wait for
approval, then writes REPLY_C; `delegating` has `researcher` search the
chat first. Checks, in order: an unreachable server, a server refusing the
page's origin, a refused token and an unknown profile each end in a toast
with the code and write nothing; Agent reply ends with the reply in the
chat array, written as SillyTavern writes one, shown, and saved once, the
model having read the dry run's prompt with the chat's history tagged; an
Agent swipe adds a swipe; a typed message is sent first, an approval card
appears and approving it lets the run finish; `/agent type=continue`
continues the last reply; Agent regenerate replaces its shown swipe; a
run that delegates shows its child's calls under it; a
commit that no longer fits the chat — messages added, a second commit after
the user wrote, a reply swiped meanwhile, a save SillyTavern did not make —
is refused, toasted, answered as failed and leaves the chat as it was; no
happy path shows an error. Screenshots go to --screenshots.
"""

import argparse
import functools
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from browser_support import TIMEOUT, chrome, wait  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

REPLY_A = "*Mirelle trims the wick.* There. It will burn till dawn."
REPLY_B = "*Mirelle squints at the reeds.* A boat, running without lights."
REPLY_C = "*Mirelle strikes the match.* Then we light it now."
SEND_DATE = re.compile(r"^[A-Z][a-z]+ \d{1,2}, \d{4} \d{1,2}:\d{2}[ap]m$")


class Page(http.server.SimpleHTTPRequestHandler):
    """The harness at /harness/, the extension where SillyTavern serves a
    third-party one; nothing else."""

    def __init__(self, *args, repo, **kwargs):
        self.repo = repo
        super().__init__(*args, directory=repo, **kwargs)

    def translate_path(self, path):
        path = path.split("?", 1)[0].split("#", 1)[0]
        for prefix, folder in (
            ("/harness/", "tests/sillytavern/harness/"),
            ("/scripts/extensions/third-party/toolhost/", "clients/sillytavern/"),
        ):
            if path.startswith(prefix) and ".." not in path:
                return os.path.join(self.repo, folder, path[len(prefix):])
        if path == "/":
            return os.path.join(self.repo, "tests/sillytavern/harness/index.html")
        return os.path.join(self.repo, "missing")

    def log_message(self, *args):
        pass


def serve_page(repo, port):
    handler = functools.partial(Page, repo=repo)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ready(base):
    try:
        with urllib.request.urlopen(base + "/v1/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def api(base, token, path):
    request = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def journal(base, token, run_id):
    # The run's events as the API streams them: one `data:` line each.
    text = api(base, token, f"/v1/runs/{run_id}/events")
    return [json.loads(line[5:].strip()) for line in text.splitlines() if line.startswith("data:")]


class Tavern:
    def __init__(self, driver, args):
        self.driver = driver
        self.args = args

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def chat(self):
        return self.js("return JSON.parse(JSON.stringify(window.harnessChat))")

    def saves(self):
        return self.js("return window.harness.saves.length")

    def setting(self, name, value):
        field = self.driver.find_element(By.ID, "toolhost_" + name)
        field.clear()
        if value:
            field.send_keys(value)
        else:
            # Clearing types nothing, so no `input` event tells the page.
            self.js("arguments[0].dispatchEvent(new Event('input', {bubbles: true}))", field)

    def settings(self, server=None, token=None, model=None, profile=None, agents=None):
        for name, value in (("serverUrl", server), ("token", token), ("model", model), ("profile", profile),
                            ("agents", agents)):
            if value is not None:
                self.setting(name, value)

    def toasts(self):
        return self.js("""return [...document.querySelectorAll('#toast-container .toast')].map(
            (t) => [t.className, t.querySelector('.toast-title').textContent,
                    t.querySelector('.toast-message').textContent])""")

    def clear_toasts(self):
        self.js("document.getElementById('toast-container').replaceChildren()")

    def toast(self, code):
        try:
            return wait(f"a toast {code}", lambda: next((t for t in self.toasts() if code in t[1]), None))
        except AssertionError as error:
            panels = [p.text for p in self.driver.find_elements(By.ID, "toolhost_panel")]
            raise AssertionError(f"{error}; toasts {self.toasts()}; panel {panels}") from None

    def errors(self):
        """The error toasts shown, and the extension's errors in the console, since the last look."""
        toasts = [t for t in self.toasts() if "toast-error" in t[0]]
        logged = [e["message"] for e in self.driver.get_log("browser")
                  if e["level"] == "SEVERE" and "[toolhost]" in e["message"]]
        return toasts + logged

    def no_errors(self):
        errors = self.errors()
        assert not errors, errors

    def approve(self):
        card = wait("an approval card", lambda: self.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
        card.find_element(By.CSS_SELECTOR, 'button[data-decision="approve"]').click()

    def agent_reply(self):
        self.driver.find_element(By.ID, "toolhost_agent_button").click()

    def menu(self, entry):
        self.driver.find_element(By.ID, "options_button").click()
        wait("the options menu", lambda: self.driver.find_element(By.ID, entry).is_displayed())
        self.driver.find_element(By.ID, entry).click()

    def panel(self):
        return self.driver.find_element(By.ID, "toolhost_panel")

    def run_id(self):
        return self.panel().get_attribute("data-run")

    def ended(self, status="completed"):
        def done():
            text = self.panel().find_element(By.CSS_SELECTOR, ".toolhost-status").text
            return text if text.startswith(status) else None

        return wait(f"the panel to show the run {status}", done)

    def close_panel(self):
        self.panel().find_element(By.CSS_SELECTOR, ".toolhost-close").click()
        wait("the panel gone", lambda: not self.driver.find_elements(By.ID, "toolhost_panel"))

    def shot(self, name):
        os.makedirs(self.args.screenshots, exist_ok=True)
        self.driver.save_screenshot(os.path.join(self.args.screenshots, name))


def refusals(page):
    """Each refusal is a toast with its code, and nothing is written."""
    args = page.args
    before = page.chat()
    page.settings(server=args.closed, token=args.token, model="script", profile="writer")
    page.agent_reply()
    page.toast("extension.server_unreachable")
    page.clear_toasts()

    page.settings(server=args.refusing)
    page.agent_reply()
    kind, title, message = page.toast("serve.origin_refused")
    assert "toast-error" in kind, kind
    assert "--allow-origin " + args.page in message, message
    page.shot("sillytavern-origin-refused.png")
    page.clear_toasts()

    page.settings(server=args.toolhost, token="wrong")
    page.agent_reply()
    page.toast("serve.unauthorized")
    page.clear_toasts()

    page.settings(token=args.token, profile="nope")
    page.agent_reply()
    _, _, message = page.toast("serve.unknown_profile")
    assert "nope" in message, message
    page.clear_toasts()
    page.settings(profile="writer")
    after = page.chat()
    # The dry runs' one change is SillyTavern's own: the greeting's macros.
    assert after[1:] == before[1:] and len(after) == len(before), "nothing written"
    assert page.saves() == 0, page.saves()
    page.errors()  # each was meant
    page.clear_toasts()


def normal_reply(page):
    args = page.args
    before = page.chat()
    page.agent_reply()
    wait("the reply in the chat", lambda: len(page.chat()) == len(before) + 1)
    page.ended()
    cancel = page.panel().find_element(By.CSS_SELECTOR, ".toolhost-cancel")
    assert not cancel.is_displayed(), "an ended run has nothing to cancel"
    chat = page.chat()
    reply = chat[-1]
    assert reply["mes"] == REPLY_A, reply
    assert reply["name"] == "Mirelle" and reply["is_user"] is False, reply
    assert reply["extra"]["api"] == "toolhost" and reply["extra"]["model"] == "script", reply
    assert reply["swipes"] == [REPLY_A] and reply["swipe_id"] == 0, reply
    assert len(reply["swipe_info"]) == 1 and reply["swipe_info"][0]["extra"]["model"] == "script", reply
    assert SEND_DATE.match(reply["send_date"]), reply["send_date"]
    assert reply["gen_started"] <= reply["gen_finished"], reply
    assert chat[:-1] == before, "every other message as it was"
    assert page.saves() == 1, "saved once"
    assert page.js("return window.harness.saves[0].length") == len(chat) + 1, "header and messages"
    shown = page.driver.find_element(By.CSS_SELECTOR, f'.mes[mesid="{len(chat) - 1}"] .mes_text').text
    assert shown == REPLY_A, shown
    emitted = [event[0] for event in page.js("return window.harness.emitted")]
    assert "message_received" in emitted and "character_message_rendered" in emitted, emitted
    # The model read the dry run's prompt, the chat's messages tagged as history.
    events = journal(args.toolhost, args.token, page.run_id())
    prompt = next(e["payload"]["prompt"] for e in events if e["type"] == "context_assembled")
    assert prompt["source"] == "snapshot", prompt
    assert prompt["historyTotal"] == 4 and prompt["historyKept"] == 4, prompt
    # The dry run's ten messages (six of the preset and card, four of the
    # chat: its note for the app alone is no part of a prompt), then the task.
    assert prompt["messages"] == 11, prompt
    lines = page.panel().text
    assert "workspace.write_file" in lines and "Saved as message 5" in lines, lines
    page.shot("sillytavern-reply.png")
    page.close_panel()
    page.no_errors()


def swipe(page):
    before = page.chat()
    saves = page.saves()
    page.settings(model="swiper")
    page.menu("toolhost_option_swipe")
    wait("a new swipe", lambda: len(page.chat()[-1]["swipes"]) == 2)
    page.ended()
    chat = page.chat()
    reply = chat[-1]
    assert len(chat) == len(before), "no new message"
    assert reply["swipes"] == [REPLY_A, REPLY_B] and reply["swipe_id"] == 1, reply
    assert reply["mes"] == REPLY_B and reply["swipe_info"][1]["extra"]["model"] == "swiper", reply
    assert reply["swipe_info"][0]["extra"]["model"] == "script", "the first swipe keeps its record"
    assert page.saves() == saves + 1
    counter = page.driver.find_element(By.CSS_SELECTOR, f'.mes[mesid="{len(chat) - 1}"] .swipe_counter').text
    assert counter == "2/2", counter
    page.close_panel()
    page.no_errors()


def approval(page):
    before = page.chat()
    saves = page.saves()
    page.settings(model="careful")
    page.driver.find_element(By.ID, "send_textarea").send_keys("Light it now, before the boat passes.")
    page.agent_reply()
    card = wait("an approval card", lambda: page.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
    labels = [b.text for b in card.find_elements(By.TAG_NAME, "button")]
    assert labels == ["Approve", "Approve for this run", "Deny"], labels
    assert "dice" in card.text.lower() and "1d20" in card.text, card.text
    chat = page.chat()
    assert len(chat) == len(before) + 1 and chat[-1]["is_user"] is True, "the typed message went first"
    assert chat[-1]["mes"] == "Light it now, before the boat passes.", chat[-1]
    assert page.driver.find_element(By.ID, "send_textarea").get_attribute("value") == ""
    page.shot("sillytavern-approval.png")
    card.find_element(By.CSS_SELECTOR, 'button[data-decision="approve"]').click()
    page.ended()
    chat = page.chat()
    assert len(chat) == len(before) + 2 and chat[-1]["mes"] == REPLY_C, chat[-1]
    assert page.saves() == saves + 2, "the typed message, then the reply"
    assert not page.driver.find_elements(By.CSS_SELECTOR, ".toolhost-approval")
    page.close_panel()
    page.no_errors()


def continue_by_command(page):
    base = page.chat()[-1]["mes"]
    page.settings(model="script")
    page.js("return SillyTavern.getContext().executeSlashCommands('/agent type=continue Finish the thought.')")
    wait("the continuation", lambda: page.chat()[-1]["mes"] == base + REPLY_A)
    page.ended()
    reply = page.chat()[-1]
    assert reply["swipes"][reply["swipe_id"]] == base + REPLY_A, reply
    prompts = page.js("return window.harness.prompts.map((p) => p.type)")
    assert prompts[-1] == "continue", prompts
    page.close_panel()
    page.no_errors()


def regenerate(page):
    before = page.chat()
    page.settings(model="swiper")
    page.menu("toolhost_option_regenerate")
    wait("the regenerated reply", lambda: page.chat()[-1]["mes"] == REPLY_B)
    page.ended()
    chat = page.chat()
    assert len(chat) == len(before) and chat[-1]["swipes"] == [REPLY_B], chat[-1]
    # A regeneration's dry run leaves the reply it replaces out, as a swipe's.
    assert page.js("return window.harness.prompts.at(-1).type") == "swipe"
    page.close_panel()
    page.no_errors()


def delegation(page):
    """The built-in writer delegates to `researcher` (the Agents setting):
    the child's calls show under it in the panel."""
    before = len(page.chat())
    page.settings(model="delegating", profile="", agents="researcher")
    page.agent_reply()
    page.ended()
    lane = page.panel().find_element(By.CSS_SELECTOR, ".toolhost-lane")
    assert "delegated to researcher" in lane.text, lane.text
    child = lane.find_element(By.CSS_SELECTOR, ".toolhost-child").text
    assert "chat.search" in child and "task.return" in child, child
    outer = page.panel().find_element(By.CSS_SELECTOR, ".toolhost-events").text
    assert "agent.delegate" in outer and "agent.await" in outer, outer
    assert len(page.chat()) == before + 1 and page.chat()[-1]["mes"] == REPLY_A
    page.shot("sillytavern-delegation.png")
    page.close_panel()
    page.no_errors()
    page.settings(profile="writer", agents="")


def refused_commit(page):
    """The chat changes while the run waits: its commit is refused, said,
    and answered as failed, never written after the new message."""
    args = page.args
    page.settings(model="careful")
    page.agent_reply()
    card = wait("an approval card", lambda: page.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
    page.js("""const ctx = SillyTavern.getContext();
        ctx.chat.push({name: 'Tam', is_user: true, is_system: false, send_date: 'December 7, 2026 9:40am',
                       mes: 'Wait, I hear something.', extra: {}});
        return ctx.saveChat();""")
    length = len(page.chat())
    card.find_element(By.CSS_SELECTOR, 'button[data-decision="approve"]').click()
    page.toast("chat.host_commit_failed")
    wait("the run's end", lambda: page.panel().find_element(By.CSS_SELECTOR, ".toolhost-close").is_displayed())
    assert len(page.chat()) == length, "nothing written"
    events = journal(args.toolhost, args.token, page.run_id())
    failed = [e for e in events if e["type"] == "chat_commit_failed"]
    assert failed and "the chat changed" in failed[0]["payload"]["message"], failed
    page.close_panel()
    page.errors()  # the refusal was meant
    page.clear_toasts()


def later_commit_refused(page):
    """A run's second commit rewrites its message — unless the user wrote
    after it meanwhile: then it is refused, and the first stays."""
    args = page.args
    page.settings(model="twice")
    page.agent_reply()
    wait("the first commit", lambda: page.chat()[-1]["mes"] == REPLY_A)
    length = len(page.chat())
    wait("an approval card", lambda: page.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
    page.js("""const ctx = SillyTavern.getContext();
        ctx.chat.push({name: 'Tam', is_user: true, is_system: false,
                       send_date: 'December 7, 2026 9:50am', mes: 'Go on.', extra: {}});
        return ctx.saveChat();""")
    page.approve()
    page.toast("chat.host_commit_failed")
    page.ended()
    chat = page.chat()
    assert len(chat) == length + 1 and chat[length - 1]["mes"] == REPLY_A, chat[length - 1]
    events = journal(args.toolhost, args.token, page.run_id())
    failed = [e["payload"]["message"] for e in events if e["type"] == "chat_commit_failed"]
    assert failed and "added after" in failed[0], failed
    page.close_panel()
    page.errors()
    page.clear_toasts()


def edited_between_commits(page):
    """A run's second commit over a message the user edited meanwhile is
    refused: the edit stays."""
    page.settings(model="twice")
    page.agent_reply()
    wait("the first commit", lambda: page.chat()[-1]["mes"] == REPLY_A)
    wait("an approval card", lambda: page.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
    page.js("""const ctx = SillyTavern.getContext();
        const last = ctx.chat.at(-1);
        last.mes = 'Edited by hand.'; last.swipes[last.swipe_id] = 'Edited by hand.';
        return ctx.saveChat();""")
    page.approve()
    _, _, message = page.toast("chat.host_commit_failed")
    assert "edited" in message, message
    page.ended()
    assert page.chat()[-1]["mes"] == "Edited by hand.", page.chat()[-1]
    page.close_panel()
    page.errors()
    page.clear_toasts()


def swiped_during_run(page):
    """A swipe run whose reply the user swiped meanwhile writes nothing."""
    page.settings(model="careful")
    page.js("return SillyTavern.getContext().executeSlashCommands('/agent type=swipe')")
    wait("an approval card", lambda: page.driver.find_element(By.CSS_SELECTOR, ".toolhost-approval"))
    page.js("""const ctx = SillyTavern.getContext();
        const last = ctx.chat.at(-1);
        last.swipes.push('A swipe the user made.'); last.swipe_id = last.swipes.length - 1;
        last.mes = 'A swipe the user made.';
        return ctx.saveChat();""")
    before = page.chat()[-1]
    page.approve()
    _, _, message = page.toast("chat.host_commit_failed")
    assert "swiped or edited" in message, message
    wait("the run's end", lambda: page.panel().find_element(By.CSS_SELECTOR, ".toolhost-close").is_displayed())
    assert page.chat()[-1] == before, "nothing written"
    page.close_panel()
    page.errors()
    page.clear_toasts()


def save_failed(page):
    """SillyTavern's save fails (it only logs that): the reply is taken
    back out, and the run is told."""
    before = page.chat()
    saves = page.saves()
    page.settings(model="script")
    page.js("window.harness.failSaves = true")
    page.agent_reply()
    _, _, message = page.toast("chat.host_commit_failed")
    assert "did not save" in message, message
    wait("the run's end", lambda: page.panel().find_element(By.CSS_SELECTOR, ".toolhost-close").is_displayed())
    page.js("window.harness.failSaves = false")
    assert page.chat() == before, "the reply was taken back out"
    assert page.saves() == saves
    assert page.js("return window.harness.reloads") >= 1, "and the chat shown again from the server"
    assert not page.driver.find_elements(By.CSS_SELECTOR, f'.mes[mesid="{len(before)}"]'), "nor shown"
    page.close_panel()
    page.errors()
    page.clear_toasts()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--page-port", type=int, required=True)
    parser.add_argument("--toolhost", required=True)
    parser.add_argument("--refusing", required=True)
    parser.add_argument("--closed", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--driver", default="/usr/bin/chromedriver")
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args()
    args.page = f"http://127.0.0.1:{args.page_port}"
    for base in (args.toolhost, args.refusing):
        wait(f"toolhost serve at {base}", lambda: ready(base))
    server = serve_page(args.repo, args.page_port)

    driver = chrome(args.chromium, args.driver, size="1280,1000", console=True)
    driver.set_script_timeout(30)
    try:
        driver.get(args.page + "/")
        page = Tavern(driver, args)
        wait("the extension loaded", lambda: page.js("return window.harness && window.harness.loaded"))
        assert driver.find_element(By.ID, "toolhost_settings")
        assert driver.find_element(By.ID, "toolhost_serverUrl").get_attribute("value") == "http://127.0.0.1:7700"
        refusals(page)
        page.shot("sillytavern-settings.png")
        normal_reply(page)
        swipe(page)
        approval(page)
        continue_by_command(page)
        regenerate(page)
        delegation(page)
        swiped_during_run(page)
        refused_commit(page)
        later_commit_refused(page)
        edited_between_commits(page)
        save_failed(page)
        # The refusals above are logged by the browser (CORS, a refused
        # connection, 401/400 answers): expected. Nothing else may be.
        servers = [url.split("//", 1)[1] for url in (args.toolhost, args.refusing, args.closed)]
        errors = [entry for entry in driver.get_log("browser")
                  if entry["level"] == "SEVERE"
                  and not any(server in entry["message"] for server in servers)]
        assert not errors, errors
        print("the SillyTavern extension passed every check")
    finally:
        driver.quit()
        server.shutdown()


if __name__ == "__main__":
    main()
