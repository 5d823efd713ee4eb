#!/usr/bin/env python3
"""Loads a page in headless Chromium and reports what it rendered, for LivePageTests.

Drives the browser over the DevTools protocol on a pipe (--remote-debugging-pipe: file
descriptors 3 and 4, NUL-separated JSON), so nothing beyond Python's standard library is needed.

    read_page.py URL SCREENSHOT READY_EXPRESSION REPORT_EXPRESSION [TIMEOUT_SECONDS]

Waits until READY_EXPRESSION (JavaScript) is true in the page, then prints the value of
REPORT_EXPRESSION as JSON on standard output and saves a PNG screenshot. Exits 1 with the
last value of REPORT_EXPRESSION when the page is not ready in time. Chromium dies with this
script (parent-death signal) whatever happens; the test reaps the script.
"""
import base64
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def die_with_parent():
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Browser:
    def __init__(self, profile):
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()
        # The child's fds 3 and 4 are what --remote-debugging-pipe reads and writes.
        def setup():
            die_with_parent()
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
            # (fds 3 and 4 are made in `setup`, which runs before the others are closed.)
            preexec_fn=setup, pass_fds=(3, 4),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0

    def call(self, method, params=None, session=None, timeout=20):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self.buffer:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{method}: no answer within {timeout} s")
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise EOFError("Chromium closed the pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def evaluate(browser, session, expression):
    result = browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
    if "exceptionDetails" in result:
        raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
    return result["result"].get("value")


def main():
    url, screenshot, ready, report = sys.argv[1:5]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 20
    profile = tempfile.mkdtemp(prefix="handoff-chromium-")
    browser = Browser(profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session)
        browser.call("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + timeout
        while not evaluate(browser, session, ready):
            if time.monotonic() > deadline:
                print(json.dumps(evaluate(browser, session, report)))
                return 1
            time.sleep(0.2)
        print(json.dumps(evaluate(browser, session, report)))
        shot = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        with open(screenshot, "wb") as file:
            file.write(base64.b64decode(shot["data"]))
        return 0
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
