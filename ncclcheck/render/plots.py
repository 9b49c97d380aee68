"""Bench plots for the HTML report: busbw and time against message size, one figure per op (matplotlib, optional).

matplotlib is the optional `html` extra. Without it `plots_available()` is False and the HTML report shows a note
instead of the figures. Figures are SVG text (deterministic: no date, fixed hash salt) so the report embeds them as
data: URIs and never reaches the network.
"""

from __future__ import annotations

import io
from typing import Optional

from ..model import BenchRow
from ..units import format_size_short, format_us
from .common import placement_label


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _series(rows: list[BenchRow]) -> dict[str, list[BenchRow]]:
    """Rows of one op split into lines by dtype and placement, each sorted by size."""
    out: dict[str, list[BenchRow]] = {}
    for r in rows:
        out.setdefault(f"{r.dtype} {placement_label(r)}", []).append(r)
    return {k: sorted(v, key=lambda r: r.bytes) for k, v in out.items()}


def plot_bound(rows: list[BenchRow]) -> Optional[float]:
    """The bound the busbw panel draws as a dashed line: the first numeric bound of the op's rows, None: none drawn."""
    bounds = [r.extra.get("bound_gbps") for r in rows]
    return next((b for b in bounds if isinstance(b, (int, float)) and not isinstance(b, bool)), None)


def plot_marks(rows: list[BenchRow]) -> dict:
    """What a plot of these rows draws beside the lines, so that its caption explains only what is there:
    {"wrong": red circles, "bound": the dashed line}."""
    return {"wrong": any(r.wrong for r in rows if r.bytes > 0), "bound": plot_bound(rows) is not None}


def bench_plot_svg(op: str, rows: list[BenchRow]) -> Optional[str]:
    """One SVG with two panels (busbw, time) against size on a log2 axis; None when matplotlib is missing.

    Rows with wrong elements are circled in red: the report marked them wrong, the plot only shows where.
    """
    if not plots_available() or not rows:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    with matplotlib.rc_context({"svg.hashsalt": "ncclcheck", "svg.fonttype": "none", "font.size": 9}):
        fig = Figure(figsize=(9.0, 3.4), layout="constrained")
        ax_bw, ax_t = fig.subplots(1, 2)
        sizes = sorted({r.bytes for r in rows if r.bytes > 0})
        for label, series in _series(rows).items():
            xs = [r.bytes for r in series if r.bytes > 0]
            keep = [r for r in series if r.bytes > 0]
            ax_bw.plot(xs, [r.busbw_gbps for r in keep], marker="o", ms=3.5, label=label)
            ax_t.plot(xs, [r.time_us for r in keep], marker="o", ms=3.5, label=label)
            bad = [r for r in keep if r.wrong]
            if bad:
                for ax, ys in ((ax_bw, [r.busbw_gbps for r in bad]), (ax_t, [r.time_us for r in bad])):
                    ax.scatter([r.bytes for r in bad], ys, s=90, facecolors="none", edgecolors="#c62828",
                               linewidths=1.6, zorder=5, label="wrong results" if ax is ax_bw else None)
        for ax, title, ylabel in ((ax_bw, f"{op}: bus bandwidth", "busbw (GB/s)"),
                                  (ax_t, f"{op}: time per op", "time (slowest rank)")):
            ax.set_xscale("log", base=2)
            if sizes:
                ax.xaxis.set_major_locator(FixedLocator(sizes))
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_size_short(int(v))))
                ax.xaxis.set_minor_locator(FixedLocator([]))
            ax.set_title(title)
            ax.set_xlabel("message size")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="major", alpha=0.3)
            ax.tick_params(axis="x", labelrotation=45)
        ax_t.set_yscale("log")
        ax_t.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax_t.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_us(v)))
        ax_t.yaxis.set_minor_formatter(NullFormatter())
        bound = plot_bound(rows)
        if bound is not None:
            by = next((str(r.extra["bound_by"]) for r in rows if r.extra.get("bound_by")), "")
            ax_bw.axhline(bound, color="#555555", linestyle="--", linewidth=1.2,
                          label=f"bound {bound:.3g} GB/s" + (f" ({by[:48]})" if by else ""))
        ax_bw.set_ylim(bottom=0)
        ax_bw.legend(loc="lower right", fontsize=8)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()
