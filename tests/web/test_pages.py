"""The pages in a real browser (headless Chromium driven by Playwright) against a real server:
switching the GPU, following a running submission to its verdict, signing in, phone widths."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from kernelcup.adapters.web.auth import COOKIE
from kernelcup.core.store.db import make_engine, upgrade
from tests.web.conftest import ALICE, BOB, Clock, ScriptedRunner, ServerThread, bearer, build_app, solution, token_for

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium (apt-get install chromium)"),
    pytest.mark.slow,
]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 15_000
expect.set_options(timeout=TIMEOUT_MS)


class Site:
    def __init__(self, server: ServerThread, runner: ScriptedRunner) -> None:
        assert server.app is not None
        self.url, self.runner = server.url, runner
        self.alice, self.bob = token_for(server.app, ALICE), token_for(server.app, BOB)

    def submit(self, token: str, extra: str = "", mode: str = "ranked", gpus: tuple[str, ...] = ("cpu",)) -> int:
        response = httpx.post(f"{self.url}/api/submissions", headers=bearer(token), timeout=30,
                              data={"mode": mode, "leaderboard": "identity", "gpu": list(gpus)},
                              files={"file": ("kernel.py", solution() + extra.encode())})
        assert response.status_code == 202, response.text
        submission_id: int = response.json()["submission_id"]
        return submission_id

    def wait_done(self, submission_id: int) -> None:
        with httpx.stream("GET", f"{self.url}/api/submissions/{submission_id}/events", timeout=60) as events:
            for _ in events.iter_lines():
                pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('pages')}/kernelcup.db")
    upgrade(engine)
    runner = ScriptedRunner()
    with ServerThread(lambda: build_app(engine, runner, Clock())) as server:
        site = Site(server, runner)
        site.wait_done(site.submit(site.alice, "# score: 0.002\n"))
        site.wait_done(site.submit(site.bob, "# score: 0.001\n", gpus=("H100",)))
        yield site
    engine.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


def test_the_leaderboard_page_switches_the_gpu_shown(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/leaderboards/identity?gpu=cpu")
    cpu = page.locator('section.gpu-panel[data-gpu="cpu"]')
    h100 = page.locator('section.gpu-panel[data-gpu="H100"]')
    expect(cpu).to_be_visible()
    expect(cpu.locator("table.ranking")).to_contain_text("alice")
    expect(h100).to_be_hidden()
    page.click('.tabs a[data-gpu="H100"]')
    expect(h100).to_be_visible()
    expect(h100.locator("table.ranking")).to_contain_text("bob")
    expect(cpu).to_be_hidden()
    assert page.url.endswith("?gpu=H100")
    expect(page.locator("time.countdown")).to_have_text(re.compile(r"in (\d+d )?\d\d:\d\d:\d\d"))


def test_a_running_submission_page_follows_it_to_its_verdict(site: Site, page: Page, tmp_path: Path) -> None:
    site.runner.gate, site.runner.waiting = threading.Event(), threading.Event()
    try:
        submission_id = site.submit(site.alice, "# score: 0.0015\n")
        assert site.runner.waiting.wait(15)
        page.goto(f"{site.url}/submissions/{submission_id}")
        expect(page.locator("h1 .verdict")).to_have_text("running")
        # The row's progress lags the runner by up to a heartbeat; the events then carry it on.
        expect(page.locator(".job .status")).to_have_text(re.compile(r"testing [1-5]/5"))
        site.runner.gate.set()
        expect(page.locator("h1 .verdict")).to_have_text("passed")
        expect(page.locator(".job .verdict-line")).to_contain_text("all tests passed · score 1.5 ms · rank 1")
        page.screenshot(path=str(tmp_path / "submission.png"), full_page=True)
    finally:
        site.runner.gate = None


def test_signing_in_shows_the_author_their_code(site: Site, page: Page) -> None:
    submission_id = site.submit(site.alice, "# score: 0.003\n# only-alice-sees-this\n")
    site.wait_done(submission_id)
    page.goto(f"{site.url}/submissions/{submission_id}")
    expect(page.locator("section.code")).to_contain_text("private to the author")
    page.goto(f"{site.url}/signin")
    page.fill("#token", site.alice)
    page.click("form.signin button")
    expect(page.locator("header.top")).to_contain_text("alice")
    page.goto(f"{site.url}/submissions/{submission_id}")
    expect(page.locator("pre.source")).to_contain_text("only-alice-sees-this")


def test_signing_out_in_the_browser_ends_the_session(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/signin")
    page.fill("#token", site.bob)
    page.click("form.signin button")
    expect(page.locator("header.top")).to_contain_text("bob")
    [session] = [c for c in page.context.cookies() if c["name"] == COOKIE]
    assert session["value"] != site.bob and session["httpOnly"]
    page.click("header.top form button")  # the sign-out form, with its CSRF value
    expect(page.locator("header.top")).to_contain_text("Sign in")
    copied = httpx.get(f"{site.url}/api/me", cookies={COOKIE: session["value"]}, timeout=10)
    assert copied.status_code == 401


@pytest.mark.parametrize("path", ["/", "/leaderboards/identity", "/submissions/1", "/users/1"])
def test_pages_fit_a_phone_screen(site: Site, browser: Browser, path: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(site.url + path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()
