"""Human output of `dflashctl fetch`: the progress bars (stderr) and the report (stdout).

Rendering only: `fetch.fetch()` does the work and returns a `FetchReport`; `--json` output
bypasses the report rendering (progress still goes to stderr, where it never mixes with JSON).
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from dflashctl.commands.views import fmt
from dflashctl.console import err, out, printable, styled

FILE_STYLE = {
    "pinned": "green",
    "hub": "green",
    "locked": "green",
    "accepted": "yellow",
    "recorded": "yellow",
}
FILE_MEANING = {
    "pinned": "sha256 = the registry's pin",
    "hub": "sha256 = the hash the Hub publishes (no registry pin)",
    "locked": "already in place, sha256 = the lock",
    "accepted": "differs from the registry's pin; taken with --allow-unpinned",
    "recorded": "nothing to compare with; recorded in the lock from now on",
}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


class _Bytes(DownloadColumn):
    """Byte counts only on lines that count bytes (a step line has no total)."""

    def render(self, task: Task) -> Text:
        return super().render(task) if task.total is not None else Text("")


class _Speed(TransferSpeedColumn):
    def render(self, task: Task) -> Text:
        return super().render(task) if task.total is not None else Text("")


SAY_WAITING_AFTER_S = 2.0  # piped stderr: a step that takes longer than this is named


class RichFetchProgress:
    """`fetch.FetchProgress` drawn with rich on stderr: a step line, bytes, hashing."""

    def __init__(self) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            _Bytes(),
            _Speed(),
            console=err,
            transient=True,
        )
        self._lock = threading.Lock()
        self._step: TaskID | None = None
        self._bytes: TaskID | None = None
        self._hash: TaskID | None = None
        self._live = False
        self._timer: threading.Timer | None = None  # piped: the pending "still waiting" line

    def __enter__(self) -> RichFetchProgress:
        # Bars only on a terminal: piped or captured stderr gets the errors and nothing else.
        self._live = err.is_terminal
        if self._live:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live:
            self._progress.stop()
        if self._timer is not None:
            self._timer.cancel()

    def step(self, text: str) -> None:
        with self._lock:
            if not self._live:  # piped: a step still running after a while says so
                self._quiet_step(text)
                return
            if self._step is None:
                self._step = self._progress.add_task(escape(printable(text)), total=None)
            else:
                self._progress.update(self._step, description=escape(printable(text)))

    def _quiet_step(self, text: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(
            SAY_WAITING_AFTER_S,
            lambda: err.print(escape(f"fetch: {text} …"), highlight=False, soft_wrap=True),
        )
        self._timer.daemon = True
        self._timer.start()

    def download(self, done: int, total: int | None) -> None:
        with self._lock:
            if self._bytes is None:
                self._bytes = self._progress.add_task("download", total=total)
            self._progress.update(self._bytes, completed=done, total=total)

    def hashing(self, name: str, done: int, total: int) -> None:
        with self._lock:
            label = escape(printable(f"sha256 {name}"))
            if self._hash is None:
                self._hash = self._progress.add_task(label, total=total)
            self._progress.update(self._hash, description=label, completed=done, total=total)


def render_fetch(report: Any) -> None:
    """Print a fetch report: where from and to, each file and how it was verified, the lock,
    the notes, then verify-config's verdict (failed checks only)."""
    ref = f" ({report.ref})" if report.ref else ""
    head = f"{report.repo}@{report.revision}{ref}"
    if report.action == "embedded":
        head = f"{report.registry} (embedded in dflashctl, no Hub repo)"
    lines = [
        f"fetch {head}",
        f"  into {report.fetched_on + ':' if report.fetched_on else ''}{report.directory}",
    ]
    if report.registry:
        lines.append(f"  registry entry: {report.registry}")
    out.print(escape("\n".join(lines)), soft_wrap=True)

    table = Table(title_justify="left")
    table.add_column("file", overflow="fold")
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("sha256", no_wrap=True)
    table.add_column("check", no_wrap=True)
    for f in report.files:
        style = FILE_STYLE.get(f.status, "")
        check = f"[{style}]{f.status}[/{style}]" if style else f.status
        table.add_row(escape(f.name), _size(f.size), f.sha256[:16] + "…", check)
    out.print(table)
    used = [s for s in FILE_MEANING if any(f.status == s for f in report.files)]
    for status in used:
        out.print(escape(f"  {status}: {FILE_MEANING[status]}"), soft_wrap=True)

    if report.action == "embedded":
        out.print(
            "[green]embedded[/green]: every file hashes to the registry's pin", soft_wrap=True
        )
    elif report.action == "verified":
        out.print(
            "[green]in place[/green]: every file hashes to the lock; nothing downloaded",
            soft_wrap=True,
        )
    else:
        n = len(report.downloaded)
        kept = len(report.files) - n
        already = f" ({kept} already in place)" if kept else ""
        out.print(
            escape(f"downloaded {n} file(s){already}, verified; lock written: {report.lock_path}"),
            soft_wrap=True,
        )
    if report.in_cache:
        out.print(
            escape(
                f"in the Hugging Face cache: vLLM and SGLang given {report.repo} (revision "
                f"{report.revision[:12]}) with this HF_HOME use these files; or pass the path "
                f"as the speculative config's model: {report.directory}"
            ),
            soft_wrap=True,
        )
    for name in report.removed:
        out.print(escape(f"  removed {name} (listed by the previous lock, not by this one)"))
    for note in report.notes:
        out.print(escape(f"  note: {note}"), soft_wrap=True)
    if report.remote is not None:
        r = report.remote
        out.print(
            escape(
                f"on {r.host}: {r.directory}: {len(r.verified)} file(s) re-hashed there, equal "
                f"to the lock ("
                + ("downloaded there" if report.fetched_on else f"{len(r.uploaded)} sent")
                + ")"
            ),
            soft_wrap=True,
        )
    _render_verdict(report)


def _render_verdict(report: Any) -> None:
    verify = report.verify
    if verify is None:
        return
    counts = verify.counts
    warnings = counts["warning"]
    if verify.ok:
        out.print(
            f"verify-config: [green]OK[/green]: {len(verify.checks)} checks, no problems, "
            f"{warnings} warning(s)",
            soft_wrap=True,
        )
        return
    failed = [c for c in verify.checks if c.failed]
    table = Table(title="verify-config: problems in what arrived", title_justify="left")
    for name in ("field", "status", "found", "expected", "hint"):
        table.add_column(name, overflow="fold")
    for check in failed:
        table.add_row(
            escape(check.name),
            styled(check.status),
            fmt(check.found),
            fmt(check.expected),
            escape(check.hint or ""),
        )
    out.print(table)
    out.print(
        f"verify-config: [red]PROBLEMS[/red]: {len(failed)} of {len(verify.checks)} checks; "
        + escape(f"`dflashctl verify-config {report.directory}` shows them all")
        + (", `--fix` repairs them" if verify.entry is not None else ""),
        soft_wrap=True,
    )


CHANGE_STYLE = {"changed": "red", "added": "yellow", "removed": "yellow"}


def render_upstream(report: Any) -> None:
    """Print `fetch --check-upstream`: pinned vs the branch's commit, then the drifted files."""
    registry = f" (registry entry {report.registry})" if report.registry else ""
    lines = [
        f"upstream {report.repo}{registry}",
        f"  pinned:  {report.pinned} (from {report.pin_source})",
        f"  {report.branch + ':':<8} {report.upstream}",
    ]
    out.print(escape("\n".join(lines)), soft_wrap=True)
    for note in report.notes:
        out.print(escape(f"  note: {note}"), soft_wrap=True)
    patterns = ", ".join(report.patterns)
    if not report.moved:
        out.print(
            escape(f"no drift: {report.branch} is the pinned commit"),
            style="green",
            soft_wrap=True,
        )
        return
    if report.ok:
        out.print(
            escape(
                f"no drift: {report.branch} moved, but none of the {report.tracked} tracked "
                f"file(s) ({patterns}) changed"
            ),
            style="green",
            soft_wrap=True,
        )
        return
    table = Table(title=f"files changed on {report.branch}", title_justify="left")
    widest = max(len(c.name) for c in report.changes)
    table.add_column("file", overflow="fold", min_width=min(widest, 40))
    table.add_column("change", no_wrap=True)
    table.add_column("pinned hash", no_wrap=True)
    table.add_column("upstream hash", no_wrap=True)
    table.add_column("kind", no_wrap=True)

    def cell(f: Any) -> str:
        return f"{f.hash[:12]}… {_size(f.size)}" if f is not None else "—"

    for c in report.changes:
        style = CHANGE_STYLE.get(c.change, "")
        kind = (c.upstream or c.pinned).kind
        table.add_row(
            escape(c.name), f"[{style}]{c.change}[/{style}]", cell(c.pinned), cell(c.upstream), kind
        )
    out.print(table)
    out.print(
        escape(
            f"DRIFT: {len(report.changes)} tracked file(s) differ between the pin and "
            f"{report.branch}; the pin still fetches the old bytes. Re-pin only after checking "
            "the new ones (fetch --revision "
            f"{report.upstream} --allow-unpinned)"
        ),
        style="red",
        soft_wrap=True,
    )
