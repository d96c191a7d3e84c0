"""`tune --write-playbook FILE`: the recommendation as a playbook `serve` and `run` launch.

The best K overall becomes `serve.num_speculative_tokens` (or `spec: none` where plain
decoding won); with concurrency levels and vLLM, the fastest K per level becomes
`speculative_config.num_speculative_tokens_per_batch_size` (vLLM's dynamic schedule, entries
[first, last, K] over inclusive batch-size ranges starting at 1; 0 switches speculation off
there), with `num_speculative_tokens` its largest K, the ceiling vLLM clamps the table to;
SGLang takes one K at every batch size, so it gets the K with the best geometric mean over the
levels. The figures behind it go in the file's header comment. The file is read back with
the playbook loader before it replaces anything. No printing."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflashctl.errors import UsageError

if TYPE_CHECKING:  # run imports this module: the report's type only
    from dflashctl.commands.tune.run import TuneReport


def recommended_serve(report: TuneReport) -> dict[str, Any]:
    """The `serve` section of the recommendation."""
    o = report.options
    best = report.best()
    if best is None:
        raise UsageError("--write-playbook: no K was measured", "see the errors above")
    serve: dict[str, Any] = {"engine": o.engine}
    for key, value in (("model", o.model), ("drafter", o.drafter), ("port", o.port),
                       ("python", o.python)):  # fmt: skip
        if value is not None:
            serve[key] = value
    table = report.batch_size_table() if o.engine == "vllm" else None
    one_k = report.one_k_over_levels() if o.engine == "sglang" else None
    if one_k is not None:  # one K for every batch size: the best over the levels
        best = one_k
    if table and any(k for _lo, _hi, k in table):
        serve["num_speculative_tokens"] = max(k for _lo, _hi, k in table)
        serve["speculative_config"] = {"num_speculative_tokens_per_batch_size": table}
    elif best[0] == 0:
        serve["spec"] = "none"
    else:
        serve["num_speculative_tokens"] = best[0]
    if o.extra_args:
        serve["extra_args"] = list(o.extra_args)
    return serve


def _header(report: TuneReport) -> str:
    best = report.best()
    lines = [f"Written by `dflashctl tune` on {dt.date.today().isoformat()}: decode tokens/s "
             "(median over the repetitions) per K and prompt kind."]  # fmt: skip
    for r in report.results:
        cells = ", ".join(f"{f} {v:.1f}" for f, v in r.decode.items() if v is not None)
        lines.append(f"  K={'off' if r.k == 0 else r.k}: {cells or 'failed'}")
    if best is not None:
        lines.append(f"Best overall: {'off' if best[0] == 0 else f'K={best[0]}'} "
                     f"({best[1]:.1f} tokens/s, geometric mean over the kinds).")  # fmt: skip
    lines += [f"Note: {n}" for n in report.notes]
    return "".join(f"# {line}\n" for line in lines)


def write_playbook(report: TuneReport, path: Path) -> dict[str, Any]:
    """Write the recommendation to `path` (atomically, after the loader accepted it); the
    `serve` section written."""
    import yaml

    from dflashctl.files import write_atomic
    from dflashctl.playbook import load_playbook

    serve = recommended_serve(report)
    hosts = [report.options.host] if report.options.host else ["local"]
    book = {
        "name": path.stem if path.stem.replace("-", "").replace("_", "").isalnum() else "tuned",
        "description": "the K that `dflashctl tune` measured fastest",
        "hosts": hosts,
        "serve": serve,
    }
    text = _header(report) + yaml.safe_dump(book, sort_keys=False, default_flow_style=None)
    with tempfile.TemporaryDirectory(prefix="dflashctl-tune-") as tmp:
        check = Path(tmp) / path.name
        check.write_text(text, "utf-8")
        load_playbook(check)  # what serve will read: refused here, not at launch
    write_atomic(path, text.encode("utf-8"))
    return serve
