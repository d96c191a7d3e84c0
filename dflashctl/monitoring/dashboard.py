"""A Grafana dashboard for speculative decoding, on the recording rules `alerts` writes.

Built with Grafana's own model (grafana-foundation-sdk: typed builders, the JSON Grafana
imports). Every panel reads the `dflashctl:*` recording rules (monitoring/rules.py), so one
dashboard shows vLLM, SGLang and the exporter's engines alike; the rules must be loaded.

    τ and its bands       mean acceptance length per series, the collapse line (1.3) and each
                          `--drafter` entry's expected range as a dashed band
    τ now                 the last value per series, red at or below the collapse line
    per position          accepted at each draft position per draft: a cliff after position 1
                          is a config fault (mask id), all at 0 a wiring one, a slope the drafter
    drafted / accepted    verify steps per second, and the tokens they accept per second
    prefix cache beside τ the hit rate (vLLM) with τ on the right axis: acceptance falling as
                          hits rise is the prefix-caching defect
    alerts                the DFlash* alerts' states over time (Prometheus' ALERTS series)

Variables: the Prometheus data source, `job` and `instance` (multi-select, All by default).
Pure: options in, a dict out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dflashctl.errors import UsageError
from dflashctl.metrics.thresholds import Thresholds
from dflashctl.monitoring.rules import DRAFTS, HIT_RATE, POSITION, TAU, Expected

SELECT = '{job=~"$job", instance=~"$instance"}'
SERIES = "{{model_name}} @ {{instance}} ({{engine}})"
ALERTS = 'ALERTS{alertname=~"DFlash.*", alertstate="firing", instance=~"$instance"}'


@dataclass
class DashboardOptions:
    title: str = "DFlash speculative decoding"
    uid: str = "dflashctl-spec-decode"
    expected: list[Expected] = field(default_factory=list)
    collapse_length: float = Thresholds.collapse_length
    refresh: str = "30s"
    time_from: str = "now-6h"

    def validate(self) -> None:
        if not self.title.strip():
            raise UsageError("--title is empty")
        if not 0 < len(self.uid) <= 40 or not all(c.isalnum() or c in "-_" for c in self.uid):
            raise UsageError(
                f"--uid {self.uid!r} is not a Grafana uid", "up to 40 letters, digits, '-' or '_'"
            )


def _sdk() -> None:
    try:
        import grafana_foundation_sdk  # noqa: F401
    except ImportError as e:  # Python 3.10, or an install without it
        raise UsageError(
            "dashboard needs grafana-foundation-sdk, which needs Python 3.11 or later",
            "install dflashctl on Python 3.11+ (./bin/dflashctl sets one up)",
        ) from e


def dashboard(o: DashboardOptions) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (importable as is)."""
    o.validate()
    _sdk()
    from grafana_foundation_sdk.builders import dashboard as gd
    from grafana_foundation_sdk.builders import stat, statetimeline, timeseries
    from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig
    from grafana_foundation_sdk.builders.prometheus import Dataquery
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model

    ds = model.DataSourceRef(type_val="prometheus", uid="${datasource}")

    def query(ref: str, expr: str, legend: str) -> Any:
        return Dataquery().ref_id(ref).expr(expr).legend_format(legend).range().datasource(ds)

    def steps(*pairs: tuple[float | None, str]) -> Any:
        return (
            gd.ThresholdsConfig()
            .mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=v, color=c) for v, c in pairs])
        )

    # Grafana colours a value by the last step it meets or exceeds: green from the line up
    collapse = steps((None, "red"), (o.collapse_length, "green"))
    tau = f"{TAU}{SELECT}"

    tau_panel = (
        timeseries.Panel()
        .id(2)
        .title("Mean acceptance length (τ)")
        .description(
            "1 + accepted / drafts over 5 minutes, per series. Red dashed: the collapse line "
            f"({o.collapse_length:g}); blue dashed pairs: a registry drafter's expected range."
        )
        .datasource(ds)
        .with_target(query("A", tau, SERIES))
        .unit("none")
        .min(1)
        .decimals(2)
        .thresholds(collapse)
        .thresholds_style(GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED))
        .height(9)
        .span(16)
    )
    for i, e in enumerate(o.expected):
        for end, value in (("min", e.min), ("max", e.max)):
            name = f"{e.drafter} expected {end}"
            dashed = model.DynamicConfigValue(
                id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}
            )
            blue = model.DynamicConfigValue(
                id_val="color", value={"mode": "fixed", "fixedColor": "blue"}
            )
            tau_panel = tau_panel.with_target(
                query(f"E{i}{end}", f"vector({value:g})", name)
            ).override_by_name(name, [dashed, blue])

    now_panel = (
        stat.Panel()
        .id(3)
        .title("τ now")
        .datasource(ds)
        .with_target(query("A", tau, SERIES))
        .decimals(2)
        .thresholds(collapse)
        .height(9)
        .span(8)
    )

    position_panel = (
        timeseries.Panel()
        .id(4)
        .title("Acceptance per draft position")
        .description(
            "Accepted at each position per draft (vLLM and the exporter). Position 1 high and "
            "the rest near 0: a config fault (mask_token_id); every position near 0: a wiring "
            "fault (taps, lm_head) or a wrong mask id; a gentle slope: the drafter."
        )
        .datasource(ds)
        .with_target(query("A", f"{POSITION}{SELECT}", "position {{position}} · {{instance}}"))
        .unit("percentunit")
        .min(0)
        .max(1)
        .height(8)
        .span(12)
    )

    throughput_panel = (
        timeseries.Panel()
        .id(5)
        .title("Drafted and accepted")
        .description("Verify steps per second, and the draft tokens they accept per second.")
        .datasource(ds)
        .with_target(query("A", f"{DRAFTS}{SELECT}", "drafts/s · " + SERIES))
        .with_target(query("B", f"({tau} - 1) * {DRAFTS}{SELECT}", "accepted tokens/s · " + SERIES))
        .unit("short")
        .min(0)
        .height(8)
        .span(12)
    )

    on_right = [
        model.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
        model.DynamicConfigValue(id_val="unit", value="none"),
        model.DynamicConfigValue(id_val="min", value=1),
    ]
    prefix_panel = (
        timeseries.Panel()
        .id(7)
        .title("Prefix-cache hit rate beside τ")
        .description(
            "vLLM's prefix-cache hits / queries, τ on the right axis: τ falling as hits rise "
            "is the prefix-caching defect (docs/known-defects.md)."
        )
        .datasource(ds)
        .with_target(query("A", f"{HIT_RATE}{SELECT}", "hit rate · {{instance}}"))
        .with_target(query("B", tau, "τ · {{instance}}"))
        .unit("percentunit")
        .min(0)
        .override_by_regexp("^τ · .*", on_right)
        .height(8)
        .span(12)
    )

    alerts_panel = (
        statetimeline.Panel()
        .id(8)
        .title("DFlash alerts firing")
        .description("Prometheus' ALERTS series for the rules `dflashctl alerts` writes.")
        .datasource(ds)
        .with_target(query("A", ALERTS, "{{alertname}} · {{instance}}"))
        .thresholds(steps((None, "red")))
        .height(8)
        .span(12)
    )

    def label_variable(name: str, of: str) -> Any:
        return (
            gd.QueryVariable(name)
            .label(name)
            .datasource(ds)
            .query(f"label_values({of}, {name})")
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        )

    variables = [
        gd.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        label_variable("job", DRAFTS),
        label_variable("instance", f'{DRAFTS}{{job=~"$job"}}'),
    ]

    board = (
        gd.Dashboard(o.title)
        .uid(o.uid)
        .tags(["dflashctl", "speculative-decoding", "dflash"])
        .refresh(o.refresh)
        .time(o.time_from, "now")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .variables(variables)
        .with_row(gd.Row("Acceptance").id(1))
        .with_panel(tau_panel)
        .with_panel(now_panel)
        .with_panel(position_panel)
        .with_panel(throughput_panel)
        .with_row(gd.Row("Causes and alerts").id(6))
        .with_panel(prefix_panel)
        .with_panel(alerts_panel)
    )
    return dict(json.loads(JSONEncoder(sort_keys=True).encode(board.build())))


def validate(data: dict[str, Any]) -> list[str]:
    """What Grafana's dashboard model (the SDK's types, every panel and query plugin
    registered) does not keep of `data`: read back and written out again, each key of `data`
    must come back with its value (the model adds its defaults; it drops what it does not
    know). [] when the model keeps everything."""
    _sdk()
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    try:
        board = Dashboard.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return [f"not a dashboard to Grafana's model: {type(e).__name__}: {e}"]
    kept = json.loads(JSONEncoder(sort_keys=True).encode(board))
    return _not_kept(data, kept, "")


def _not_kept(want: Any, got: Any, path: str) -> list[str]:
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path or '.'}: an object became {type(got).__name__}"]
        out = []
        for k, v in want.items():
            if k not in got:
                out.append(f"{path}.{k}: not in Grafana's model")
            else:
                out += _not_kept(v, got[k], f"{path}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: a list of {len(want)} came back as {got!r:.60}"]
        pairs = enumerate(zip(want, got, strict=True))
        return [x for i, (a, b) in pairs for x in _not_kept(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: {want!r:.60} came back as {got!r:.60}"]


def panel_queries(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, PromQL, legend) for every query of every panel, in order."""
    return [
        (p["title"], t["expr"], t.get("legendFormat", ""))
        for p in data.get("panels", [])
        if p.get("type") != "row"
        for t in p.get("targets", [])
    ]
