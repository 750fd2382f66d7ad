"""Check the built documentation site in headless Chromium.

``python scripts/check_site.py site`` serves ``site/`` on 127.0.0.1 (an
ephemeral port, stopped at the end), opens every HTML page of it in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``) and fails when:

- a page does not render: no title, no article content, or the theme's
  header missing;
- the browser console logs an error (level SEVERE) caused by the site itself;
- an internal link (``<a href>``, stylesheet, script, image) points to a file
  the site does not have, or to an anchor the target page does not carry;
- a page loads a stylesheet, script or image from another host (the site
  must work offline and leak no visit);
- a page of the site is reachable by no link from the home page;
- a public name of ``grelmicro.jwt``, ``grelmicro.jwt.fastapi`` or
  ``grelmicro.jwt.fastapi_dpop`` has no entry (an element id) in the API
  reference pages;
- the search box, given "audience", shows no result.

It prints one line per page and a summary; the exit code is 0 only when
every check passed.
"""

# ruff: noqa: T201 - a command-line report

from __future__ import annotations

import argparse
import functools
import http.server
import importlib
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

SEARCH_TERM = "audience"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keep the request log out of the report."""


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (ephemeral port); yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def browser() -> webdriver.Chrome:
    """Headless Chromium that keeps the console log."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


def html_pages(root: Path) -> list[str]:
    """Every page of the site, as a path relative to ``root`` (``404.html`` aside)."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*.html")
        if path.name != "404.html"
    )


def page_path(root: Path, base: str, url: str) -> Path | None:
    """The file behind ``url`` when it belongs to the site, else None."""
    if not url.startswith(base):
        return None
    relative = unquote(urlsplit(url).path)[len(urlsplit(base).path) :]
    target = root / relative
    if relative == "" or relative.endswith("/"):
        target = target / "index.html"
    return target


class Checker:
    """Visits pages, collects failures."""

    def __init__(self, root: Path, base: str, driver: webdriver.Chrome) -> None:
        self.root = root
        self.base = base
        self.driver = driver
        self.failures: list[str] = []
        self.anchors: dict[Path, set[str]] = {}
        self.linked: set[Path] = set()
        self.links_checked = 0
        self.pending_anchors: list[tuple[str, Path, str, str]] = []

    def fail(self, message: str) -> None:
        """Record and print one failure."""
        self.failures.append(message)
        print(f"  FAIL {message}")

    def visit(self, relative: str) -> None:
        """Open one page: rendering, console, links (anchors are checked at the end)."""
        url = urljoin(self.base, relative)
        driver = self.driver
        driver.get_log("browser")  # type: ignore[no-untyped-call]  # drop what the previous page logged
        driver.get(url)
        WebDriverWait(driver, 15).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        title = driver.title.strip()
        if not title:
            self.fail(f"{relative}: no title")
        if not driver.find_elements(By.CSS_SELECTOR, "header.md-header"):
            self.fail(f"{relative}: the theme's header is missing")
        article = driver.find_elements(By.CSS_SELECTOR, "article.md-content__inner")
        if not article or not article[0].text.strip():
            self.fail(f"{relative}: no article content")
        self.anchors[self.root / relative] = set(
            driver.execute_script("return Array.from(document.querySelectorAll('[id]'), e => e.id)")
        )
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]'), e => e.href)"
        )
        resources = driver.execute_script(
            "return [].concat("
            "Array.from(document.querySelectorAll('link[href]'), e => e.href),"
            "Array.from(document.querySelectorAll('script[src]'), e => e.src),"
            "Array.from(document.querySelectorAll('img[src]'), e => e.src))"
        )
        for resource in resources:
            if resource.startswith(("http:", "https:")) and not resource.startswith(self.base):
                self.fail(f"{relative}: loads {resource} from another host")
        for link in [*links, *resources]:
            self.check_link(relative, link)
        time.sleep(0.2)  # let late console messages arrive
        for entry in driver.get_log("browser"):  # type: ignore[no-untyped-call]
            if entry.get("level") == "SEVERE" and self.base in entry.get("message", ""):
                self.fail(f"{relative}: console error: {entry['message']}")
        print(f"ok   {relative}  [{title}]")

    def check_link(self, relative: str, link: str) -> None:
        """A link inside the site must reach a file; its anchor is checked later."""
        target_url, fragment = urldefrag(link)
        target = page_path(self.root, self.base, target_url)
        if target is None:
            return  # outside the site (none expected, but not ours to check)
        self.links_checked += 1
        if not target.is_file():
            self.fail(f"{relative}: broken link {link}")
            return
        if target.suffix == ".html":
            self.linked.add(target)
            if fragment:
                self.pending_anchors.append((relative, target, unquote(fragment), link))

    def check_anchors(self) -> None:
        """Every ``#anchor`` linked to must exist on its target page."""
        for relative, target, fragment, link in self.pending_anchors:
            ids = self.anchors.get(target)
            if ids is None:
                ids = set(self.static_ids(target))
                self.anchors[target] = ids
            if fragment not in ids:
                self.fail(f"{relative}: link {link} names a missing anchor")

    @staticmethod
    def static_ids(target: Path) -> Iterator[str]:
        """The ``id`` attributes of a page not visited in the browser."""
        yield from re.findall(r'\sid="([^"]+)"', target.read_text(encoding="utf-8"))

    def check_api(self) -> None:
        """Every name of ``__all__`` has its anchor in the reference pages."""
        import grelmicro.jwt  # noqa: PLC0415 - only this check needs the package
        import grelmicro.jwt.errors  # noqa: PLC0415

        reference = self.root / "reference"
        jwt_ids = self.anchors.get(reference / "jwt" / "index.html", set())
        error_ids = self.anchors.get(reference / "errors" / "index.html", set())
        for name in grelmicro.jwt.__all__:
            if f"grelmicro.jwt.{name}" in jwt_ids or f"grelmicro.jwt.errors.{name}" in error_ids:
                continue
            self.fail(f"reference: grelmicro.jwt.{name} has no entry")
        for module in ("fastapi", "fastapi_dpop"):
            try:
                names = importlib.import_module(f"grelmicro.jwt.{module}").__all__
            except ImportError:  # FastAPI not installed: its pages are not checked
                continue
            ids = self.anchors.get(reference / module / "index.html", set())
            for name in names:
                if f"grelmicro.jwt.{module}.{name}" not in ids:
                    self.fail(f"reference: grelmicro.jwt.{module}.{name} has no entry")

    def search(self) -> int:
        """Type the search term into the material search box; count the results."""
        driver = self.driver
        driver.get(self.base)
        box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
        if not box.is_displayed():  # narrow layout: the box opens from a header button
            driver.find_element(By.CSS_SELECTOR, "label.md-header__button[for='__search']").click()
            WebDriverWait(driver, 10).until(lambda _d: box.is_displayed())
        box.click()
        box.send_keys(SEARCH_TERM)
        box.send_keys(Keys.SPACE, Keys.BACKSPACE)  # the worker may load after the first keys
        try:
            WebDriverWait(driver, 20).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
            )
        except TimeoutException:
            return 0
        return len(driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))


def main() -> int:
    """Check the site given on the command line; 0 when every check passed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs site_dir)")
    args = parser.parse_args()
    root: Path = args.site.resolve()
    pages = html_pages(root)
    if "index.html" not in pages:
        print(f"{root} holds no built site (no index.html)", file=sys.stderr)
        return 1
    with serve(root) as base:
        driver = browser()
        try:
            checker = Checker(root, base, driver)
            for relative in pages:
                checker.visit(relative)
            checker.check_anchors()
            checker.check_api()
            unreached = [
                page for page in pages if root / page not in checker.linked and page != "index.html"
            ]
            for page in unreached:
                checker.fail(f"{page}: no page links to it")
            results = checker.search()
            if results:
                print(f"ok   search {SEARCH_TERM!r}: {results} results")
            else:
                checker.fail(f"search {SEARCH_TERM!r}: no result")
        finally:
            driver.quit()
    print(
        f"\n{len(pages)} pages, {checker.links_checked} internal links, "
        f"{len(checker.failures)} failures"
    )
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
