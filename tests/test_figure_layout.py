"""Every text of every figure lies inside its canvas: the real plotting functions (plot_curves,
plot_table, plot_bars, frontier_plot, plot_claims_summary) on the committed tables under
results/embedded/ and results/rehearsal/full/, each figure drawn and every visible text box (titles,
labels, tick labels, legends, annotations, footnotes) checked against the figure's bounding box
before it is saved. A rehearsal's figure also names the rehearsal in its title and in every legend
entry that names the scale.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
from matplotlib.text import Text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "embedded"
REHEARSAL = ROOT / "results" / "rehearsal" / "full"
TEXTS: dict[str, list[str]] = {}   # figure -> every visible text drawn (the check's)
from analysis import figure_data  # noqa: E402
from analysis import frontier_plot  # noqa: E402
from analysis import plot_bars  # noqa: E402
from analysis import plot_claims_summary  # noqa: E402
from analysis import plot_curves  # noqa: E402
from analysis import plot_table  # noqa: E402


def outside(fig) -> list[str]:
    """The visible, non-empty texts whose drawn box leaves the canvas (1 px tolerance)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    hidden = set()   # tick labels outside their axis's view limits: never drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi - lo):
                    hidden |= {id(tick.label1), id(tick.label2)}
    bad = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or id(t) in hidden:
            continue
        b = t.get_window_extent(renderer)
        if b.x0 < -1 or b.y0 < -1 or b.x1 > W + 1 or b.y1 > H + 1:
            bad.append(f"{t.get_text()[:60]!r} at ({b.x0:.0f}, {b.y0:.0f})-({b.x1:.0f}, {b.y1:.0f}) of {W:.0f}x{H:.0f}")
    return bad


@pytest.fixture
def checked(monkeypatch):
    """Replace the PNG writers by the check: {name: [texts outside]} per figure drawn."""
    found = {}

    def check(fig, out, stamp=None):   # stamp: a rehearsal's, drawn at the centre by save_png
        import matplotlib.pyplot as plt
        found[Path(out).name] = outside(fig)
        TEXTS[Path(out).name] = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        plt.close(fig)
    for module in (figure_data, frontier_plot, plot_claims_summary):
        monkeypatch.setattr(module, "save_png", check)
    return found


def figures():
    return sorted(RESULTS.glob("*/*_runs.json")) + sorted(REHEARSAL.glob("*/*_runs.json"))


@pytest.mark.parametrize("runs", figures(), ids=lambda p: f"{p.parent.parent.parent.name}/{p.parent.name}/"
                                                          f"{p.name[:-len('_runs.json')]}")
def test_every_text_of_a_figure_lies_inside_its_canvas(runs, checked):
    m, stem, d = json.loads(runs.read_text()), runs.name[:-len("_runs.json")], runs.parent
    out = f"{stem}.png"
    if d.name == "frontier":
        frontier_plot.draw(m, pd.read_csv(d / f"{stem}_points.csv"), out)
    elif m["kind"] == "table":
        plot_table.plot(m, pd.read_csv(d / f"{stem}_values.csv"), out)
    elif m["kind"] == "bars":
        plot_bars.plot(m, pd.read_csv(d / f"{stem}.csv"), pd.read_csv(d / f"{stem}_curves.csv"), out)
    else:
        plot_curves.plot(m, pd.read_csv(d / f"{stem}.csv"), pd.read_csv(d / f"{stem}_curves.csv"), out)
    assert checked == {out: []}
    if d.name == "frontier":   # its own page names no scale
        return
    scale = [t for t in TEXTS[out] if f"({m['scale']} scale" in t or t.startswith(f"ours ({m['scale']}")
             or f"the {m['scale']} runs" in t]
    assert scale, TEXTS[out]
    if m.get("stamp"):   # the rehearsal's figures: every mention of the scale says what they are
        assert all(m["stamp"] in t for t in scale), scale
    else:
        assert not any("rehearsal" in t for t in TEXTS[out])


def test_the_claims_summary_lies_inside_its_canvas(checked):
    df = pd.read_csv(RESULTS / "claims.csv")
    plot_claims_summary.draw(df, plot_claims_summary.load_specs(figure_data.REPLICATIONS, dict.fromkeys(df["paper"])),
                             "claims.png", "embedded")
    assert checked == {"claims.png": []}


def test_the_check_finds_a_clipped_label(checked):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlabel("a label far too long for a three-inch canvas, as the frontier's once was " * 2)
    figure_data.save_png(fig, "clipped.png")
    assert any("far too long" in b for b in checked["clipped.png"])
