"""The analysts' site: `dbt docs generate` on the built demo, opened in headless Chromium as a
browser opens it. The page of a history table and of an `_hx` model show their descriptions and
documented columns (the texts come from manifest.json), and the lineage graph opened from the
`_hx` model's page draws the edge from its history table. Screenshots of the three views are
saved under $LAKEHISTORY_HOME/test-artifacts/."""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness import REPO_ROOT

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # reported by the `browser` fixture, as a failure
    sync_playwright = None

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (setup/bootstrap.sh); never a downloaded browser
SETUP_HINT = "run `bash setup/bootstrap.sh` (it installs Debian's chromium package and the pinned playwright)"
WAIT_MS = 60_000  # the site parses a ~1 MB manifest; the machine is shared
HISTORY = "model.lakehistory_integration_tests.meta_station_history"
HX = "model.lakehistory_integration_tests.meta_station_hx"
MODEL_PAGE = (1400, 2200)  # tall enough that the whole page (the app scrolls inside) is in one shot
GRAPH_PAGE = (1400, 900)

# The lineage graph as drawn: dbt docs keeps its cytoscape instance on the #cy container. None
# until the graph shows fullscreen, laid out and fitted into the container.
GRAPH_STATE_JS = """() => {
  const el = document.getElementById('cy');
  const cy = el && el._cyreg && el._cyreg.cy;
  if (!cy || el.offsetWidth < 800 || el.offsetHeight < 300) return null;
  const nodes = cy.nodes().filter(n => n.visible());
  if (nodes.length === 0) return null;
  const box = nodes.renderedBoundingBox();
  if (box.w <= 0 || box.x1 < 0 || box.y1 < 0 || box.x2 > el.offsetWidth || box.y2 > el.offsetHeight) return null;
  return {
    nodes: nodes.map(n => n.id()),
    edges: cy.edges().filter(e => e.visible()).map(e => [e.source().id(), e.target().id()]),
  };
}"""


def artifacts_dir() -> Path:
    home = os.environ.get("LAKEHISTORY_HOME") or str(REPO_ROOT / ".local")
    path = Path(home) / "test-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def as_rendered(markdown: str) -> str:
    """A description's text as the site shows it once Markdown is rendered (inline code loses
    its backticks); whitespace is compared normalised."""
    return " ".join(markdown.replace("`", "").split())


@pytest.fixture(scope="module")
def manifest(docs_site: Path) -> dict:
    return json.loads((docs_site / "manifest.json").read_text())


@pytest.fixture(scope="module")
def site_url(docs_site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (it fetches manifest.json and catalog.json, which a
    file:// page may not)."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(docs_site)))
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for every check of this module."""
    if sync_playwright is None:
        pytest.fail(f"the Python package playwright is not installed: {SETUP_HINT}", pytrace=False)
    if not CHROMIUM.is_file():
        pytest.fail(f"Chromium is missing ({CHROMIUM}): {SETUP_HINT}", pytrace=False)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser: Browser, url: str, size: tuple[int, int]) -> Page:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    return page


def save_screenshot(page: Page, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
    path = artifacts_dir() / name
    # Tooltips left by the clicks would cover the view.
    page.screenshot(path=str(path), animations="disabled", style=".tooltip { display: none !important; }")
    with capsys.disabled():
        print(f"\n  screenshot: {path}")
    return path


def check_model_page(page: Page, node: dict, columns: tuple[str, ...]) -> None:
    """The model's page shows its description and, per documented column, a row with the
    column's description; `columns` must be among the documented ones."""
    name = node["name"]
    assert node["description"].strip(), f"{name} has no description in manifest.json"
    documented = {c: v["description"] for c, v in node["columns"].items() if v.get("description", "").strip()}
    assert set(columns) <= set(documented), f"{name}: {sorted(set(columns) - set(documented))} not documented"

    description = page.locator('[marked="model.description"]')
    expect(description, f"the description on {name}'s page").to_contain_text(
        as_rendered(node["description"]), timeout=WAIT_MS
    )
    for column, text in documented.items():
        row = page.locator(
            "tr.column-row",
            has=page.locator("td:first-child span", has_text=re.compile(rf"^\s*{re.escape(column)}\s*$")),
        )
        expect(row, f"the row of column {column} on {name}'s page").to_have_count(1, timeout=WAIT_MS)
        # The columns table shows each description as its Markdown source.
        expect(row.locator("td").nth(2), f"the description of column {column} on {name}'s page").to_contain_text(
            text, timeout=WAIT_MS
        )


def test_history_table_page_shows_its_description_and_columns(
    browser: Browser, site_url: str, manifest: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    page = open_page(browser, f"{site_url}#!/model/{HISTORY}", MODEL_PAGE)
    try:
        check_model_page(page, manifest["nodes"][HISTORY], ("valid_from", "valid_to", "_fivetran_start"))
        save_screenshot(page, "docs_site_meta_station_history.png", capsys)
    finally:
        page.close()


def test_hx_model_page_shows_its_description_and_columns(
    browser: Browser, site_url: str, manifest: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    node = manifest["nodes"][HX]
    assert node["language"] == "python", f"{HX} is a Python model"
    page = open_page(browser, f"{site_url}#!/model/{HX}", MODEL_PAGE)
    try:
        check_model_page(page, node, ("meta_network_hx_id", "meta_station_hx_id", "mod_time"))
        save_screenshot(page, "docs_site_meta_station_hx.png", capsys)
    finally:
        page.close()


def test_lineage_graph_draws_the_history_table_feeding_the_hx_model(
    browser: Browser, site_url: str, manifest: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    assert HISTORY in manifest["nodes"][HX]["depends_on"]["nodes"], f"manifest.json: {HX} depends on {HISTORY}"
    page = open_page(browser, f"{site_url}#!/model/{HX}", GRAPH_PAGE)
    try:
        # As a reader does: from the model's page, open the lineage graph, then fullscreen.
        expect(page.locator('[marked="model.description"]')).to_be_visible(timeout=WAIT_MS)
        page.locator('a[title="View Lineage Graph"]').click()
        page.locator('a[title="View Fullscreen"][data-large]').click()
        try:
            graph = page.wait_for_function(GRAPH_STATE_JS, timeout=WAIT_MS).json_value()
        except PlaywrightTimeout:
            pytest.fail(f"the lineage graph of {HX} was not drawn within {WAIT_MS // 1000} s", pytrace=False)
        nodes, edges = set(graph["nodes"]), {tuple(e) for e in graph["edges"]}
        # The check tells a drawn node from an absent one.
        assert "model.lakehistory_integration_tests.no_such_model" not in nodes
        for node in (HX, HISTORY):
            assert node in nodes, f"the lineage graph draws no {node}; it draws {sorted(nodes)}"
        assert (HISTORY, HX) in edges, f"the lineage graph draws no edge {HISTORY} -> {HX}; edges: {sorted(edges)}"
        save_screenshot(page, "docs_site_lineage_meta_station_hx.png", capsys)
    finally:
        page.close()
