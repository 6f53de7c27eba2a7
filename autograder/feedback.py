"""Feedback pages that reveal no hidden test and typeset maths without a network.

* :class:`ScrubTestTracebacks` (an nbgrader preprocessor, run by ``generate_feedback``
  after ``ClearHiddenTests``) reduces every error in a test cell to its last line, so a
  traceback can never quote a hidden test's source. The hidden tests call
  :func:`autograder.checks.grade`, which never raises, so this is a second safety net.
* :func:`make_maths_offline` rewrites a generated feedback page: nbgrader's template loads
  MathJax 2 from a CDN; the page instead loads MathJax 3 (``tex-svg.js``, which embeds
  its fonts) from a local copy, taken from the ``sphinx-mathjax-offline`` package that
  the book's tool chain installs. :func:`make_feedback_offline` keeps one copy in each
  student's folder, ``feedback/<student>/mathjax-tex-svg.js`` (a hard link to one file
  where the file system allows it), that the student's pages load by a relative path, so
  a student's folder handed out alone still typesets its maths.
* :func:`autograder.feedback_layout.make_readable` lets every finding wrap inside the
  page (no box that scrolls sideways, at a phone's width too) and names each graded cell
  in the page's summary by what its check tests instead of nbgrader's "Test cell".
* :func:`make_feedback_offline` also points the statement's chapter link
  (``../../book/<chapter>.md``, right inside ``exercises/``) at the published book
  (``book_url/book/<chapter>.html``; the course's ``book_url``, by default the GitHub
  Pages address that ``make publish`` writes to, :func:`default_book_url`), never into
  the instructor's own clone, which no student has; and styles the Markdown tables (the
  grading table of each statement) with borders and padding.
* :func:`mark_submission` puts the submission time, the due date and the lateness at the
  top of a page (``late by 3.25 h``: in hours, as in the exports).

Everything in a feedback page's body comes from a notebook that a student's kernel wrote,
so a page is made safe to open before anything else is done to it:

* :class:`SafeOutputs` (an nbgrader preprocessor, after nbgrader's own) is nbconvert's
  :class:`~nbconvert.preprocessors.SanitizeHTML`: it drops every output type that could
  run code (JavaScript, widgets, SVG, any type it does not know) and passes HTML and
  Markdown outputs through :func:`clean_html`; a raw cell too. An execution count that is
  not a number is removed (the template prints it unescaped). An output left with
  nothing to show is dropped (no empty ``Out`` box), as is a graded test cell's bare
  returned score, which the cell's heading already states;
* :func:`secure_page` passes the whole rendered ``<body>`` through :func:`clean_html`
  (bleach, the library nbconvert's sanitiser is built on, with the tags and attributes
  that nbconvert's own markup uses: no script, no event handler, no ``javascript:`` link,
  no style sheet; images only from ``http(s)`` or ``data:image/``), which covers the
  rendered Markdown of the student's cells and what nbgrader's template prints
  unescaped; and puts a Content-Security-Policy ``<meta>`` first in the ``<head>``
  (:data:`CSP`): no script but the page's own MathJax (its configuration by hash, its
  bundle from the course's folder), no connection, no form, no frame, no plug-in;
* :func:`note_markdown` is the text of the grader's own "Grading note" cell, with every
  character that Markdown or HTML would read as markup escaped, so a file name such as
  ``<img src=x onerror=...>.ipynb`` is shown as it is written.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import os
import re
import shutil
import sysconfig
from pathlib import Path

from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

MATHJAX_FILE = "mathjax-tex-svg.js"

_CDN_BLOCK = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_ANY_CDN_SCRIPT = re.compile(
    r"<script[^>]+src=\"https?://[^\"]*mathjax[^\"]*\"[^>]*>\s*</script>", re.I | re.S
)

_LOCAL_SCRIPT = re.compile(r'<script src="[^"<>]*' + re.escape(MATHJAX_FILE) + r'"></script>')

OFFLINE_MATHJAX = f"""<!-- MathJax 3, loaded from a local copy (autograder.feedback) -->
<script>
window.MathJax = {{
  tex: {{inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
        displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true}},
  svg: {{fontCache: 'global'}}
}};
</script>
<script src="{MATHJAX_FILE}"></script>"""

#: the one inline script a feedback page holds: the MathJax configuration above
_MATHJAX_CONFIG = OFFLINE_MATHJAX.split("<script>", 1)[1].split("</script>", 1)[0]

#: the Content-Security-Policy of every feedback page: scripts only the MathJax
#: configuration (by its hash) and files of the course's own feedback folder (``'self'``
#: when the pages are served, ``file:`` when they are opened from a disk); inline styles
#: (nbconvert's and MathJax's); images from the page itself or ``data:``; nothing else
CSP = (
    "default-src 'none'; "
    "script-src 'self' file: 'sha256-"
    + base64.b64encode(hashlib.sha256(_MATHJAX_CONFIG.encode()).digest()).decode()
    + "'; style-src 'self' file: 'unsafe-inline'; img-src 'self' file: data:; "
    "font-src 'self' file: data:; connect-src 'none'; object-src 'none'; "
    "frame-src 'none'; media-src 'none'; worker-src 'none'; base-uri 'none'; "
    "form-action 'none'"
)
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'

#: what :func:`clean_html` keeps: the markup of nbconvert's and nbgrader's templates and
#: of rendered Markdown, never a script, a style sheet, a form, a frame or an object
SAFE_TAGS = frozenset(
    {
        "a",
        "abbr",
        "acronym",
        "b",
        "blockquote",
        "br",
        "caption",
        "cite",
        "code",
        "col",
        "colgroup",
        "dd",
        "del",
        "details",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
        "var",
    }
)
#: ids of nbgrader's page layout (its style sheet selects them); other ids are dropped,
#: so a student's markup cannot take the id of a line the grader adds
_LAYOUT_IDS = frozenset({"toc", "notebook", "notebook-container"})
_COMMON = frozenset({"class", "title", "style", "align"})
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*\Z")


def _keep_attribute(tag, name, value):
    """bleach's attribute filter for :func:`clean_html`."""
    if name in _COMMON:
        return True
    if name == "id":
        return value in _LAYOUT_IDS or tag in ("h1", "h2", "h3", "h4", "h5", "h6")
    if tag == "a":
        if name == "href":
            return not value.strip().lower().startswith("data:")
        return name in ("name", "rel")
    if tag == "img":
        if name == "src":
            v = value.strip()
            return not v.lower().startswith("data:") or bool(_IMAGE_DATA.match(v))
        return name in ("alt", "width", "height")
    if tag in ("td", "th"):
        return name in ("colspan", "rowspan")
    if tag in ("ol", "li"):
        return name in ("start", "value")
    return False


def clean_html(text):
    """``text`` (HTML) with only :data:`SAFE_TAGS` and their harmless attributes kept.

    bleach (the sanitiser under nbconvert's) parses the text as a browser would; any
    other tag is removed with its markup (its text stays, as text), as are comments, every
    event-handler attribute, and every URL whose scheme is not ``http``, ``https``,
    ``mailto`` or, for an image, ``data:image/``; inline styles pass bleach's CSS
    sanitiser.

    Parameters
    ----------
    text : str or bytes

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``text`` is neither text nor bytes.
    """
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ValueError(f"text must be HTML as str or bytes, got {type(text).__name__}")
    return bleach.clean(
        text,
        tags=SAFE_TAGS,
        attributes=_keep_attribute,
        protocols={"http", "https", "mailto", "data"},
        strip=True,
        strip_comments=True,
        css_sanitizer=CSSSanitizer(),
    )


class SafeOutputs(SanitizeHTML):
    """nbconvert's :class:`~nbconvert.preprocessors.SanitizeHTML` for feedback pages.

    Outputs of a type that could run code are dropped (only plain text, LaTeX, JSON,
    PNG and JPEG images pass unchanged; HTML and Markdown pass :func:`clean_html`); a raw
    cell is cleaned too. A Markdown cell's source is left alone: its rendered HTML is
    cleaned with the rest of the page (:func:`secure_page`), so its code spans keep their
    ``<`` and ``>``. An execution count that is not an integer is removed.

    Enabled by default: nbconvert's sanitiser is off until enabled, and nbgrader
    registers a converter's preprocessors as they are, so without this it would be
    listed in the configuration and never run.
    """

    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown":
            return cell, resources
        if cell.cell_type == "code":
            if not _is_count(cell.get("execution_count")):
                cell["execution_count"] = None
            for out in cell.get("outputs", []):
                if "execution_count" in out and not _is_count(out["execution_count"]):
                    out["execution_count"] = None
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code":
            test = utils.is_grade(cell) and not utils.is_solution(cell)
            cell.outputs = [o for o in cell.outputs if _shows_something(o, test)]
        return cell, resources

    def sanitize_html_tags(self, html_str):
        return clean_html(html_str)


def _is_count(value):
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


_NUMBER = re.compile(r"\s*-?\d+(\.\d*)?([eE][-+]?\d+)?\s*\Z")


def _shows_something(output, graded_test):
    """False for an output the page would show as an empty box (a stream with no text,
    data with nothing left after sanitising, HTML that cleans to nothing) and, in a graded
    test cell, for the bare number the cell returned (its score, stated in the heading)."""
    kind = output.get("output_type")
    if kind == "stream":
        return bool(str(output.get("text", "")).strip())
    if kind not in ("execute_result", "display_data"):
        return True
    data = output.get("data", {})
    shown = {k: v for k, v in data.items() if k.startswith("image/") or _text(v).strip()}
    if any(k.startswith("text/html") for k in shown):
        html_text = re.sub(r"<[^>]*>", "", _text(shown["text/html"]))
        if not html_text.strip() and "<img" not in _text(shown["text/html"]):
            shown.pop("text/html")
    if not shown:
        return False
    plain = _text(shown.get("text/plain", ""))
    return not (graded_test and list(shown) == ["text/plain"] and _NUMBER.match(plain))


def _text(value):
    return "".join(value) if isinstance(value, list) else str(value)


_HEAD = re.compile(r"<head(\s[^>]*)?>", re.I)
_BODY = re.compile(r"<body(\s[^>]*)?>", re.I)


def secure_page(html_path):
    """Make one generated feedback page safe to open: its ``<body>`` through
    :func:`clean_html`, :data:`CSP_META` first in its ``<head>``. A page that carries the
    policy already is left as it is. Returns True if the page changed.

    Raises
    ------
    ValueError
        If the page has no ``<head>`` or no ``<body>`` (not a page nbgrader wrote).
    """
    html_path = Path(html_path)
    page = html_path.read_text(encoding="utf-8")
    head = _HEAD.search(page)
    if head is None:
        raise ValueError(f"html_path must be a feedback page with a <head>: {html_path}")
    if CSP_META in page[: head.end() + len(CSP_META) + 1]:
        return False
    body = _BODY.search(page, head.end())
    end = page.rfind("</body>")
    if body is None or end < body.end():
        raise ValueError(f"html_path must be a feedback page with a <body>: {html_path}")
    new = (
        page[: head.end()]
        + "\n"
        + CSP_META
        + page[head.end() : body.start()]
        + "<body>"
        + clean_html(page[body.end() : end])
        + page[end:]
    )
    html_path.write_text(new, encoding="utf-8")
    return True


def note_markdown(text):
    """The Markdown source of a "Grading note" saying ``text`` (plain text: it may hold a
    student's file name or an error message), every character that Markdown or HTML
    reads as markup escaped and all whitespace made single spaces.

    Raises
    ------
    ValueError
        If ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    plain = " ".join(text.split())
    # Markdown's punctuation by backslash, then what HTML reads by entity (which Markdown
    # turns back into the character)
    plain = re.sub(r"([\\`*_{}\[\]()#+\-.!|~$])", r"\\\1", plain)
    return "**Grading note.** " + _html.escape(plain, quote=True)


class ScrubTestTracebacks(NbGraderPreprocessor):
    """Keep only ``ename: evalue`` of errors raised in graded test cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


def mathjax_source():
    """Path of the offline MathJax 3 bundle, or None if it is not installed."""
    candidates = [Path(sysconfig.get_paths()["purelib"])]
    try:
        import sphinx_mathjax_offline  # noqa: F401

        candidates.append(Path(sphinx_mathjax_offline.__file__).resolve().parents[1])
    except ImportError:
        pass
    for base in candidates:
        path = base / "sphinx-mathjax-offline" / "static" / "mathjax" / "tex-svg.js"
        if path.is_file():
            return path
    return None


def _copy_mathjax(folder, like=None):
    """Put the MathJax bundle into ``folder`` (once): a hard link to ``like`` (an earlier
    copy) where the file system allows it, else a copy. Returns its path or None."""
    src = mathjax_source()
    if src is None:
        return None
    target = Path(folder) / MATHJAX_FILE
    if target.is_symlink():
        target.unlink()
    if target.exists() and target.stat().st_size == src.stat().st_size:
        return target
    if target.exists():
        target.unlink()
    if like is not None and Path(like).is_file() and not Path(like).is_symlink():
        try:
            os.link(like, target)
            return target
        except OSError:
            pass
    shutil.copyfile(src, target)
    return target


def make_maths_offline(html_path, mathjax_dir=None):
    """Replace the CDN MathJax of one feedback page by a local copy; return True if done.

    The copy lives in ``mathjax_dir`` (default: the page's folder) and the page loads it
    by a relative path.
    """
    html_path = Path(html_path)
    folder = Path(mathjax_dir) if mathjax_dir is not None else html_path.parent
    rel = os.path.relpath(folder / MATHJAX_FILE, html_path.parent).replace(os.sep, "/")
    text = html_path.read_text(encoding="utf-8")
    script = OFFLINE_MATHJAX.replace(f'src="{MATHJAX_FILE}"', f'src="{rel}"')
    new, n = _CDN_BLOCK.subn(lambda m: script, text)
    new, n2 = _ANY_CDN_SCRIPT.subn("", new)
    # a page made offline before: its bundle's path follows the copy's new place
    new = _LOCAL_SCRIPT.sub(lambda m: f'<script src="{rel}"></script>', new)
    _copy_mathjax(folder)
    if new != text:
        html_path.write_text(new, encoding="utf-8")
    return bool(n or n2)


_CHAPTER_LINK = r'href="{prefix}book/([A-Za-z0-9_-]+)\.{suffix}(#[^"]*)?"'


def _chapter_link():
    """A statement's chapter link: ``../../book/<chapter>.md``, or the published page
    ``<default book url>book/<chapter>.html`` that the built notebooks carry."""
    relative = _CHAPTER_LINK.format(prefix=r"(?:\.\./)+", suffix="md")
    url = default_book_url()
    if not url:
        return re.compile(relative)
    published = _CHAPTER_LINK.format(prefix=re.escape(url), suffix="html")
    return re.compile(f"{relative}|{published}")


TABLE_STYLE = """<style id="autograder-tables">
.rendered_html table, .text_cell_render table { border-collapse: collapse; margin: 0.6em 0; }
.rendered_html th, .rendered_html td, .text_cell_render th, .text_cell_render td {
  border: 1px solid #bbb; padding: 0.3em 0.8em; text-align: left; }
.rendered_html th, .text_cell_render th { background: #f0f0f0; }
.rendered_html tr:nth-child(even) td, .text_cell_render tr:nth-child(even) td {
  background: #fafafa; }
</style>"""


_GITHUB_REPO = re.compile(
    r"^\s*url:\s*[\"']?https://github\.com/([A-Za-z0-9_.-]+)/"
    r"([A-Za-z0-9_.-]+?)(?:\.git)?/?[\"']?\s*(?:#.*)?$",
    re.M,
)


def default_book_url(repo=None):
    """The address where ``make publish`` puts the book: GitHub Pages of the repository
    named in ``_config.yml`` (``repository: url: https://github.com/OWNER/NAME`` ->
    ``https://OWNER.github.io/NAME/``), read from ``repo`` (else this repository); None if
    no GitHub repository is named."""
    from . import REPO_ROOT

    for root in [Path(repo)] if repo is not None else []:
        if (root / "_config.yml").is_file():
            break
    else:
        root = REPO_ROOT
    try:
        text = (Path(root) / "_config.yml").read_text(encoding="utf-8")
    except OSError:
        return None
    block = text.split("\nrepository:", 1)
    m = _GITHUB_REPO.search(block[1].split("\n\n", 1)[0]) if len(block) == 2 else None
    if m is None:
        return None
    return f"https://{m.group(1).lower()}.github.io/{m.group(2)}/"


def check_book_url(url):
    """``url`` if it is an http(s) address, else ValueError naming it."""
    from urllib.parse import urlparse

    parts = urlparse(str(url))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"book_url must be an http(s) address such as "
            f"https://owner.github.io/repo/, got {url!r}"
        )
    return str(url)


def link_chapters(html_path, book_root=None, book_url=None):
    """Point the page's chapter links (``../../book/<chapter>.md`` or the default published
    page) at the book:
    ``book_url/book/<chapter>.html`` (the published book), else a relative path to
    ``book_root/book/<chapter>.html`` (a copy of the built book handed out with the
    feedback); with neither, the link is removed and its text kept. Returns the links
    changed."""
    html_path = Path(html_path)
    text = html_path.read_text(encoding="utf-8")

    def target(m):
        chapter, anchor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        page = f"book/{chapter}.html"
        if book_url:
            where = book_url.rstrip("/") + "/" + page
        elif book_root is not None:
            where = os.path.relpath(Path(book_root) / page, html_path.parent).replace(os.sep, "/")
        else:
            return 'data-chapter-link-removed="1"'
        return f'href="{where}{anchor or ""}"'

    new, n = _chapter_link().subn(target, text)
    if 'id="autograder-tables"' not in new and "</head>" in new:
        new = new.replace("</head>", TABLE_STYLE + "\n</head>", 1)
    if new != text:
        html_path.write_text(new, encoding="utf-8")
    return n


def make_feedback_offline(feedback_dir, book_root=None, book_url=None):
    """Post-process every feedback page under ``feedback_dir``
    (``feedback_dir/<student>/<assignment>/<notebook>.html``).

    Each page: its body cleaned and its Content-Security-Policy added first
    (:func:`secure_page`); its maths from ``feedback_dir/<student>/mathjax-tex-svg.js``
    (one copy per student, hard links to one file where possible, so that each student's
    folder is complete on its own; a copy elsewhere, in ``feedback_dir`` or an assignment
    folder, is removed); chapter links to the book (``book_url``, else a copy at
    ``book_root``, see :func:`link_chapters`); styled tables; findings that wrap and a
    summary that names each check (:func:`~autograder.feedback_layout.make_readable`). A page that
    :func:`secure_page` cannot read as nbgrader's page is removed.

    Returns
    -------
    list of Path
        The pages whose maths changed.
    """
    feedback_dir = Path(feedback_dir)
    shared = feedback_dir / MATHJAX_FILE
    if shared.exists() or shared.is_symlink():
        shared.unlink()
    from .feedback_layout import make_readable

    changed, first = [], None
    for page in sorted(feedback_dir.glob("*/*/*.html")):
        stray = page.parent / MATHJAX_FILE
        if stray.exists() or stray.is_symlink():
            stray.unlink()
        try:
            secure_page(page)
        except ValueError:  # not a page nbgrader's template wrote: never handed out as is
            page.unlink()
            continue
        student = page.parent.parent
        first = _copy_mathjax(student, like=first) or first
        if make_maths_offline(page, mathjax_dir=student):
            changed.append(page)
        link_chapters(page, book_root=book_root, book_url=book_url)
        make_readable(page)
    return changed


#: the marker of the submission line :func:`mark_submission` adds
SUBMISSION_ID = "autograder-submission"


def mark_submission(html_path, text):
    """Put ``text`` (when the notebook was submitted, its due date, whether it is late)
    at the top of one feedback page, below its title, once: a later call replaces it.
    Returns True if the page changed."""
    import html as _html

    html_path = Path(html_path)
    page = html_path.read_text(encoding="utf-8")
    line = (
        f'<p id="{SUBMISSION_ID}" style="margin: 0.4em 0; font-weight: bold;">'
        f"{_html.escape(text)}</p>"
    )
    new = re.sub(rf'<p id="{SUBMISSION_ID}"[^>]*>.*?</p>', lambda m: line, page, flags=re.S)
    if new == page and SUBMISSION_ID not in page:
        if "</h4>" in page:
            new = page.replace("</h4>", "</h4>\n" + line, 1)
        else:
            new = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + "\n" + line, page, count=1)
    if new != page:
        html_path.write_text(new, encoding="utf-8")
    return new != page
