"""`--plot FILE.png`: acceptance over time and the latest per-position profile, for a report.

matplotlib comes through the plotting seam (`dflashctl.plots`: optional, lazy, an atomic PNG
writer). No printing.
"""

from __future__ import annotations

from pathlib import Path

from dflashctl.metrics.window import MetricsReport
from dflashctl.plots import pyplot, save_png


def write_plot(report: MetricsReport, path: Path, *, collapse_length: float = 1.30) -> Path:
    plt = pyplot()
    st = report.state
    ws = st.current_windows() or st.windows
    latest = st.latest
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    try:
        xs = list(range(1, len(ws) + 1))
        means = [w.mean_acceptance_length for w in ws]
        if any(m is not None for m in means):
            ax1.plot(xs, [m if m is not None else float("nan") for m in means], marker=".")
            ax1.set_ylabel("mean acceptance length (τ, incl. bonus)")
            ax1.axhline(collapse_length, color="red", linestyle="--", linewidth=1, label="collapse")
            ax1.legend(loc="best")
        else:
            rates = [w.draft_acceptance_rate for w in ws]
            ax1.plot(xs, [r * 100 if r is not None else float("nan") for r in rates], marker=".")
            ax1.set_ylabel("draft acceptance (%)")
        ax1.set_xlabel("window")
        ax1.set_title(f"{st.source} · {st.engine or '?'} · {len(ws)} windows", fontsize=9)
        ax1.grid(alpha=0.3)
        if latest is not None and latest.per_position:
            pos = list(range(1, len(latest.per_position) + 1))
            ax2.bar(pos, latest.per_position, color="tab:green")
            ax2.set_ylim(0, 1)
            ax2.set_xlabel("draft position")
            ax2.set_ylabel("acceptance rate")
            ax2.set_title(f"per position, {latest.timestamp_raw or 'latest window'}", fontsize=9)
        else:
            ax2.text(0.5, 0.5, "no per-position data", ha="center", va="center")
            ax2.set_axis_off()
        kinds = ", ".join(sorted({f.kind for f in report.alarms}))
        verdict = "OK" if report.ok else f"ALARM: {kinds}"
        fig.suptitle(f"dflashctl metrics — {verdict}", color="black" if report.ok else "red")
        fig.tight_layout()
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path
