#!/usr/bin/env python3
"""The console in a real browser (Debian's chromium through chromium-driver and selenium; nothing downloaded).

Two demo services (one slot each) run a slow checksum job over files whose names are HTML: each folder is a child
job, so each service runs one. `progressctl console` serves the database with a token. The browser signs in, sees the
job's bar move on the list (two values within 3 s), sees the job page's tree with its two folders' jobs run by two
workers (issue 35), pauses the job with the Pause button (progressctl must see `paused` within 1 s of the click),
finds the names with <script> and <img onerror> shown as text, and logs no console error. Screenshots of the job page and the list
go to --out (under .build/, a CI artefact, not committed).

    python3 tools/console-browser-test.py --bin .build/debug --out .build/console-browser

Prints one line per check and ends with "N passed, M failed"; exits 1 when a check failed.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers on the network.
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

TOKEN = "browser-test-token-0123456789"
SCRIPT_NAME = "<script>alert(1)</script>"
HOSTILE_FOLDER = "<script>alert(1)"
HOSTILE_FILE = "\"'><img src=x onerror=alert(1)>.txt"


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok: {what}" + (f" ({detail})" if detail else ""), flush=True)
        else:
            self.failed += 1
            print(f"FAILED: {what}" + (f": {detail}" if detail else ""), flush=True)
        return ok


def wait_for(what, condition, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the folder of progressctl (built with the Console trait) and progression-demo")
    parser.add_argument("--out", required=True, help="where the screenshots go")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    arguments = parser.parse_args()
    progressctl = os.path.join(arguments.bin, "progressctl")
    demo = os.path.join(arguments.bin, "progression-demo")
    os.makedirs(arguments.out, exist_ok=True)
    checks = Checks()
    scratch = tempfile.mkdtemp(prefix="console-browser-")
    database = os.path.join(scratch, "tasks.sqlite")
    environment = dict(os.environ, PROGRESSION_DB=database, PROGRESSION_CONSOLE_TOKEN=TOKEN)
    processes = []
    driver = None

    def cli(*args):
        return subprocess.run([progressctl, "--db", database, *args], env=environment, capture_output=True, text=True, timeout=30)

    def start(command, name):
        log = open(os.path.join(scratch, name + ".log"), "w")
        process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        processes.append(process)
        return process

    try:
        # Files under names that are HTML: a folder <script>alert(1) and a file "'><img src=x onerror=alert(1)>.txt.
        data = os.path.join(scratch, "data")
        for folder, count in [(HOSTILE_FOLDER, 30), ("plain", 50)]:
            os.makedirs(os.path.join(data, folder))
            for index in range(count):
                with open(os.path.join(data, folder, f"file-{index:03}.txt"), "w") as file:
                    file.write(f"line {index}\n" * 2000)
        # In the first folder, sorted first: a step the job reaches at once.
        with open(os.path.join(data, HOSTILE_FOLDER, HOSTILE_FILE), "w") as file:
            file.write("hostile\n")

        # Two services of one slot each: the job's two folders are child jobs, one on each.
        for name in ["serve", "serve-2"]:
            start([demo, "serve", "--db", database, "--concurrency", "1", "--log-level", "warning"], name)
        wait_for("the demo services to start", lambda: os.path.exists(database) and cli("doctor").returncode == 0 and cli("doctor").stdout.count("alive") >= 2)
        job_input = json.dumps({"directory": data, "fileDelayMilliseconds": 250, "parallelFiles": 1})
        job = cli("submit", "checksum", "--input", job_input, "--pausable", "--retryable").stdout.strip()
        # A job no worker runs (it stays pending), named with a script.
        submitted = cli("submit", "unrun", "--allow-unregistered", "--name", SCRIPT_NAME,
                        "--input", json.dumps({"note": "</script><img src=x onerror=alert(2)>"}))
        script_job = submitted.stdout.strip()
        checks.check(submitted.returncode == 0 and script_job, "a job named with <script> was submitted", submitted.stderr.strip())
        def running_folders():
            listed = cli("list", "--kind", "checksum-folder", "--status", "running", "--json")
            if listed.returncode != 0:
                return []
            document = json.loads(listed.stdout)
            return document if isinstance(document, list) else document.get("tasks", [])
        wait_for("both folders' jobs to run", lambda: len(running_folders()) >= 2)

        console = start([progressctl, "console", "--db", database, "--port", "0"], "console")
        url = console.stdout.readline().strip()
        checks.check(url.startswith("http://127.0.0.1:"), "progressctl console printed its URL", url)

        options = Options()
        options.binary_location = arguments.chromium
        for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1200"]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(arguments.chromedriver), options=options)
        driver.set_page_load_timeout(30)
        console_errors = []

        def collect_log():
            console_errors.extend(entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE")

        def no_alert():
            try:
                alert = driver.switch_to.alert
                return f"an alert opened: {alert.text}"
            except NoAlertPresentException:
                return None

        # Signing in with the token.
        driver.get(url + "login")
        driver.find_element(By.NAME, "token").send_keys(TOKEN)
        driver.find_element(By.CSS_SELECTOR, "form.login button").click()
        wait_for("the overview after signing in", lambda: "Overview" in driver.title)
        checks.check(driver.find_elements(By.CSS_SELECTOR, "form.access button"), "signed in (a sign-out button)")
        collect_log()

        # The list: the job's bar moves, live.
        driver.get(url + "tasks")
        selector = f"tr[data-id='{job}'] progress"
        values = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(set(values)) < 2:
            value = driver.execute_script("var p = document.querySelector(arguments[0]); return p ? p.value : null;", selector)
            if value is not None:
                values.append(round(value, 4))
            time.sleep(0.1)
        checks.check(len(set(values)) >= 2, "the list shows the job's bar moving (two values within 3 s)", f"{sorted(set(values))[:4]}")
        name = driver.execute_script("var a = document.querySelector(arguments[0]); return a ? a.textContent : null;", f"tr[data-id='{script_job}'] td.name a")
        checks.check(name == SCRIPT_NAME, "a name with <script> renders as text on the list", repr(name))
        alert = no_alert()
        checks.check(alert is None, "no script of a name ran", alert or "")
        inline = driver.execute_script("return document.querySelectorAll('script:not([src]), img').length;")
        checks.check(inline == 0, "no element came out of a name (no inline script, no img)", str(inline))
        driver.save_screenshot(os.path.join(arguments.out, "console-list.png"))
        collect_log()

        # Every node of the tree: the hostile folder and file names are text.
        driver.get(url + "tasks/" + job + "?expand=all")
        names = driver.execute_script("return Array.from(document.querySelectorAll('#tree td.name a')).map(a => a.textContent);")
        checks.check(HOSTILE_FOLDER + "/" in names, "a folder named <script>alert(1) renders as text in the tree", str(len(names)) + " nodes")
        checks.check(any(n.endswith(HOSTILE_FILE) for n in names), "a file named \"'><img onerror> renders as text")
        checks.check(driver.execute_script("return document.querySelectorAll('img').length;") == 0 and no_alert() is None, "no img element, no alert")
        collect_log()

        # The job page: its tree, live; then the Pause button.
        driver.get(url + "tasks/" + job)
        rows = wait_for("the tree's rows", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#tree tbody tr")) >= 2 and driver.find_elements(By.CSS_SELECTOR, "#tree tbody tr"))
        checks.check(len(rows) >= 2, "the job page shows the tree", f"{len(rows)} rows")
        # Each folder's row names its child job and the worker that runs it: two workers, one per service.
        workers = wait_for("the tree to name two workers", lambda: (lambda names: len(names) >= 2 and names)(set(
            text.split(" · ", 1)[1] for text in driver.execute_script(
                "return Array.from(document.querySelectorAll('#tree span.child')).map(s => s.textContent);")
            if " · " in text)), timeout=15)
        checks.check(len(workers) >= 2, "the job page shows its children run by two workers", "; ".join(sorted(workers)))
        time.sleep(1.0)  # for the screenshot: let a few live updates arrive
        driver.save_screenshot(os.path.join(arguments.out, "console-job.png"))
        collect_log()
        pause = driver.find_element(By.ID, "action-pause")
        clicked = time.monotonic()
        pause.click()
        seen = None
        while time.monotonic() - clicked < 5.0:
            launched = time.monotonic() - clicked
            shown = cli("show", job, "--json")
            if shown.returncode == 0 and json.loads(shown.stdout)[0]["status"] == "paused":
                seen = launched
                break
        checks.check(seen is not None and seen <= 1.0, "the Pause button pauses the job: progressctl sees paused within 1 s",
                     "never" if seen is None else f"a progressctl started {seen * 1000:.0f} ms after the click saw it")
        wait_for("the page to show the job paused", lambda: driver.find_elements(By.ID, "action-resume"), timeout=15)
        checks.check(driver.find_element(By.CSS_SELECTOR, "table.facts .status").text == "paused", "the page shows it paused, with a Resume button")
        collect_log()
        driver.save_screenshot(os.path.join(arguments.out, "console-job-paused.png"))
        checks.check(not console_errors, "no console errors", "; ".join(e.get("message", "") for e in console_errors)[:500])
    except Exception as error:  # a step that could not run is a failed check, with what happened
        checks.check(False, "the browser test ran to its end", f"{type(error).__name__}: {error}")
    finally:
        if driver is not None:
            driver.quit()
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        if checks.failed:
            for name in ["serve", "serve-2", "console"]:
                path = os.path.join(scratch, name + ".log")
                if os.path.exists(path):
                    print(f"--- {name} log ---\n" + open(path).read()[-3000:])
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
