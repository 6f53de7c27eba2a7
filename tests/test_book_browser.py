"""The built book, opened in a real browser.

`make test` builds the book first (`test: book` in the Makefile); this module serves
`_build/html` on 127.0.0.1, drives a headless Chromium over the Chrome DevTools Protocol
(through `websocket-client`, which Jupyter already installs) and, for every page of
`_toc.yml`, checks what a reader would see:

* the equations were typeset by MathJax (``mjx-container`` elements, no ``mjx-merror``) and
  no raw ``$$`` / ``\\(`` / ``\\[`` delimiter is left in the prose;
* every ``<img>`` loaded (``complete`` and ``naturalWidth > 0``);
* no page shows a Python traceback;
* no request left 127.0.0.1 (the maths renders offline: MathJax comes from ``_static``).

A screenshot of the Protocols chapter is kept as ``_build/screenshots/protocols.png``
(a CI artefact).

Without Chromium or without a built book the tests skip, unless the environment variable
``REPEVAL_REQUIRE_BROWSER=1`` is set (``.ci/run`` sets it, after installing Debian's
``chromium``), in which case they fail instead: in CI nothing is skipped.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

#: every built page in a headless browser: left out of make test-fast
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
HTML = Path(
    os.environ.get("REPEVAL_BOOK_HTML", ROOT / "_build" / "html")
)  # override: another build
SCREENSHOTS = ROOT / "_build" / "screenshots"
SCREENSHOT_PAGE = "book/protocols"
REQUIRE = os.environ.get("REPEVAL_REQUIRE_BROWSER", "") not in ("", "0")

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--window-size=1280,1600",
]


def _missing(reason: str):
    if REQUIRE:
        pytest.fail(reason + " (REPEVAL_REQUIRE_BROWSER is set, so this is an error)")
    pytest.skip(reason)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def toc_pages() -> list[str]:
    """Every document of _toc.yml, in reading order (root first)."""
    import yaml

    toc = yaml.safe_load(Path(os.environ.get("REPEVAL_BOOK_TOC", ROOT / "_toc.yml")).read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(str(Path(entry["file"]).with_suffix("")))
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


# --------------------------------------------------------------------------- fixtures
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        _missing(f"the book is not built ({HTML} missing); run `make book`")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page target."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        msg_id = self.next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(f"no {method} within {timeout} s")

    def evaluate(self, expression: str, await_promise: bool = False):
        res = self.call(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=await_promise,
            timeout=60000,
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"JavaScript error: {res['exceptionDetails']}")
        return res["result"].get("value")

    def close(self):
        self.ws.close()


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        _missing("chromium is not installed (`apt-get install -y chromium`)")
    pytest.importorskip("websocket", reason="websocket-client is needed to drive chromium")
    profile = tempfile.mkdtemp(prefix="repeval-chromium-")
    proc = subprocess.Popen(
        [
            exe,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        tools.call("Page.enable")
        tools.call("Runtime.enable")
        tools.call("Network.enable")
        tools.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=1600,
            deviceScaleFactor=1,
            mobile=False,
        )
        yield tools
        tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


# JavaScript run in each page once it has loaded and MathJax has finished.
_WAIT_MATHJAX = """
new Promise((resolve) => {
  const t0 = Date.now();
  if (!document.querySelector('script[src*="mathjax"]')) { resolve(null); return; }
  (function poll() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(() => resolve(true), () => resolve(false));
    } else if (Date.now() - t0 > 30000) {
      resolve(false);
    } else {
      setTimeout(poll, 100);
    }
  })();
})
"""

_WAIT_IMAGES = """
Promise.all(Array.from(document.images).map((img) => img.complete ? null :
  new Promise((r) => { img.addEventListener('load', r); img.addEventListener('error', r);
                       setTimeout(r, 20000); }))).then(() => true)
"""

_INSPECT = """
(() => {
  const main = document.querySelector('main') || document.body;
  const prose = main.cloneNode(true);
  prose.querySelectorAll('pre, code, .highlight, mjx-container, script, style')
       .forEach((el) => el.remove());
  const text = prose.innerText;
  const all = main.innerText;
  return {
    title: document.title,
    mathjax_loaded: !!(window.MathJax && window.MathJax.version),
    mathjax_version: window.MathJax ? String(window.MathJax.version) : null,
    mjx: document.querySelectorAll('mjx-container').length,
    mjx_errors: document.querySelectorAll('mjx-merror').length,
    math_nodes: document.querySelectorAll('.math, span.math, div.math').length,
    raw_dollars: (text.match(/\\$\\$/g) || []).length,
    raw_paren: (text.match(/\\\\\\(|\\\\\\[/g) || []).length,
    images: Array.from(document.images).map((img) => ({
      src: img.currentSrc || img.src, complete: img.complete, w: img.naturalWidth,
      alt: img.getAttribute('alt')})),
    traceback: /Traceback \\(most recent call last\\)/.test(all)
               || document.querySelectorAll(
                    '.traceback, .output.error, .cell_output .ansi-red-fg').length > 0
               || /\\b[A-Z][A-Za-z]*Error\\b\\s*Traceback/.test(all),
    length: all.length,
    code_cells: document.querySelectorAll('div.cell').length,
    executed_images: Array.from(document.images).filter(
        (img) => /\\/_images\\//.test(img.currentSrc || img.src)).length,
  };
})()
"""


def _load(browser: DevTools, url: str) -> dict:
    browser.events.clear()
    nav = browser.call("Page.navigate", url=url)
    assert "errorText" not in nav, f"{url}: {nav.get('errorText')}"
    browser.wait_event("Page.loadEventFired", timeout=60)
    typeset = browser.evaluate(_WAIT_MATHJAX, await_promise=True)
    browser.evaluate(_WAIT_IMAGES, await_promise=True)
    info = browser.evaluate(_INSPECT)
    info["typeset"] = typeset
    requests = [
        ev["params"]["request"]["url"]
        for ev in browser.events
        if ev.get("method") == "Network.requestWillBeSent"
    ]
    info["external_requests"] = [
        u for u in requests if re.match(r"https?://", u) and not u.startswith("http://127.0.0.1")
    ]
    statuses = [
        (ev["params"]["response"]["url"], ev["params"]["response"]["status"])
        for ev in browser.events
        if ev.get("method") == "Network.responseReceived"
    ]
    info["bad_responses"] = [
        (u, s) for u, s in statuses if s >= 400 and not u.endswith("/favicon.ico")
    ]  # browser's own probe
    return info


# --------------------------------------------------------------------------- tests
def test_toc_pages_were_built():
    if not (HTML / "index.html").exists():
        _missing(f"the book is not built ({HTML} missing); run `make book`")
    missing = [p for p in toc_pages() if not (HTML / f"{p}.html").exists()]
    assert not missing, f"pages of _toc.yml missing from {HTML}: {missing}"


def test_no_page_references_an_external_mathjax():
    if not (HTML / "index.html").exists():
        _missing(f"the book is not built ({HTML} missing); run `make book`")
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").exists(), (
        "MathJax was not copied into _static (sphinx-mathjax-offline)"
    )
    offenders = []
    for page in HTML.rglob("*.html"):
        text = page.read_text(errors="replace")
        for src in re.findall(r'<script[^>]*\bsrc="([^"]+)"', text):
            if "mathjax" in src.lower() and re.match(r"(https?:)?//", src):
                offenders.append((page.relative_to(HTML).as_posix(), src))
    assert not offenders, f"pages load MathJax from the network: {offenders[:5]}"


# Pages exempt from the figure check: the back matter, and the pages generated from other
# files, whose code cells write only text and tables (the interview questions gathered from
# the chapters, the index of exercise notebooks).
BACK_MATTER = {"book/performance", "book/references", "book/interview", "book/exercises"}


@pytest.mark.parametrize("page", toc_pages())
def test_page_renders_in_chromium(site, browser, page):
    if not (HTML / f"{page}.html").exists():
        pytest.fail(f"{page}.html was not built")
    seen = _at_width(browser, site, page, "laptop")  # the load the laptop-width tests read
    info = seen["load"]
    assert info["length"] > 200, f"{page}: the page is (nearly) empty"
    assert not info["bad_responses"], f"{page}: failed requests {info['bad_responses']}"
    assert not info["external_requests"], (
        f"{page}: requests left 127.0.0.1 (not offline): {info['external_requests'][:5]}"
    )
    assert not info["traceback"], f"{page}: a Python traceback is shown on the page"
    # maths: MathJax loaded from _static and typeset every formula of the page
    if info["math_nodes"]:
        assert info["mathjax_loaded"], f"{page}: the page has formulas but MathJax did not load"
        assert info["typeset"], f"{page}: MathJax did not finish typesetting"
        assert info["mjx"] >= 1, f"{page}: formulas present but no mjx-container rendered"
    assert info["mjx_errors"] == 0, f"{page}: {info['mjx_errors']} MathJax errors"
    assert info["raw_dollars"] == 0, f"{page}: raw $$ left in the rendered text"
    assert info["raw_paren"] == 0, f"{page}: raw \\( or \\[ left in the rendered text"
    # figures
    broken = [img["src"] for img in info["images"] if not img["complete"] or img["w"] == 0]
    assert not broken, f"{page}: images that did not load: {broken}"
    # a figure drawn by the page's code says in words what it shows (not its file name)
    nameless = [
        img["src"].rsplit("/", 1)[-1]
        for img in info["images"]
        if "/_images/" in img["src"]
        and (
            not (img["alt"] or "").strip()
            or re.search(r"_images/|\.(png|jpe?g|svg|gif)$", img["alt"].strip(), flags=re.I)
        )
    ]
    assert not nameless, f"{page}: figures whose alt text is empty or a file name: {nameless}"
    # a chapter (a page with executed code cells) shows at least one figure drawn by its code;
    # the back matter (the Performance appendix renders tables from committed JSON) is exempt
    if info["code_cells"] and page not in BACK_MATTER:
        assert info["executed_images"] >= 1, f"{page}: no figure produced by executed code"
    if page == SCREENSHOT_PAGE:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        out = SCREENSHOTS / f"{Path(page).name}.png"
        out.write_bytes(base64.b64decode(seen["screenshot"]))
        assert out.stat().st_size > 10_000, "the screenshot is suspiciously small"


# --------------------------------------------------------------------------- layout and
# accessibility
#: Widths a reader brings: a phone (390 CSS px, mobile emulation) and a laptop (1280 px).
WIDTHS = {"phone": (390, 844, True), "laptop": (1280, 800, False)}


def _set_width(browser: DevTools, name: str) -> int:
    width, height, mobile = WIDTHS[name]
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=mobile,
    )
    return width


# Elements wider than the box that clips them: each must sit in a box that scrolls
# (overflow-x auto/scroll), never in one that hides the rest (overflow hidden/clip) and never
# in none at all (then the page itself widens).
_OVERFLOW = """
(() => {
  const vw = window.innerWidth;
  const out = {scroll_width: document.documentElement.scrollWidth, inner_width: vw,
               client_width: document.documentElement.clientWidth, lost: [], widening: [],
               unstyled: [], layout: document.documentElement.dataset.repevalLayout || null};
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className && typeof el.className === 'string'
          ? '.' + el.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');
  const main = document.querySelector('article') || document.querySelector('main') || document.body;
  for (const el of main.querySelectorAll('table, mjx-container, img, svg, pre, .math, iframe')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    let box = el.parentElement, clip = null;
    while (box && box !== document.documentElement) {
      const ox = getComputedStyle(box).overflowX;
      if (ox !== 'visible') { clip = [box, ox]; break; }
      box = box.parentElement;
    }
    if (clip) {
      const cr = clip[0].getBoundingClientRect();
      if (r.right > cr.right + 1 && !['auto', 'scroll'].includes(clip[1])) {
        out.lost.push(name(el) + ' (' + Math.round(r.width) + ' px) in ' + name(clip[0]) +
                      ' overflow-x:' + clip[1]);
      } else if (r.right > cr.right + 1 && /^(TABLE|MJX-CONTAINER)$/.test(el.tagName)
                 && getComputedStyle(clip[0]).scrollbarWidth !== 'thin') {
        // a table or formula that scrolls must show it: _static/repeval.css styles the bar
        out.unstyled.push(name(el) + ' in ' + name(clip[0]));
      }
      if (cr.right > vw + 1) out.widening.push(name(clip[0]) + ' right=' + Math.round(cr.right));
    } else if (r.right > vw + 1) {
      out.widening.push(name(el) + ' right=' + Math.round(r.right));
    }
  }
  out.widening = out.widening.slice(0, 8);
  out.lost = out.lost.slice(0, 8);
  return out;
})()
"""


# _static/repeval.js marks inline formulas too wide for their line once MathJax is done and then
# sets <html data-repeval-layout="done">; wait for it (and one more frame) before measuring.
_WAIT_LAYOUT = """
new Promise((resolve) => {
  const t0 = Date.now();
  (function poll() {
    if (document.documentElement.dataset.repevalLayout === 'done' || Date.now() - t0 > 20000) {
      requestAnimationFrame(() => resolve(document.documentElement.dataset.repevalLayout || null));
    } else { setTimeout(poll, 50); }
  })();
})
"""


AXE = Path(
    os.environ.get("REPEVAL_AXE_JS", ROOT / ".node" / "node_modules" / "axe-core" / "axe.min.js")
)

_AXE_VIOLATIONS = """(r) => r.violations.map((v) => ({
  id: v.id, impact: v.impact, help: v.help, n: v.nodes.length,
  targets: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}))"""

#: every rule on the whole page (the laptop width)
_AXE_RUN = f"axe.run(document, {{resultTypes: ['violations']}}).then({_AXE_VIOLATIONS})"

#: axe's colour rules that run by default (a test checks the list against axe's own)
COLOUR_RULES = ["color-contrast", "link-in-text-block"]

#: The phone width: every rule but the colour rules on the whole page; then the chapter's text
#: (``article.bd-article``) is emptied and the colour rules run on what is left. The colour
#: rules (axe's ``cat.color``: text contrast, and links told apart from their sentence by
#: colour) read the colours of text and background, which the theme does not change with the
#: width inside the article; what does change on a phone is the header and the navigation
#: (other buttons, drawers), and those are checked. They cost axe time in proportion to the
#: whole page whatever part of it they are asked to check (they lay out every element's
#: stacking), so the article is removed rather than excluded: on the longest chapter (rankme)
#: the phone run falls from about 8 s to about 4 s. The emptied page is not used afterwards:
#: this is the last step of a load (:func:`_at_width`). axe runs one check at a time, so the two
#: runs are chained.
_AXE_RUN_PHONE = f"""
(() => {{
  const colour = {json.dumps(COLOUR_RULES)};
  const off = Object.fromEntries(colour.map((id) => [id, {{enabled: false}}]));
  return axe.run(document, {{rules: off, resultTypes: ['violations']}})
    .then((first) => {{
      document.querySelector('article.bd-article').replaceChildren();
      return axe.run(document,
                     {{runOnly: {{type: 'rule', values: colour}}, resultTypes: ['violations']}})
        .then((second) => [first, second].flatMap({_AXE_VIOLATIONS}));
    }});
}})()
"""


@functools.lru_cache(maxsize=1)
def _axe_js() -> str:
    return AXE.read_text()


#: (page, width) -> what one load of the page at that width showed: what :func:`_load` read
#: (the rendering test reads the laptop-width load), the layout measured next, then
#: axe-core's violations (or the error axe raised). The rendering, layout and accessibility
#: tests read the same load, so each page is opened once per width.
_AT_WIDTH: dict = {}


def _at_width(browser: DevTools, site: str, page: str, width: str) -> dict:
    key = (page, width)
    if key not in _AT_WIDTH:
        px = _set_width(browser, width)
        seen = {"px": px}
        try:
            seen["load"] = _load(browser, f"{site}/{page}.html")
            if page == SCREENSHOT_PAGE and width == "laptop":
                seen["screenshot"] = browser.call("Page.captureScreenshot", format="png")["data"]
            browser.evaluate(_WAIT_LAYOUT, await_promise=True)
            seen["layout"] = browser.evaluate(_OVERFLOW)
            if AXE.exists():
                try:
                    browser.evaluate(_axe_js())
                    seen["violations"] = browser.evaluate(
                        _AXE_RUN_PHONE if width == "phone" else _AXE_RUN, await_promise=True
                    )
                except Exception as exc:  # reported by the accessibility test, not here
                    seen["axe_error"] = f"{type(exc).__name__}: {exc}"
        finally:  # back to the window the other tests use
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=1600,
                deviceScaleFactor=1,
                mobile=False,
            )
        _AT_WIDTH[key] = seen
    return _AT_WIDTH[key]


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("page", toc_pages())
def test_page_fits_the_screen(site, browser, page, width):
    """No page is wider than the screen: equations, tables and figures that do not fit
    scroll inside their own box (or shrink, for figures), and nothing is cut off."""
    seen = _at_width(browser, site, page, width)
    px, info = seen["px"], seen["layout"]
    assert info["scroll_width"] <= px + 1, (
        f"{page} at {px} px: the page is {info['scroll_width']} px wide; "
        f"too wide: {info['widening']}"
    )
    assert not info["lost"], f"{page} at {px} px: content cut off by its box: {info['lost']}"
    assert not info["unstyled"], (
        f"{page} at {px} px: scrolling boxes without a visible scrollbar: {info['unstyled'][:5]}"
    )
    assert info["layout"] == "done", f"{page}: _static/repeval.js did not run"


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.exists():
        _missing(f"axe-core is not installed ({AXE} missing); run `make axe`")
    return _axe_js()


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("page", toc_pages())
def test_page_has_no_serious_accessibility_violation(site, browser, axe_source, page, width):
    """axe-core (Deque's rule engine, the one browsers' audit tools use) finds no violation of
    serious or critical impact on the rendered page, on a phone and on a laptop (the theme
    shows different header buttons at the two widths)."""
    seen = _at_width(browser, site, page, width)
    assert "axe_error" not in seen, f"{page}: axe-core failed: {seen['axe_error']}"
    violations = seen["violations"]
    bad = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not bad, f"{page}: " + "; ".join(
        f"{v['id']} ({v['impact']}, {v['n']}x: {v['help']}) e.g. {v['targets']}" for v in bad
    )


#: a short page for the tests that plant faults (any page has the header, drawers and article)
PLANT_PAGE = "book/students"


def test_phone_run_checks_colour_outside_the_chapter_text_and_the_laptop_run_everywhere(
    site, browser, axe_source
):
    """The split of :data:`_AXE_RUN_PHONE` holds: grey-on-white text planted in the header is
    a colour-contrast violation at the phone width, the same text planted in the article is
    one at the laptop width only, and the other rules still run on the article on a phone.
    :data:`COLOUR_RULES` is the list of axe's colour rules that a default run runs."""
    plant = """
    (() => {
      const make = (id) => { const p = document.createElement('p'); p.id = id;
        p.textContent = 'faint words for the contrast check'; p.style.color = '#eeeeee';
        p.style.background = '#ffffff'; return p; };
      document.querySelector('.bd-header').appendChild(make('planted-header'));
      document.querySelector('article.bd-article').appendChild(make('planted-article'));
      const img = document.createElement('img'); img.id = 'planted-image';
      img.src = 'data:image/gif;base64,R0lGODlhAQABAAAAACw=';
      document.querySelector('article.bd-article').appendChild(img);
    })()
    """
    found = {}
    for width, run in (("phone", _AXE_RUN_PHONE), ("laptop", _AXE_RUN)):
        _set_width(browser, width)
        try:
            _load(browser, f"{site}/{PLANT_PAGE}.html")
            browser.evaluate(plant)
            browser.evaluate(axe_source)
            found[width] = browser.evaluate(run, await_promise=True)
        finally:
            _set_width(browser, "laptop")
    default_colour = browser.evaluate(
        "axe._audit.rules.filter((r) => r.enabled !== false && r.tags.includes('cat.color')"
        " && !r.tags.includes('experimental')).map((r) => r.id).sort()"
    )
    assert default_colour == sorted(COLOUR_RULES)

    def targets(violations, rule):
        return {t for v in violations if v["id"] == rule for t in v["targets"]}

    assert "#planted-header" in targets(found["phone"], "color-contrast")
    assert "#planted-article" not in targets(found["phone"], "color-contrast")
    assert {"#planted-header", "#planted-article"} <= targets(found["laptop"], "color-contrast")
    for width in found:  # an image without alt text is found in the article at both widths
        assert "#planted-image" in targets(found[width], "image-alt"), width


# --------------------------------------------------------------------------- interactive figures
def _pages_with_interactive_figures() -> list[str]:
    return [
        p
        for p in toc_pages()
        if (HTML / f"{p}.html").exists()
        and 'class="repeval-interactive"' in (HTML / f"{p}.html").read_text(errors="replace")
    ]


# Sets control `c` of figure `f` to value index `v` the way a reader would (a click on a radio
# button, a slider moved, an option picked), waits for Plotly's redraw and returns the frame key
# and a fingerprint of what is drawn (the plot's SVG, the heatmap image included, and the note).
_MOVE = """
(async (f, c, v) => {
  const root = document.querySelectorAll('.repeval-interactive')[f];
  const els = root.querySelectorAll('[data-control="' + c + '"]');
  if (els[0].type === 'radio') {
    els[v].click();
  } else {
    els[0].value = String(v);
    els[0].dispatchEvent(new Event(els[0].type === 'range' ? 'input' : 'change', {bubbles: true}));
  }
  if (root.repevalPending) await root.repevalPending;
  await new Promise((r) => requestAnimationFrame(() => r()));
  const text = root.querySelector('.repeval-plot').innerHTML
               + root.querySelector('.repeval-note').innerHTML;
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
  return {frame: root.dataset.frame, drawn: h + ':' + text.length};
})(%d, %d, %d)
"""

_FIGURES = """
new Promise((resolve) => {
  const t0 = Date.now();
  (function poll() {
    const figs = Array.from(document.querySelectorAll('.repeval-interactive'));
    if (figs.every((f) => f.dataset.ready === '1') || Date.now() - t0 > 30000) {
      resolve(figs.map((f) => ({
        ready: f.dataset.ready === '1', frame: f.dataset.frame,
        controls: Array.from({length: Number(f.dataset.controls)}, (_, c) => {
          const els = f.querySelectorAll('[data-control="' + c + '"]');
          return els[0].type === 'radio' ? els.length
               : els[0].tagName === 'SELECT' ? els[0].options.length : Number(els[0].max) + 1;
        })})));
    } else { setTimeout(poll, 100); }
  })();
})
"""


def test_interactive_figures_respond_and_stay_offline(site, browser):
    """Every interactive figure draws, each of its controls changes what is drawn, the frame
    follows the controls, and neither the page nor the figure requests anything outside the
    book (plotly.js comes from the book's _static folder)."""
    pages = _pages_with_interactive_figures()
    assert "book/protocols" in pages, "the protocols chapter has no interactive figure"
    for page in pages:
        info = _load(browser, f"{site}/{page}.html")
        figures = browser.evaluate(_FIGURES, await_promise=True)
        assert figures, f"{page}: no interactive figure found in the rendered page"
        for f, fig in enumerate(figures):
            assert fig["ready"], f"{page}: figure {f} did not draw (plotly.js missing?)"
            state = [int(i) for i in fig["frame"].split(",")]
            for c, n_values in enumerate(fig["controls"]):
                assert n_values >= 2, f"{page}: control {c} of figure {f} offers one value"
                drawn = set()
                for v in [*range(n_values), state[c]]:
                    out = browser.evaluate(_MOVE % (f, c, v), await_promise=True)
                    expected = state.copy()
                    expected[c] = v
                    assert out["frame"] == ",".join(map(str, expected)), (
                        f"{page}: figure {f}, control {c} set to {v}, frame shown {out['frame']}"
                    )
                    drawn.add(out["drawn"])
                assert len(drawn) >= 2, f"{page}: moving control {c} of figure {f} changed nothing"
        scripts = browser.evaluate(
            "Array.from(document.scripts).map((s) => s.src).filter((s) => /plotly/i.test(s))"
        )
        assert scripts and all(s.startswith(site + "/_static/plotly/") for s in scripts), (
            f"{page}: plotly.js not loaded from the book's _static folder: {scripts}"
        )
        resources = browser.evaluate("performance.getEntriesByType('resource').map((e) => e.name)")
        outside = [
            u
            for u in resources
            if not (u.startswith(site + "/") or u.startswith("data:") or u.startswith("blob:"))
        ]
        requested = [
            ev["params"]["request"]["url"]
            for ev in browser.events
            if ev.get("method") == "Network.requestWillBeSent"
        ]
        outside += [
            u for u in requested if re.match(r"https?://", u) and not u.startswith(site + "/")
        ]
        assert not outside and not info["external_requests"], (
            f"{page}: requests outside the book: {sorted(set(outside))[:5]}"
        )
