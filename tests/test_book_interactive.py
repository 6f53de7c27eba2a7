"""repeval_book.interactive (book plumbing for interactive figures) and the book's Sphinx
extension repeval_book.sphinx_ext (plotly.js from _static, Colab notebooks).

The figures' behaviour in a browser (controls change the plot, nothing is fetched from
outside) is checked by tests/test_book_browser.py on the built book."""

from __future__ import annotations

import ast
import html as htmllib
import itertools
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("plotly")
import plotly.graph_objects as go  # noqa: E402

from repeval_book import interactive  # noqa: E402
from repeval_book.interactive import decision_plane, frame_figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _spec(fig) -> dict:
    """The JSON the figure's script reads, parsed back out of its HTML."""
    m = re.search(
        r'<script type="application/json" id="[^"]+">(.*?)</script>', fig.html, flags=re.S
    )
    assert m, "no data block in the figure's HTML"
    return json.loads(m.group(1))


def _toy_frames(geoms=("a", "b"), protos=("vote", "probe"), ks=(1, 5, 15)):
    frames = {}
    for g, p, k in itertools.product(geoms, protos, ks):
        kk = k if p == "vote" else 0  # k does not matter for the probe
        frames[(g, p, k)] = {
            "data": [{"type": "scatter", "x": [0, 1], "y": [kk, len(g)]}],
            "layout": {"title": {"text": f"{g} {p} {kk}"}},
            "note": f"<b>{g}</b> {p} {kk}",
        }
    return frames, [("geometry", list(geoms)), ("protocol", list(protos)), ("k", list(ks))]


def test_every_setting_maps_to_its_own_frame_and_identical_frames_are_stored_once():
    frames, controls = _toy_frames()
    fig = frame_figure(frames, controls, alt="toy", plotly_js="book")
    spec = _spec(fig)
    # distinct frames: 2 geometries x (3 vote frames + 1 probe frame)
    distinct = {json.dumps(v, sort_keys=True) for v in frames.values()}
    assert fig.n_frames == len(distinct) == len(spec["frames"]) == 8
    assert len(fig.keys) == len(spec["index"]) == 12
    values = [c[1] for c in controls]
    for key, frame in frames.items():
        idx = ",".join(str(values[i].index(v)) for i, v in enumerate(key))
        shown = spec["frames"][spec["index"][idx]]
        assert shown["data"] == frame["data"]
        assert shown["note"] == frame["note"]
        assert shown["layout"]["title"] == frame["layout"]["title"]
    assert spec["values"] == [[str(v) for v in vs] for vs in values]


def test_controls_render_as_buttons_slider_or_select():
    frames, controls = _toy_frames()
    fig = frame_figure(
        frames, controls, alt="toy", plotly_js="book", start={"k": 15, "protocol": "probe"}
    )
    assert fig.html.count('type="radio"') == 4  # geometry (2) + protocol (2)
    assert fig.html.count('type="range"') == 1  # k: numbers get a slider
    assert re.search(r'type="range"[^>]*max="2"[^>]*value="2"', fig.html)
    assert _spec(fig)["start"] == [0, 1, 2]
    sel = frame_figure(frames, [(n, v, "select") for n, v in controls], alt="toy", plotly_js="book")
    assert sel.html.count("<select") == 3 and 'type="radio"' not in sel.html


def test_one_control_takes_bare_keys_and_plotly_figures():
    frames = {g: go.Figure(go.Bar(x=[1, 2], y=[g, 2 * g])) for g in (1, 2, 3)}
    fig = frame_figure(frames, {"gain": [1, 2, 3]}, alt="bars", plotly_js="book")
    spec = _spec(fig)
    assert fig.n_frames == 3
    assert [spec["frames"][spec["index"][str(i)]]["data"][0]["y"] for i in range(3)] == [
        [1, 2],
        [2, 4],
        [3, 6],
    ]


def test_notes_cannot_close_the_data_script_early():
    frames = {"x": {"data": [], "note": "</script><script>alert(1)</script>"}, "y": {"data": []}}
    fig = frame_figure(frames, [("v", ["x", "y"])], alt="t", plotly_js="book")
    assert fig.html.count("</script>") == 2  # the data block and the figure's script
    assert _spec(fig)["frames"][0]["note"] == "</script><script>alert(1)</script>"


def test_plotly_js_is_left_to_the_book_or_embedded(monkeypatch):
    frames, controls = _toy_frames()
    js = interactive.plotly_js_path().read_text(encoding="utf-8")
    book = frame_figure(frames, controls, alt="t", plotly_js="book")
    inline = frame_figure(frames, controls, alt="t", plotly_js="inline")
    assert js[:200] not in book.html and "cdn" not in book.html.lower()
    assert js[:200] in inline.html and len(inline.html) > len(js)
    assert not re.search(r'src="https?://', inline.html + book.html)
    monkeypatch.setenv(interactive.BOOK_ENV, "1")
    assert js[:200] not in frame_figure(frames, controls, alt="t").html
    monkeypatch.delenv(interactive.BOOK_ENV)
    assert js[:200] in frame_figure(frames, controls, alt="t").html


def test_alt_text_and_labels_reach_the_html():
    frames, controls = _toy_frames()
    fig = frame_figure(frames, controls, alt='Points & "regions"', plotly_js="book", fig_id="f1")
    assert 'role="img" aria-label="Points &amp; &quot;regions&quot;"' in fig.html
    assert 'id="f1"' in fig.html and fig._repr_html_() == fig.html
    for name in ("geometry", "protocol", "k"):
        assert htmllib.escape(name) in fig.html


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alt": ""}, "alt"),
        ({"alt": "a", "height": 0}, "height"),
        ({"alt": "a", "plotly_js": "cdn"}, "plotly_js"),
        ({"alt": "a", "start": {"nope": 1}}, "start"),
        ({"alt": "a", "start": {"k": 7}}, "start"),
        ({"alt": "a", "fig_id": "a b"}, "fig_id"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    frames, controls = _toy_frames()
    with pytest.raises(ValueError, match=match):
        frame_figure(frames, controls, plotly_js=kwargs.pop("plotly_js", "book"), **kwargs)


def test_missing_or_extra_frames_and_bad_controls_are_refused():
    frames, controls = _toy_frames()
    del frames[("b", "probe", 5)]
    with pytest.raises(ValueError, match="frames has no frame"):
        frame_figure(frames, controls, alt="t", plotly_js="book")
    frames, controls = _toy_frames()
    frames[("c", "probe", 5)] = {"data": []}
    with pytest.raises(ValueError, match="match no combination"):
        frame_figure(frames, controls, alt="t", plotly_js="book")
    for bad in (
        [],
        [("k", [])],
        [("k", [1, 1])],
        [("k", [1, 2]), ("k", [3, 4])],
        [("k", [1, 2], "dial")],
    ):
        with pytest.raises(ValueError, match="controls"):
            frame_figure({}, bad, alt="t", plotly_js="book")
    with pytest.raises(ValueError, match="frames"):
        frame_figure({1: 3, 2: 4}, [("k", [1, 2])], alt="t", plotly_js="book")


def test_decision_plane_draws_the_regions_and_every_point_once():
    rng = np.random.default_rng(0)
    x, y = np.linspace(-1, 1, 7), np.linspace(-2, 2, 5)
    regions = (x[None, :] > 0).astype(int) + np.zeros((5, 1), dtype=int)
    pts = rng.normal(size=(30, 2))
    labels = (pts[:, 0] > 0).astype(int)
    frame = decision_plane(
        x, y, regions, pts, labels, colours=["#0072B2", "#D55E00"], title="t", note="n"
    )
    heat, *scatters = frame["data"]
    assert heat["type"] == "heatmap" and np.array_equal(np.array(heat["z"]), regions)
    assert heat["zmin"] == -0.5 and heat["zmax"] == 1.5
    assert [len(s["x"]) for s in scatters] == [int((labels == 0).sum()), int((labels == 1).sum())]
    assert len({s["marker"]["symbol"] for s in scatters}) == 2  # shape, not colour alone
    np.testing.assert_allclose(sorted(scatters[1]["x"]), np.round(np.sort(pts[labels == 1, 0]), 3))
    # each class value c in [zmin, zmax] falls in its colour's band of the colour scale
    for c, colour in enumerate(["#0072B2", "#D55E00"]):
        t = (c - heat["zmin"]) / (heat["zmax"] - heat["zmin"])
        band = [col for pos, col in heat["colorscale"] if abs(pos - t) <= 0.5]
        assert colour in band
    frame_figure({1: frame, 2: frame}, [("k", [1, 2])], alt="t", plotly_js="book")


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"regions": np.zeros((7, 5), dtype=int)}, "regions"),
        ({"labels": np.full(30, 2)}, "labels"),
        ({"x": np.linspace(1, -1, 7)}, "x"),
        ({"points": np.zeros((30, 3))}, "points"),
        ({"opacity": 0.0}, "opacity"),
    ],
)
def test_decision_plane_validates(bad, match):
    args = {
        "x": np.linspace(-1, 1, 7),
        "y": np.linspace(-2, 2, 5),
        "regions": np.zeros((5, 7), dtype=int),
        "points": np.zeros((30, 2)),
        "labels": np.zeros(30, dtype=int),
    }
    opacity = bad.pop("opacity", 0.25)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        decision_plane(**args, colours=["#000", "#fff"], opacity=opacity)


# ----------------------------------------------------------------------------- the Sphinx extension
@pytest.fixture(scope="module")
def ext():
    pytest.importorskip("myst_nb")
    from repeval_book import sphinx_ext

    return sphinx_ext


def test_chapter_requirements_follow_the_imports(ext):
    cells = [
        {
            "cell_type": "code",
            "source": (
                "import pandas as pd\nfrom repeval_book.glue import glue_all\n%matplotlib inline"
            ),
        },
        {
            "cell_type": "code",
            "source": ["from repeval_book.interactive import frame_figure\n", "import numpy"],
        },
        {"cell_type": "markdown", "source": "import statsmodels"},
        {"cell_type": "code", "source": "def broken(:"},
    ]
    assert ext.chapter_requirements(cells) == ["myst-nb", "pandas", "plotly"]
    assert ext.chapter_requirements([{"cell_type": "code", "source": "import numpy as np"}]) == []


def test_setup_cell_installs_on_a_fresh_machine_and_does_nothing_where_installed(
    ext, tmp_path, monkeypatch
):
    src = ext.setup_cell_source("https://github.com/repeval/repeval", ["pandas"], "book/protocols")
    ast.parse(src)
    assert '"git", "clone", "--depth", "1", "https://github.com/repeval/repeval"' in src
    assert '"./repeval[zoo,suite]", "pandas"' in src and 'os.chdir("repeval/book")' in src
    assert "apt-get" not in src
    with_data = ext.setup_cell_source(
        "https://github.com/repeval/repeval", [], "book/noise", fashion_mnist=True
    )
    ast.parse(with_data)
    assert '"apt-get", "install", "-y", "dataset-fashion-mnist"' in with_data
    assert ext.uses_fashion_mnist(
        [{"cell_type": "code", "source": "datasets.fashion_mnist_shifted(3)"}]
    )
    assert not ext.uses_fashion_mnist([{"cell_type": "markdown", "source": "Fashion-MNIST"}])
    # here repeval_ref is installed: running the cell must neither clone, install nor move
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    monkeypatch.chdir(tmp_path)
    exec(compile(src, "setup-cell", "exec"), {})
    assert calls == [] and Path.cwd() == tmp_path


def test_config_loads_the_extension_and_publishes_where_colab_looks(ext):
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "repeval_book.sphinx_ext" in cfg["sphinx"]["extra_extensions"]
    branch = cfg["sphinx"]["config"]["repeval_pages_branch"]
    makefile = (ROOT / "Makefile").read_text()
    m = re.search(r"^publish:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert (
        m
        and "ghp-import" in m.group(1)
        and f"-b {branch}" in m.group(1)
        and "_build/html" in m.group(1)
    )
