"""`--plot FILE.png`: acceptance over time and the latest per-position profile, for a report.

`plot_spec` decides what is drawn (pure data, tested): the mean acceptance length τ with the
τ collapse line, and the draft acceptance rate on its own axis with *its* collapse line, so an
alarm that fired on draft acceptance (τ 1.57 with K = 15 is 3.8 %) is drawn against the series
that fired it, never as a τ line under a τ curve it does not touch. The title says which
criterion fired. `write_plot` draws the spec; matplotlib comes through the plotting seam
(`dflashctl.plots`: optional, lazy, an atomic PNG writer). No printing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dflashctl.metrics.thresholds import Thresholds
from dflashctl.metrics.window import MetricsReport
from dflashctl.plots import pyplot, save_png


def _nan(x: float | None) -> float:
    return float("nan") if x is None else x


def plot_spec(report: MetricsReport, th: Thresholds | None = None) -> dict[str, Any]:
    """What the chart shows: windows 1..n (integers), the series per axis, the threshold lines
    with their labels, and a title naming the alarm and why it fired."""
    th = th or Thresholds()
    st = report.state
    ws = st.current_windows() or st.windows
    xs = list(range(1, len(ws) + 1))
    series: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    means = [w.mean_acceptance_length for w in ws]
    rates = [w.draft_acceptance_rate for w in ws]
    if any(m is not None for m in means):
        series.append(
            {"axis": "tau", "label": "mean acceptance length τ", "values": [_nan(m) for m in means]}
        )
        lines.append(
            {
                "axis": "tau",
                "y": th.collapse_length,
                "label": f"collapse: τ ≤ {th.collapse_length:.2f}",
            }
        )
    if any(r is not None for r in rates):
        series.append(
            {
                "axis": "rate",
                "label": "draft acceptance (%)",
                "values": [_nan(r * 100 if r is not None else None) for r in rates],
            }
        )
        if all(m is None for m in means):  # the rate judges only where no τ is printed
            lines.append(
                {
                    "axis": "rate",
                    "y": th.collapse_rate * 100,
                    "label": f"collapse: draft acceptance < {th.collapse_rate * 100:.0f} %",
                }
            )
    alarms = report.alarms
    if report.ok:
        title, why = "OK", ""
    else:
        title = "ALARM: " + ", ".join(sorted({f.kind for f in alarms}))
        first = alarms[0].message.split(". ")[0]
        why = first if len(first) <= 110 else first[:107] + "..."
    return {
        "xs": xs,
        "xticks": _integer_ticks(len(xs)),
        "series": series,
        "lines": lines,
        "title": title,
        "why": why,
        "subtitle": f"{st.source} · {st.engine or '?'} · {len(ws)} windows",
    }


def _integer_ticks(n: int, most: int = 10) -> list[int]:
    """Window numbers to label: whole numbers only, at most `most` of them."""
    if n <= 0:
        return []
    step = max(1, math.ceil(n / most))
    return list(range(1, n + 1, step))


def write_plot(report: MetricsReport, path: Path, th: Thresholds | None = None) -> Path:
    spec = plot_spec(report, th)
    plt = pyplot()
    st = report.state
    latest = st.latest
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    try:
        axes = {"tau": ax1}
        if any(s["axis"] == "rate" for s in spec["series"]):
            axes["rate"] = ax1.twinx() if any(s["axis"] == "tau" for s in spec["series"]) else ax1
        colours = {"tau": "tab:blue", "rate": "tab:orange"}
        handles = []
        for s in spec["series"]:
            ax = axes[s["axis"]]
            (h,) = ax.plot(spec["xs"], s["values"], marker=".", color=colours[s["axis"]])
            h.set_label(s["label"])
            handles.append(h)
            ax.set_ylabel(s["label"], color=colours[s["axis"]])
        for line in spec["lines"]:
            style = "--" if line["axis"] == "tau" else ":"
            h = axes[line["axis"]].axhline(
                line["y"], color="red", linestyle=style, linewidth=1, label=line["label"]
            )
            handles.append(h)
        for s in spec["series"]:  # each axis from its floor, its line and its data in view
            finite = [v for v in s["values"] if v == v]
            ceiling = [x["y"] for x in spec["lines"] if x["axis"] == s["axis"]]
            top = max(finite + ceiling, default=1.0)
            if s["axis"] == "tau":
                axes["tau"].set_ylim(1.0, max(2.0, top * 1.15))
            else:
                axes["rate"].set_ylim(0.0, min(100.0, max(10.0, top * 1.25)))
        if handles:
            ax1.legend(handles=handles, loc="upper left", fontsize=8)
        ax1.set_xticks(spec["xticks"])
        ax1.set_xlabel("window")
        ax1.set_title(spec["subtitle"], fontsize=9)
        ax1.grid(alpha=0.3)
        if latest is not None and latest.per_position:
            pos = list(range(1, len(latest.per_position) + 1))
            ax2.bar(pos, latest.per_position, color="tab:green")
            ax2.set_ylim(0, 1)
            ax2.set_xticks(_integer_ticks(len(pos), 16))
            ax2.set_xlabel("draft position")
            ax2.set_ylabel("acceptance rate")
            ax2.set_title(f"per position, {latest.timestamp_raw or 'latest window'}", fontsize=9)
        else:
            ax2.text(0.5, 0.5, "no per-position data", ha="center", va="center")
            ax2.set_axis_off()
        head = f"dflashctl metrics — {spec['title']}"
        if spec["why"]:
            head += f"\n{spec['why']}"
        fig.suptitle(head, color="black" if report.ok else "red", fontsize=10)
        fig.tight_layout()
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path
