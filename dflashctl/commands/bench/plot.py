"""`--plot FILE.png`: median decode tokens/s per fixture and target, and the concurrency sweep.

matplotlib is optional (`pip install 'dflashctl[plot]'`) and imported only here, lazily; the CLI
calls `check_plot` before measuring, so a missing matplotlib or directory costs no benchmark. The
PNG is written to a temporary file beside the target and renamed, so no half-written picture is
left behind. No printing.
"""

from __future__ import annotations

from pathlib import Path

from dflashctl.commands.bench.session import BenchReport
from dflashctl.errors import UsageError
from dflashctl.files import check_target
from dflashctl.plots import pyplot, save_png


def check_plot(path: Path) -> None:
    """Fail before measuring: matplotlib present, a .png name, an existing directory."""
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot {path}: the file name must end in .png", "e.g. --plot bench.png")
    check_target(path)
    pyplot()


def write_plot(report: BenchReport, path: Path) -> Path:
    plt = pyplot()
    sweep = bool(report.sweep)
    fig, axes = plt.subplots(1, 2 if sweep else 1, figsize=(13 if sweep else 8, 4.8))
    ax1 = axes[0] if sweep else axes
    try:
        fixtures = report.fixtures
        n = len(report.targets)
        width = 0.8 / max(n, 1)
        for i, tr in enumerate(report.targets):
            xs = [j + (i - (n - 1) / 2) * width for j in range(len(fixtures))]
            cells = [tr.cells[f] for f in fixtures]
            ys = [c.decode_tokens_per_s or 0.0 for c in cells]
            # the spread over the repetitions: min–max around the median
            lo = [y - (c.decode_range or (y, y))[0] for y, c in zip(ys, cells, strict=True)]
            hi = [(c.decode_range or (y, y))[1] - y for y, c in zip(ys, cells, strict=True)]
            bars = ax1.bar(xs, ys, width, label=tr.label, yerr=[lo, hi], capsize=3)
            for bar, c in zip(bars, cells, strict=True):
                _, w, _ = c.acceptance()
                out_of_it = c.left_out or any(t.cells[c.fixture].left_out for t in report.targets)
                if out_of_it:  # the text leaves it out of the speedup: so does the picture
                    bar.set_alpha(0.25)
                    bar.set_hatch("//")
                    ax1.annotate(
                        "left out:\ntoo short",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
                    continue
                parts = []
                if w is not None and w.mean_acceptance_length is not None:
                    parts.append(f"τ{w.mean_acceptance_length:.2f}")
                if i > 0 and c.speedup is not None:
                    parts.append(f"{c.speedup:.2f}×")
                if parts:
                    ax1.annotate(
                        "\n".join(parts),
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
        ax1.set_xticks(range(len(fixtures)), fixtures)
        ax1.set_ylabel("median decode tokens/s (bars: min–max)")
        o = report.options
        ax1.set_title(
            f"batch 1, greedy, median of {o.repetitions}, {o.max_tokens} tokens", fontsize=9
        )
        ax1.legend(loc="best", fontsize=8)
        ax1.grid(axis="y", alpha=0.3)
        if sweep:
            ax2 = axes[1]
            for tr in report.targets:
                lvs = [lv for lv in report.sweep if lv.target == tr.label]
                ax2.plot(
                    [lv.concurrency for lv in lvs],
                    [lv.throughput or float("nan") for lv in lvs],
                    marker="o",
                    label=tr.label,
                )
            levels = sorted({lv.concurrency for lv in report.sweep})
            ax2.set_xscale("log", base=2)
            ax2.set_xticks(levels, [str(n) for n in levels])
            ax2.set_ylim(bottom=0)
            ax2.set_xlabel("concurrent clients")
            ax2.set_ylabel("throughput (tokens/s)")
            ax2.set_title("concurrency sweep", fontsize=9)
            ax2.grid(alpha=0.3)
            ax2.legend(loc="best", fontsize=8)
        fig.suptitle(f"dflashctl bench — speedup vs {report.baseline}")
        fig.tight_layout()
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path
