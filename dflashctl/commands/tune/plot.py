"""`tune --plot FILE`: decode speed against K per prompt kind (with each K's min–max over the
repetitions, speculation off drawn as the dashed level it has to beat), and, with concurrency
levels, output tokens/s against K per level. matplotlib, headless. No printing."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from dflashctl.errors import UsageError

if TYPE_CHECKING:  # run imports this module: the report's type only
    from dflashctl.commands.tune.run import TuneReport

PLOT_FORMATS = ("png", "svg", "pdf")


def plot_format(path: Path) -> str:
    """The image format `path` asks for (its suffix); a UsageError for any other."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise UsageError(f"--plot {path}: name a .png, .svg or .pdf file")
    return suffix


def write_plot(report: TuneReport, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UsageError(
            "--plot needs matplotlib", "pip install 'dflashctl[plot]' (./bin/dflashctl has it)"
        ) from e
    from dflashctl.files import write_atomic

    spec = [r for r in report.results if r.k and not r.errors]
    off = next((r for r in report.results if r.k == 0), None)
    levels = sorted({c for r in report.results for c in r.by_level})
    panels = 2 if levels else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.2), squeeze=False)
    ax = axes[0][0]
    for i, f in enumerate(report.fixtures()):
        colour = f"C{i}"
        points = [(r.k, v, r.spread.get(f) or [v, v]) for r in spec if (v := r.decode.get(f))]
        ks = [k for k, _, _ in points]
        vs = [v for _, v, _ in points]
        lo = [v - rng[0] for _, v, rng in points]
        hi = [rng[1] - v for _, v, rng in points]
        ax.errorbar(ks, vs, yerr=[lo, hi], marker="o", capsize=3, color=colour, label=f)
        base = off.decode.get(f) if off else None
        if base:
            ax.axhline(base, color=colour, ls="--", lw=1, alpha=0.7)
        best = report.best(f)
        if best and best[0]:
            ax.plot([best[0]], [best[1]], marker="*", ms=14, color=colour)
    ax.set_xlabel("K (num_speculative_tokens); dashed: speculation off")
    ax.set_ylabel("decode tokens/s (median, min–max)")
    ax.set_xticks(sorted({r.k for r in spec}) or [1])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Decode speed by K and prompt kind (★ best)", fontsize=10)
    if levels:
        ax2 = axes[0][1]
        ks = [r.k for r in report.results]
        for j, c in enumerate(levels):
            ys = [r.by_level.get(c) for r in report.results]
            pts = [(k, y) for k, y in zip(ks, ys, strict=True) if y]
            ax2.plot([k for k, _ in pts], [y for _, y in pts], marker="o", color=f"C{j}",
                     label=f"concurrency {c}")  # fmt: skip
        ax2.set_xlabel("K (0: speculation off)")
        ax2.set_ylabel("output tokens/s, all requests")
        ax2.set_ylim(bottom=0)
        ax2.legend(fontsize=8)
        ax2.set_title("Throughput by K and load", fontsize=10)
    if report.skipped:
        fig.text(0.01, 0.01, f"not measured (stopped early): K = "
                 f"{', '.join(map(str, report.skipped))}", fontsize=7)  # fmt: skip
    fig.tight_layout()
    suffix = plot_format(path)

    def save(fh: IO[bytes]) -> None:
        fig.savefig(fh, format=suffix, dpi=110)

    write_atomic(path, save)
    plt.close(fig)
