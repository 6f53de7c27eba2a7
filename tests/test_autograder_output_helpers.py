"""The helpers behind safe grading outputs, on their own: CSV cells, the issue log, the
feedback cleaner and note, the zip checks and the no-follow rebuild of a folder."""

import csv
import io
import os
import zipfile

import pytest

from autograder.course.issue_log import MAX_PER_NOTEBOOK, IssueLog
from autograder.csv_safe import dict_writer, safe_cell, writer
from autograder.feedback import clean_html, note_markdown
from autograder.safe_files import Refused, open_zip, rebuild_folder, zip_members


@pytest.mark.parametrize(
    "cell, want",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-", "'-"),
        ("-1+2", "'-1+2"),
        ("-inf", "'-inf"),
        ("-2", "-2"),
        ("-2.5e3", "-2.5e3"),
        ("abc", "abc"),
        (-3, -3),
        (2.5, 2.5),
        (None, ""),
        (float("-inf"), "'-inf"),
    ],
)
def test_safe_cell(cell, want):
    assert safe_cell(cell) == want


def test_writers_make_every_cell_safe():
    out = io.StringIO()
    writer(out).writerow(["=x", -1, "ok"])
    w = dict_writer(out, ["=head", "b"])
    w.writeheader()
    w.writerow({"=head": "@y", "b": "-4"})
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows == [["'=x", "-1", "ok"], ["'=head", "b"], ["'@y", "-4"]]
    with pytest.raises(ValueError, match="fh"):
        writer("not a file")
    with pytest.raises(ValueError, match="fieldnames"):
        dict_writer(out, "ab")


def test_issue_log_keeps_one_line_per_problem_and_counts_past_the_cap(tmp_path):
    log = IssueLog(tmp_path / "issues.csv")
    assert log.record("s", "a", "nb", "=bad") and not log.record("s", "a", "nb", "=bad")
    for i in range(MAX_PER_NOTEBOOK + 5):
        log.record("s", "a", "nb", f"problem {i}")
    rows = log.rows()
    assert len(rows) == MAX_PER_NOTEBOOK + 1
    assert rows[0]["problem"] == "'=bad"
    assert rows[-1]["problem"].startswith("... and 6 more problems")
    # a second log of the same file (another process) repeats nothing
    again = IssueLog(tmp_path / "issues.csv")
    assert not again.record("s", "a", "nb", "=bad")
    assert again.record("t", "a", "nb", "new")
    assert len(again.rows()) == len(rows) + 1
    with pytest.raises(ValueError, match="log"):
        IssueLog(tmp_path / "x.csv", log="print")


def test_clean_html_and_note_keep_text_and_drop_code():
    html = clean_html(
        '<p onclick="x">a</p><script>alert(1)</script><img src=x onerror=y>'
        '<a href="javascript:z">l</a><img src="data:image/png;base64,AAAA">'
        '<a href="data:text/html,x">d</a><h1 id="T">T</h1>'
        '<div id="autograder-submission">z</div><iframe src=x></iframe>'
    )
    for bad in (
        "<script",
        "onclick",
        "onerror",
        "javascript:",
        "data:text",
        "<iframe",
        'id="autograder-submission"',
    ):
        assert bad not in html, bad
    assert "data:image/png;base64,AAAA" in html and '<h1 id="T">' in html
    note = note_markdown("Your file <img src=x onerror=alert(1)>.ipynb\n# [a](b)")
    assert "<" not in note and "\n" not in note and "\\[a\\]" in note
    with pytest.raises(ValueError, match="text"):
        note_markdown(3)
    with pytest.raises(ValueError, match="text"):
        clean_html(None)


def test_open_zip_refuses_many_members_and_zip_members_a_large_sum(tmp_path):
    crowd = tmp_path / "crowd.zip"
    with zipfile.ZipFile(crowd, "w") as zf:
        for i in range(30):
            zf.writestr(f"{i}.ipynb", b"")
    with open(crowd, "rb") as fh, pytest.raises(Refused, match="30 members"):
        open_zip(fh, members=20)
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3):
            zf.writestr(f"{i}.ipynb", bytes(1000))
    with open(big, "rb") as fh, open_zip(fh) as zf:
        with pytest.raises(Refused, match="unpacks to more than 2,500"):
            zip_members(zf, ".ipynb", limit=1000, total=2500)
        got = list(zip_members(zf, ".ipynb", limit=1000, total=3000))
        assert [len(data) for _, data, why in got] == [1000] * 3
    with pytest.raises(ValueError, match="members"):
        open_zip(io.BytesIO(b""), members=-1)


def test_rebuild_folder_follows_no_link(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "nb.ipynb").write_text("honest")
    top = tmp_path / "top"
    (top / "course" / "submitted" / "s").mkdir(parents=True)
    os.symlink(victim, top / "course" / "submitted" / "s" / "a")
    rebuild_folder(top, "course/submitted/s/a", {"nb.ipynb": b"blank"})
    assert (victim / "nb.ipynb").read_text() == "honest"
    assert (top / "course" / "submitted" / "s" / "a" / "nb.ipynb").read_bytes() == b"blank"
    os.rename(top / "course" / "submitted", top / "course" / "moved")
    os.symlink(victim, top / "course" / "submitted")
    rebuild_folder(top, "course/submitted/s/a", {"nb.ipynb": b"again"})
    assert os.listdir(victim) == ["nb.ipynb"]
    assert not (top / "course" / "submitted").is_symlink()
    for bad in ("../x", "/abs", ""):
        with pytest.raises(ValueError, match="path"):
            rebuild_folder(top, bad, {})
    with pytest.raises(ValueError, match="files"):
        rebuild_folder(top, "x", {"sub/f": b""})
