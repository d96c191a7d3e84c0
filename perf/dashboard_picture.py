"""The dashboard's picture in docs/monitoring.md, drawn from a real run (issue 29).

Two bundled engines serve the demo pair on 127.0.0.1 — one healthy, one with the field story's
stale drafter (the mask id off by six) — Debian's Prometheus scrapes both every second with
`dflashctl alerts`' rules (`--for 10s`) and Alertmanager behind it. Healthy traffic runs
throughout; the stale server's starts after --healthy seconds. Then every panel query of
`dflashctl dashboard` (variables at All) is read back over the run with query_range and drawn
with matplotlib in the dashboard's layout: the same queries Grafana would send.

    python3 perf/dashboard_picture.py                       # docs/images/dashboard.png
    python3 perf/dashboard_picture.py --healthy 30 --stale 60 --out /tmp/d.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def query_range(prom: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    import httpx

    q = expr.replace("$job", ".*").replace("$instance", ".*")
    r = httpx.get(
        f"{prom}/api/v1/query_range",
        params={"query": q, "start": start, "end": end, "step": 1},
        timeout=30,
    )
    body = r.json()
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def legend(fmt: str, labels: dict[str, str], names: dict[str, str]) -> str:
    """Grafana's legend format filled in; the demo target's path as its name, each instance
    as the server it is (healthy, stale)."""
    shown = dict(labels)
    if "/" in shown.get("model_name", ""):
        shown["model_name"] = "demo"
    if shown.get("instance") in names:
        shown["instance"] = names[shown["instance"]]
    for k, v in shown.items():
        fmt = fmt.replace("{{" + k + "}}", v)
    return fmt


def draw(
    data: dict[str, Any],
    series: dict[int, list[tuple[str, Any]]],
    t0: float,
    out: Path,
    stale_from: float,
    fired_at: float | None,
    series_end: float,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in data["panels"] if p["type"] != "row"]
    fig = plt.figure(figsize=(14, 10.5), facecolor="#111217")
    plt.rcParams.update(
        {
            "text.color": "#ccccdc",
            "axes.labelcolor": "#ccccdc",
            "xtick.color": "#9fa7b3",
            "ytick.color": "#9fa7b3",
        }
    )
    grid = fig.add_gridspec(
        3, 24, hspace=0.45, wspace=0.6, left=0.04, right=0.98, top=0.93, bottom=0.05
    )
    fig.suptitle(
        f"{data['title']} — dflashctl dashboard, from a real run (demo pair, CPU)",
        color="#ccccdc",
        fontsize=13,
    )
    rows = [(0, 0, 16), (0, 16, 24), (1, 0, 12), (1, 12, 24), (2, 0, 12), (2, 12, 24)]
    for i, (p, (r, c0, c1)) in enumerate(zip(panels, rows, strict=True)):
        ax = fig.add_subplot(grid[r, c0:c1], facecolor="#181b1f")
        ax.set_title(p["title"], loc="left", fontsize=10, color="#ccccdc")
        for s in ax.spines.values():
            s.set_color("#2c3235")
        got = series.get(i, [])
        if p["type"] == "stat":
            ax.set_axis_off()
            last = [(name, float(s["values"][-1][1])) for name, s in got if s["values"]]
            for j, (name, v) in enumerate(last):
                colour = "#f2495c" if v <= 1.3 else "#73bf69"
                ax.text(
                    0.5,
                    0.72 - j * 0.45,
                    f"{v:.2f}",
                    ha="center",
                    fontsize=30,
                    color=colour,
                    transform=ax.transAxes,
                )
                ax.text(
                    0.5,
                    0.58 - j * 0.45,
                    name,
                    ha="center",
                    fontsize=7,
                    color="#9fa7b3",
                    transform=ax.transAxes,
                )
            continue
        if p["type"] == "state-timeline":
            for j, (name, s) in enumerate(got):
                ts = [float(t) - t0 for t, _ in s["values"]]
                ax.broken_barh([(x, 1.01) for x in ts], (j, 0.6), color="#f2495c")
                ax.text(min(ts), j + 0.7, name, fontsize=7, color="#ccccdc")
            ax.set_yticks([])
            ax.set_ylim(-0.3, max(len(got), 1) + 0.2)
            ax.set_xlim(0, float(series_end) - t0)
        else:
            hits = any(n.startswith("hit rate") for n, _ in got)
            # τ on a right-hand axis beside the hit rate, as the dashboard draws it
            twin = ax.twinx() if p["title"].startswith("Prefix") and hits else None
            for name, s in got:
                ts = [float(t) - t0 for t, _ in s["values"]]
                vs = [float(v) for _, v in s["values"]]
                target = twin if twin is not None and name.startswith("τ") else ax
                style = "--" if "expected" in name else "-"
                target.plot(ts, vs, style, lw=1.4, label=name)
            if p["title"].startswith("Mean"):
                ax.axhline(1.3, color="#f2495c", ls="--", lw=1)
                ax.set_ylim(bottom=0.9)
            if twin is not None:
                twin.set_ylabel("τ", fontsize=8)
                twin.tick_params(labelsize=7, colors="#9fa7b3")
                lines = ax.get_lines() + twin.get_lines()
                ax.legend(
                    lines,
                    [ln.get_label() for ln in lines],
                    fontsize=6,
                    loc="upper left",
                    facecolor="#181b1f",
                    edgecolor="#2c3235",
                    labelcolor="#ccccdc",
                )
            elif got:
                ax.legend(
                    fontsize=6,
                    loc="best",
                    facecolor="#181b1f",
                    edgecolor="#2c3235",
                    labelcolor="#ccccdc",
                )
            if p["title"].startswith("Prefix") and not hits:
                ax.text(
                    0.5,
                    0.9,
                    "no hit-rate series: the bundled engine has no prefix cache",
                    ha="center",
                    color="#9fa7b3",
                    fontsize=8,
                    transform=ax.transAxes,
                )
            if p["title"].startswith("Drafted"):
                ax.text(
                    0.02,
                    0.9,
                    "rate() over 5 minutes: it ramps up for the run's first 5",
                    color="#9fa7b3",
                    fontsize=7,
                    transform=ax.transAxes,
                )
        ax.axvline(stale_from, color="#ff9830", lw=0.8, ls=":")
        if fired_at is not None:
            ax.axvline(fired_at, color="#f2495c", lw=0.8, ls=":")
        ax.tick_params(labelsize=7)
        ax.grid(color="#2c3235", lw=0.5)
        ax.set_xlabel(
            "seconds into the run (orange: stale traffic starts; red: alert fires)", fontsize=7
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80, facecolor=fig.get_facecolor())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--healthy", type=float, default=40, help="seconds of healthy traffic only")
    ap.add_argument("--stale", type=float, default=70, help="seconds with the stale server too")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "dashboard.png")
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="dflashctl-dash-")
    os.environ["DFLASHCTL_HOME"] = str(Path(home) / ".dflashctl")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from support.pairs import demo_pair
    from support.prometheus import Stack
    from support.served_engine import chat_traffic, served

    from dflashctl.commands.alerts.run import AlertOptions, write_alerts
    from dflashctl.drafter.stale import write_stale_copy
    from dflashctl.monitoring.dashboard import DashboardOptions, dashboard, panel_queries

    rules = Path(home) / "rules.yml"
    write_alerts(AlertOptions(out=rules, interval="10s"))
    data = dashboard(DashboardOptions())
    target, drafter = demo_pair()
    stale = Path(home) / "stale-drafter"
    write_stale_copy(drafter, stale, ("mask",))
    prompts = [
        p["prompt"]
        for p in json.loads((REPO / "dflashctl/assets/demo/eval_prompts.json").read_text())
    ]
    with (
        served(target, drafter, "healthy") as (ok_url, _),
        served(target, stale, "stale") as (
            bad_url,
            _,
        ),
    ):
        hosts = [u.removeprefix("http://") for u in (ok_url, bad_url)]
        stack = Stack.start(Path(home) / "stack", {"vllm": hosts}, rules)
        stops = [threading.Event(), threading.Event()]
        done: list[list[float]] = [[], []]
        try:
            t0 = time.time()
            threads = [
                threading.Thread(
                    target=chat_traffic,
                    args=(ok_url, stops[0], prompts),
                    kwargs={"max_tokens": 32, "answered": done[0]},
                    daemon=True,
                )
            ]
            threads[0].start()
            time.sleep(args.healthy)
            stale_from = time.time() - t0
            threads.append(
                threading.Thread(
                    target=chat_traffic,
                    args=(bad_url, stops[1], prompts[3:]),
                    kwargs={"max_tokens": 32, "answered": done[1]},
                    daemon=True,
                )
            )
            threads[1].start()
            fired_at = None
            end = time.time() + args.stale
            while time.time() < end:
                if fired_at is None and stack.webhook.firing("DFlashAcceptanceCollapse"):
                    fired_at = time.time() - t0
                time.sleep(0.5)
            for s in stops:
                s.set()
            for t in threads:
                t.join()
            t1 = time.time()
            series: dict[int, list[tuple[str, Any]]] = {}
            panels = [p for p in data["panels"] if p["type"] != "row"]
            for i, p in enumerate(panels):
                for title, expr, fmt in panel_queries({"panels": [p]}):
                    assert title == p["title"]
                    for s in query_range(stack.prom_url, expr, t0, t1):
                        name = legend(
                            fmt, s["metric"], dict(zip(hosts, ("healthy", "stale"), strict=True))
                        )
                        if "position" in s["metric"] and int(s["metric"]["position"]) > 3:
                            continue  # the picture shows the first four positions of K = 15
                        series.setdefault(i, []).append((name, s))
            draw(data, series, t0, args.out, stale_from, fired_at, t1)
            print(
                json.dumps(
                    {
                        "out": str(args.out),
                        "requests": [len(d) for d in done],
                        "stale_from_s": round(stale_from, 1),
                        "collapse_alert_at_s": fired_at and round(fired_at, 1),
                        "panels_with_data": sorted(panels[i]["title"] for i in series),
                    },
                    ensure_ascii=False,
                    indent=1,
                )
            )
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
