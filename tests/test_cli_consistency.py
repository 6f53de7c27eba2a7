"""One answer per question from every ``repeval`` command, and the polish of their outputs.

The commands (the loop, ``report``, ``leaderboard``, ``compare``, ``suite``) run on the same inputs
and must print the same accuracies and low-shot figures: one split rule, one default
number of low-shot draws and of bootstrap replicates. Their Markdown tables are parsed
with markdown-it-py, their files follow the umask, their errors name the file and the
row within it, progress bars appear only on a terminal and plot labels stay inside
their axes.
"""

import contextlib
import io
import json
import os
import re
import sys

import numpy as np
import pytest

from repeval_ref import knn_classify
from repeval_ref.cli import LOW_SHOT_DRAWS, PAIRED_BOOTSTRAP, SHOTS, build_parser, main

#: the defaults under test (draws, bootstrap replicates, seed, k) are left alone
QUICK = ["--quiet", "--probe-c", "0.1,1"]


def _features(rng, y, centres, noise):
    return centres[y] + noise * rng.normal(size=(y.size, centres.shape[1]))


def _two_encoders(n, K=4, d=12, seed=0):
    """Labels and two encoders' features of the same images: a clean one and a noisy one."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n // K)
    rng.shuffle(y)
    centres = 2.0 * rng.normal(size=(K, d))
    return y, _features(rng, y, centres, 2.0), _features(rng, y, centres, 3.5)


def _run(argv):
    """Exit status, stdout and stderr of one command."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _json(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def loop_folders(tmp_path_factory):
    """Two encoders as loop folders (DIR/train.npz and DIR/test.npz) of the same images."""
    d = tmp_path_factory.mktemp("folders")
    y, clean, noisy = _two_encoders(320, seed=1)
    n_tr = 240
    for name, X in (("clean", clean), ("noisy", noisy)):
        (d / name).mkdir()
        np.savez(d / name / "train.npz", features=X[:n_tr], labels=y[:n_tr])
        np.savez(d / name / "test.npz", features=X[n_tr:], labels=y[n_tr:])
    return d, y, {"clean": clean, "noisy": noisy}, n_tr


@pytest.fixture(scope="module")
def outputs(loop_folders):
    """report (each encoder), leaderboard and compare on the same loop folders, defaults kept."""
    d = loop_folders[0]
    runs = {}
    for name in ("clean", "noisy"):
        runs[name] = _run(["report", str(d / name), "--out", str(d / f"r_{name}")] + QUICK)
    runs["board"] = _run(
        ["leaderboard", str(d / "clean"), str(d / "noisy"), "--out", str(d / "lb")] + QUICK
    )
    runs["compare"] = _run(
        ["compare", str(d / "clean"), str(d / "noisy"), "--out", str(d / "cmp")] + QUICK
    )
    # the suite reads one folder per encoder holding one entry per task: here one task, "t",
    # whose entry is the same loop folder (a link), with the report's 5-shot as its low-shot column
    for name in ("clean", "noisy"):
        (d / "suite_in" / name).mkdir(parents=True)
        (d / "suite_in" / name / "t").symlink_to(d / name, target_is_directory=True)
    runs["suite"] = _run(
        [
            "suite",
            str(d / "suite_in" / "clean"),
            str(d / "suite_in" / "noisy"),
            "--shots",
            "5",
            "--out",
            str(d / "suite"),
            "--no-cache",
        ]
        + QUICK
    )
    assert all(r[0] == 0 for r in runs.values()), {k: r[2] for k, r in runs.items()}
    return {
        "report": {n: _json(d / f"r_{n}" / "report.json") for n in ("clean", "noisy")},
        "board": _json(d / "lb" / "leaderboard.json"),
        "compare": _json(d / "cmp" / "compare.json"),
        "suite": _json(d / "suite" / "suite.json"),
        "printed": {k: r[1] for k, r in runs.items()},
        "dir": d,
    }


# --------------------------------------------------------------- one answer per question


@pytest.mark.slow
def test_report_leaderboard_and_compare_agree_on_loop_folders(outputs, loop_folders):
    _, y, feats, n_tr = loop_folders
    board = {r["name"]: r for r in outputs["board"]["encoders"]}
    paired = outputs["compare"]["paired"]
    for name, role in (("clean", "A"), ("noisy", "B")):
        rep = outputs["report"][name]
        # the folder's own parts, never re-split, in every command
        assert (rep["inputs"]["n_train"], rep["inputs"]["n_test"]) == (n_tr, y.size - n_tr)
        k20 = next(e for e in rep["knn"]["curve"] if e["k"] == 20)
        # an independent count on the folder's parts
        X = feats[name]
        pred = knn_classify(X[:n_tr], y[:n_tr], X[n_tr:], 20, 0.07, 4)
        assert k20["correct"] == int(np.sum(pred == y[n_tr:]))
        for other in (board[name]["knn"], paired["knn"][role]):
            assert (other["correct"], other["n"], other["wilson95"]) == (
                k20["correct"],
                k20["n"],
                k20["wilson95"],
            )
        probe = rep["linear_probe"]
        for other in (board[name]["probe"], paired["probe"][role]):
            assert (other["correct"], other["n"]) == (probe["correct"], probe["n"])
        # one default number of draws, the same figures
        low_rep = {e["shots"]: e for e in rep["low_shot"]}
        low_board = {e["shots"]: e for e in board[name]["low_shot"]}
        for s in SHOTS:
            assert low_rep[s]["draws"] == low_board[s]["draws"] == LOW_SHOT_DRAWS
            assert (low_rep[s]["mean"], low_rep[s]["std"]) == (
                low_board[s]["mean"],
                low_board[s]["std"],
            )
    split = paired["split"]
    settings = outputs["board"]["settings"]
    sizes = (n_tr, y.size - n_tr)
    assert (split["n_train"], split["n_test"]) == (settings["n_train"], settings["n_test"]) == sizes


def test_the_suite_agrees_with_report_and_leaderboard_on_the_same_folders(outputs, loop_folders):
    _, y, _, n_tr = loop_folders
    suite = outputs["suite"]
    task = suite["per_task"]["t"]
    assert (task["n_train"], task["n_test"]) == (
        n_tr,
        y.size - n_tr,
    )  # the folder's parts, not re-split
    assert task["split"]["rule"] == outputs["board"]["settings"]["split"]["rule"]
    board = {r["name"]: r for r in outputs["board"]["encoders"]}
    for r in task["results"]:
        rep = outputs["report"][r["name"]]
        k20 = next(e for e in rep["knn"]["curve"] if e["k"] == 20)
        assert (r["knn"]["correct"], r["knn"]["n"], r["knn"]["wilson95"]) == (
            k20["correct"],
            k20["n"],
            k20["wilson95"],
        )
        assert (r["probe"]["correct"], r["probe"]["best_C"]) == (
            rep["linear_probe"]["correct"],
            rep["linear_probe"]["best_C"],
        )
        assert r["probe"]["correct"] == board[r["name"]]["probe"]["correct"]
        five = next(e for e in rep["low_shot"] if e["shots"] == 5)
        low = r["fewshot"]
        assert (low["shots"], low["draws"], low["seed"]) == (5, LOW_SHOT_DRAWS, 0)
        assert (low["mean"], low["std"]) == (five["mean"], five["std"])
    # one pair in the task: the leaderboard's pair, the same interval and p
    for proto in ("knn", "probe"):
        (mine,) = task["pairs"][proto]
        (theirs,) = outputs["board"]["pairs"][proto]
        assert mine == theirs


def test_compare_and_leaderboard_give_the_same_pair_verdict(outputs):
    """Two encoders: one pair, so Holm leaves p alone; same split, replicates and seed, same
    interval."""
    board, cmp = outputs["board"], outputs["compare"]
    assert board["settings"]["n_boot"] == PAIRED_BOOTSTRAP
    for proto in ("knn", "probe"):
        (pair,) = board["pairs"][proto]
        mine = cmp["paired"][proto]
        assert (pair["a"], pair["b"]) == ("clean", "noisy") and mine["n_boot"] == PAIRED_BOOTSTRAP
        assert pair["gain_b_minus_a"] == mine["gain_B_minus_A"]
        assert pair["bootstrap95"] == mine["bootstrap95"]
        assert pair["mcnemar_p"] == pair["mcnemar_p_adjusted"] == mine["mcnemar_p"]
    top = board["ranking"][0]
    lo, hi = cmp["paired"]["probe"]["bootstrap95"]
    established = (lo > 0 or hi < 0) and cmp["paired"]["probe"]["mcnemar_p"] < board["settings"][
        "alpha"
    ]
    assert top["separated_from_next"] == established


def test_compare_names_a_and_b_by_path_and_prints_both_split_sizes(outputs, loop_folders):
    d, y, _, n_tr = loop_folders
    out = outputs["printed"]["compare"]
    assert re.search(rf"^A = {re.escape(str(d / 'clean'))} \(320 x 12", out, re.M)
    assert re.search(rf"^B = {re.escape(str(d / 'noisy'))} \(320 x 12", out, re.M)
    assert f"split: {n_tr} training and {y.size - n_tr} test images" in out
    assert "seed 0" in out


def test_every_command_prints_its_seed(outputs):
    for key in ("clean", "board", "compare", "suite"):
        assert re.search(r"\bseed 0\b", outputs["printed"][key]), key


@pytest.mark.slow
def test_one_file_is_split_the_same_way_by_every_command(tmp_path):
    from sklearn.model_selection import train_test_split

    y, clean, noisy = _two_encoders(400, seed=2)
    np.savez(tmp_path / "a.npz", features=clean, labels=y)
    np.savez(tmp_path / "b.npz", features=noisy, labels=y)
    seed = ["--seed", "3"]
    assert (
        _run(
            [
                "report",
                str(tmp_path / "a.npz"),
                "--test-fraction",
                "0.25",
                "--out",
                str(tmp_path / "r"),
            ]
            + QUICK
            + seed
        )[0]
        == 0
    )
    assert (
        _run(
            [
                "leaderboard",
                str(tmp_path / "a.npz"),
                str(tmp_path / "b.npz"),
                "--out",
                str(tmp_path / "lb"),
            ]
            + QUICK
            + seed
        )[0]
        == 0
    )
    assert (
        _run(
            [
                "compare",
                str(tmp_path / "a.npz"),
                str(tmp_path / "b.npz"),
                "--out",
                str(tmp_path / "c"),
            ]
            + QUICK
            + seed
        )[0]
        == 0
    )
    for name in ("a", "b"):  # the suite: one folder per encoder, the task given as one file
        (tmp_path / f"s_{name}").mkdir()
        (tmp_path / f"s_{name}" / "t.npz").symlink_to(tmp_path / f"{name}.npz")
    assert (
        _run(
            [
                "suite",
                str(tmp_path / "s_a"),
                str(tmp_path / "s_b"),
                "--out",
                str(tmp_path / "s"),
                "--no-cache",
                "--protocols",
                "knn,probe",
            ]
            + QUICK
            + seed
        )[0]
        == 0
    )
    rep, board, cmp = (
        _json(tmp_path / p) for p in ("r/report.json", "lb/leaderboard.json", "c/compare.json")
    )
    mine = _json(tmp_path / "s" / "suite.json")["per_task"]["t"]
    s_a = next(r for r in mine["results"] if r["name"] == "s_a")
    tr, te = train_test_split(np.arange(y.size), test_size=0.25, stratify=y, random_state=3)
    tr, te = np.sort(tr), np.sort(te)
    expected = int(np.sum(knn_classify(clean[tr], y[tr], clean[te], 20, 0.07, 4) == y[te]))
    k20 = next(e for e in rep["knn"]["curve"] if e["k"] == 20)
    a = next(r for r in board["encoders"] if r["name"] == "a")
    assert k20["correct"] == a["knn"]["correct"] == cmp["paired"]["knn"]["A"]["correct"] == expected
    assert s_a["knn"]["correct"] == expected and mine["split"] == board["settings"]["split"]
    assert (
        rep["linear_probe"]["correct"]
        == a["probe"]["correct"]
        == cmp["paired"]["probe"]["A"]["correct"]
    )
    assert s_a["probe"]["correct"] == a["probe"]["correct"]
    assert [(e["mean"], e["std"]) for e in rep["low_shot"]] == [
        (e["mean"], e["std"]) for e in a["low_shot"]
    ]
    assert board["settings"]["split"]["n_test"] == cmp["paired"]["split"]["n_test"] == te.size


@pytest.mark.slow
def test_the_loop_prints_the_numbers_of_the_report_on_its_features(tmp_path):
    from repeval_ref.cli.loop import main as loop_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert (
            loop_main(
                [
                    "--pretrain-epochs",
                    "1",
                    "--probe-epochs",
                    "1",
                    "--save-features",
                    str(tmp_path / "saved"),
                ]
            )
            == 0
        )
    printed = out.getvalue()
    assert "the loop's own probe" in printed and "seed 0" in printed
    assert (
        _run(["report", str(tmp_path / "saved"), "--out", str(tmp_path / "r"), "--quiet"])[0] == 0
    )
    rep = _json(tmp_path / "r" / "report.json")
    for e in rep["knn"]["headline"]:
        found = re.search(rf"weighted k-NN \(k={e['k']}, tau=0\.07\)\s+(\d+\.\d+)%", printed)
        assert found and found.group(1) == f"{100 * e['accuracy']:.2f}", e["k"]
    p = rep["linear_probe"]
    found = re.search(r"linear probe \(C=[^)]*\)\s+(\d+\.\d+)%", printed)
    assert found and found.group(1) == f"{100 * p['accuracy']:.2f}"
    for e in rep["low_shot"]:
        found = re.search(
            rf"{e['shots']}-shot\s+(\d+\.\d+)% \+- (\d+\.\d+) \(std over (\d+) draws\)", printed
        )
        assert found, e["shots"]
        assert found.groups() == (
            f"{100 * e['mean']:.2f}",
            f"{100 * e['std']:.2f}",
            str(LOW_SHOT_DRAWS),
        )


def test_the_commands_share_one_default_for_draws_and_replicates():
    parser = build_parser()
    rep = parser.parse_args(["report", "T"])
    board = parser.parse_args(["leaderboard"])
    cmp = parser.parse_args(["compare", "A", "B"])
    suite = parser.parse_args(["suite"])
    assert rep.draws == board.draws == suite.draws == LOW_SHOT_DRAWS
    assert board.boot == cmp.boot == suite.boot == PAIRED_BOOTSTRAP
    assert (
        board.test_fraction == cmp.test_fraction == suite.test_fraction
        and board.k == cmp.k == suite.k
    )
    assert board.probe_c == cmp.probe_c == rep.probe_c == suite.probe_c
    assert (
        board.seed == suite.seed
        and board.correction == suite.correction
        and board.alpha == suite.alpha
    )


def test_a_loop_folder_is_never_re_split(loop_folders, capsys):
    d = loop_folders[0]
    assert (
        main(["report", str(d / "clean"), "--test-fraction", "0.3", "--out", str(d / "x")] + QUICK)
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never re-split" in err[0] and str(d / "clean") in err[0]


# ------------------------------------------------------------------------ Markdown tables


def _md():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def _cells(md, line):
    """How many cells markdown-it reads in one table line.

    markdown-it takes a line as a table's header only when it has as many cells as the
    delimiter row below it, so the count is the delimiter width it accepts.
    """
    widths = [
        n
        for n in range(1, 40)
        if any(t.type == "table_open" for t in md.parse(line + "\n|" + "---|" * n))
    ]
    assert len(widths) == 1, (line, widths)
    return widths[0]


def _check_tables(text):
    """Every table of ``text`` parses, and each of its rows has the header's column count."""
    md = _md()
    lines = text.splitlines()
    tables = [t.map for t in md.parse(text) if t.type == "table_open"]
    delimiters = [i for i, line in enumerate(lines) if re.fullmatch(r"\|(---\|)+", line)]
    assert [start + 1 for start, _ in tables] == delimiters  # no table lost to a broken header
    for start, end in tables:
        n = _cells(md, lines[start])
        assert n == lines[start + 1].count("---")
        for line in lines[start + 2 : end]:
            assert _cells(md, line) == n, line
    return md.render(text)


@pytest.mark.slow
def test_every_markdown_table_the_commands_write_parses(tmp_path, outputs):
    y, clean, noisy = _two_encoders(300, seed=4)
    np.savez(tmp_path / "a.npz", features=clean, labels=y)
    np.savez(tmp_path / "b.npz", features=noisy, labels=y)
    (tmp_path / "list.toml").write_text(
        '[[encoder]]\nname = "pipe | name"\npath = "a.npz"\nmethod = "a|b"\n\n'
        '[[encoder]]\nname = "two\\nlines"\npath = "b.npz"\n'
    )
    assert (
        _run(["leaderboard", str(tmp_path / "list.toml"), "--out", str(tmp_path / "lb")] + QUICK)[0]
        == 0
    )
    html = _check_tables((tmp_path / "lb" / "leaderboard.md").read_text())
    assert "<th>|alpha-ReQ - 1|</th>" in html  # the escaped header reads as the metric's name
    assert (
        "<td>pipe | name</td>" in html and "<td>a|b</td>" in html and "<td>two lines</td>" in html
    )
    _check_tables((outputs["dir"] / "lb" / "leaderboard.md").read_text())
    for name in ("clean", "noisy"):
        html = _check_tables((outputs["dir"] / f"r_{name}" / "report.md").read_text())
        assert "± std over draws" in html
    html = _check_tables((outputs["dir"] / "suite" / "suite.md").read_text())
    assert "<th>encoder</th>" in html and "mean ± std over 10 draws" in html


def test_the_zoo_table_markdown_parses():
    from repeval_ref.zoo.registry import ENCODERS
    from repeval_ref.zoo.table import COLUMNS, floors, render_markdown, resolve_protocol

    cell = {"acc": 0.9, "lo": 0.85, "hi": 0.94}
    recipe = {"lr": 3e-4, "steps": 250}
    rows = [
        {
            "name": name,
            "arch": spec["arch"],
            "objective": spec["objective"],
            "params": 1000,
            "train_seconds": 12.0,
            **{c: cell for c in COLUMNS},
            "ft_recipe": recipe,
            "lpft_recipe": recipe,
            "rankme": 30.0,
        }
        for name, spec in ENCODERS.items()
    ]
    table = {"rows": rows, "seconds": 60.0, "protocol": resolve_protocol()}
    html = _check_tables(render_markdown(table))
    assert (
        html.count("<tr>") == len(rows) + 1 + len(floors(table)) + 1
    )  # the table, then the floors
    assert "<td>lr 3e-04, 250 steps</td>" in html


def test_md_cell_escapes_pipes_backslashes_and_line_breaks():
    from repeval_ref.cli._render import md_table

    cells = ["a|b", "c\\", "line one\nline two", "x\r\ny"]
    text = md_table([cells], ["one", "t|wo", "three", "four"])
    html = _check_tables(text)
    for shown in (
        "<td>a|b</td>",
        "<td>c\\</td>",
        "<td>line one line two</td>",
        "<td>x y</td>",
        "<th>t|wo</th>",
    ):
        assert shown in html, shown


# ------------------------------------------------------------------------------ the umask


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_follow_the_umask(tmp_path, mask, mode):
    from repeval_ref.cli._render import write_files

    old = os.umask(mask)
    try:
        written = write_files(tmp_path / "out", {"a.json": "{}", "b.png": b"\x89PNG"})
    finally:
        os.umask(old)
    assert [p.stat().st_mode & 0o777 for p in written] == [mode, mode]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "a.json",
        "b.png",
    ]  # no temporary left


def test_a_command_writes_under_umask_022_files_others_can_read(tmp_path):
    y, clean, noisy = _two_encoders(120, seed=5)
    np.savez(tmp_path / "a.npz", features=clean, labels=y)
    np.savez(tmp_path / "b.npz", features=noisy, labels=y)
    old = os.umask(0o022)
    try:
        rc = _run(
            [
                "compare",
                str(tmp_path / "a.npz"),
                str(tmp_path / "b.npz"),
                "--out",
                str(tmp_path / "c"),
            ]
            + QUICK
        )[0]
    finally:
        os.umask(old)
    assert rc == 0 and (tmp_path / "c" / "compare.json").stat().st_mode & 0o777 == 0o644


# ------------------------------------------------------------------ errors name the file


def _one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("repeval: error:"), err
    return lines[0]


def test_a_missing_path_is_not_found(tmp_path):
    missing = tmp_path / "nosuch.npz"
    for argv in (
        ["report", str(missing)],
        ["report", str(missing), "--test-fraction", "0.2"],
        ["compare", str(missing), str(missing)],
        ["leaderboard", str(missing), str(missing)],
        ["suite", str(missing), str(missing)],
    ):
        rc, _, err = _run(argv + ["--quiet"])
        assert rc == 2 and f"not found: {missing}" in _one_line(err), argv


def test_an_all_zero_row_of_a_split_file_is_named_by_its_row_in_the_file(tmp_path):
    from sklearn.model_selection import train_test_split

    y, clean, _ = _two_encoders(120, seed=6)
    clean[10] = 0.0
    np.savez(tmp_path / "all.npz", features=clean, labels=y)
    tr, te = (
        np.sort(i)
        for i in train_test_split(np.arange(y.size), test_size=0.25, stratify=y, random_state=0)
    )
    part_index = int(np.flatnonzero(tr == 10)[0]) if 10 in tr else int(np.flatnonzero(te == 10)[0])
    assert part_index != 10  # the two numberings differ here, so the test tells them apart
    rc, _, err = _run(
        [
            "report",
            str(tmp_path / "all.npz"),
            "--test-fraction",
            "0.25",
            "--out",
            str(tmp_path / "o"),
        ]
        + QUICK
    )
    line = _one_line(err)
    assert (
        rc == 2
        and f"TRAIN file {tmp_path / 'all.npz'}: feature row 10 is all zeros (1 of 120 rows)"
        in line
    )
    assert not (tmp_path / "o").exists()


def test_errors_in_a_loop_folder_name_the_part_file(tmp_path):
    y, clean, _ = _two_encoders(80, seed=7)
    (tmp_path / "enc").mkdir()
    test_part = clean[60:].copy()
    test_part[3] = 0.0
    np.savez(tmp_path / "enc" / "train.npz", features=clean[:60], labels=y[:60])
    np.savez(tmp_path / "enc" / "test.npz", features=test_part, labels=y[60:])
    rc, _, err = _run(["report", str(tmp_path / "enc"), "--out", str(tmp_path / "o")] + QUICK)
    assert (
        rc == 2
        and f"TEST file {tmp_path / 'enc' / 'test.npz'}: feature row 3 is all zeros"
        in _one_line(err)
    )
    test_part[3] = np.nan
    np.savez(tmp_path / "enc" / "test.npz", features=test_part, labels=y[60:])
    rc, _, err = _run(["report", str(tmp_path / "enc"), "--out", str(tmp_path / "o")] + QUICK)
    line = _one_line(err)
    assert rc == 2 and f"TEST file {tmp_path / 'enc' / 'test.npz'}: features contain NaN" in line
    assert "(first in row 3)" in line


def test_leaderboard_refuses_an_all_zero_row_naming_the_encoder_file_and_row(tmp_path):
    y, clean, noisy = _two_encoders(120, seed=8)
    noisy[[5, 77]] = 0.0
    np.savez(tmp_path / "a.npz", features=clean, labels=y)
    np.savez(tmp_path / "b.npz", features=noisy, labels=y)
    rc, _, err = _run(
        [
            "leaderboard",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.npz"),
            "--out",
            str(tmp_path / "lb"),
        ]
        + QUICK
    )
    assert (
        rc == 2
        and f"encoder b file {tmp_path / 'b.npz'}: feature rows 5, 77 are all zeros"
        in _one_line(err)
    )
    assert not (tmp_path / "lb").exists()


def test_the_all_zero_row_policy_is_in_every_help(capsys):
    for command in ("report", "compare", "leaderboard", "suite"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "An all-zero feature row is refused" in text and "never re-split" in text, command


# ------------------------------------------------------------------------- progress bars


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bars_only_on_a_terminal(monkeypatch):
    from repeval_ref.cli._progress import Progress

    for stream, bars in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        task = Progress().task("k-NN", 10, unit="queries")
        for _ in range(10):
            task.update(1)
        task.close()
        text = stream.getvalue()
        assert ("\r" in text) == bars
        if not bars:
            assert re.fullmatch(
                r"k-NN: 10 queries \.\.\.\nk-NN: 10/10 queries in \d+\.\d s\n", text
            )


@pytest.mark.slow
def test_report_progress_in_a_log_has_no_carriage_return(tmp_path, monkeypatch):
    y, clean, _ = _two_encoders(120, seed=9)
    np.savez(tmp_path / "all.npz", features=clean, labels=y)
    argv = [
        "report",
        str(tmp_path / "all.npz"),
        "--test-fraction",
        "0.25",
        "--probe-c",
        "1",
        "--draws",
        "2",
    ]
    for stream, bars in ((io.StringIO(), False), (_Terminal(), True)):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stream):
            assert main(argv + ["--out", str(tmp_path / f"o{bars}")]) == 0
        text = stream.getvalue()
        assert ("\r" in text) == bars and "linear probe" in text


def test_the_loop_draws_extraction_bars_only_on_a_terminal(monkeypatch):
    from types import SimpleNamespace

    from repeval_ref.cli._loop_data import bars

    for stream, asked, expected in (
        (_Terminal(), True, True),
        (io.StringIO(), True, False),
        (_Terminal(), False, False),
    ):
        monkeypatch.setattr(sys, "stderr", stream)
        assert bars(SimpleNamespace(progress=asked)) is expected


# ------------------------------------------------------------------ labels inside the axes


@pytest.mark.slow
def test_scatter_labels_stay_inside_their_axes(tmp_path):
    from repeval_ref.cli._leaderboard_render import label_free_figure

    rng = np.random.default_rng(10)
    y = np.repeat(np.arange(4), 60)
    centres = 2.0 * rng.normal(size=(4, 12))
    names = [
        "a_rather_long_encoder_name_at_one_end",
        "middle",
        "another_long_name_at_the_other_end",
    ]
    toml = ""
    for name, noise in zip(names, (1.0, 3.0, 6.0)):
        np.savez(tmp_path / f"{name}.npz", features=_features(rng, y, centres, noise), labels=y)
        toml += f'[[encoder]]\nname = "{name}"\npath = "{name}.npz"\n\n'
    (tmp_path / "list.toml").write_text(toml)
    assert (
        _run(["leaderboard", str(tmp_path / "list.toml"), "--out", str(tmp_path / "lb")] + QUICK)[0]
        == 0
    )
    fig = label_free_figure(_json(tmp_path / "lb" / "leaderboard.json"))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    n_labels = 0
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            ext = text.get_window_extent(renderer)
            assert box.x0 - 0.5 <= ext.x0 and ext.x1 <= box.x1 + 0.5, (text.get_text(), ext, box)
            assert box.y0 - 0.5 <= ext.y0 and ext.y1 <= box.y1 + 0.5, (text.get_text(), ext, box)
            n_labels += 1
    assert n_labels == len(names) * len(fig.axes)  # every point is labelled
