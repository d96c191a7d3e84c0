"""Launch one deployment and know when it is really up.

`plan()` (server/plan.py) resolves the settings into an engine command for the host that will
run it; `--dry-run` stops there. `launch()` then:

1. checks the drafter where it will be served (verify-config; a failed check refuses the launch
   unless `force`);
2. stops a previous deployment of the same name by its recorded pid (never by process name),
   and refuses a port somebody already listens on, saying who (one of ours, or another pid);
3. starts the engine detached in its own session, with a fresh log (the old one is rotated to
   server.log.1, so nothing stale is ever read), and records pid, /proc start time, log and
   command in a state file;
4. waits until the process is alive, `/health` answers 200, `/v1/models` lists the model and
   the log shows the engine's ready line. It fails fast on a known fatal log line or an exited
   process, and explains the failure with the log's root-cause lines, then stops what it started.

`serve_foreground()` does the same and then streams the log until the process exits or the user
interrupts (which stops it): Ctrl-C, SIGTERM and SIGHUP (a closed terminal or a dropped SSH
session) all stop the engine it started, since that runs in its own session and would not
get them. Progress goes to an `on_event` callback; nothing here prints.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import posixpath
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError, EngineError, PortInUseError
from dflashctl.hosts.host import Host, quote_argv
from dflashctl.server import deployments as state
from dflashctl.server import logscan
from dflashctl.server.engines import (
    LLAMA_CPP,
    LLAMA_SERVER_ENV,
    LOCAL_ENGINE_INSTALL,
    LOCAL_ENGINE_MODULES,
    EngineSpec,
)
from dflashctl.server.plan import Plan

MAX_LINES = 20000


@dataclass
class Event:
    """Progress for the CLI: kind is step | log | wait | note."""

    kind: str
    name: str
    message: str
    elapsed: float = 0.0


OnEvent = Callable[[Event], None]


@dataclass
class LaunchResult:
    ok: bool
    name: str
    host: str | None
    engine: str
    url: str | None = None
    pid: int | None = None
    log: str | None = None
    cmd: list[str] = field(default_factory=list)
    reason: str | None = None
    hint: str | None = None
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ready_s: float | None = None
    ended: str | None = None  # foreground: "interrupted" | "exited"
    log_reader: Any = field(default=None, repr=False)  # foreground keeps reading from here

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "name": self.name,
            "url": self.url,
            "pid": self.pid,
            "log": self.log,
            "engine": self.engine,
            "host": self.host or "local",
            "cmd": self.cmd,
            "ready_seconds": round(self.ready_s, 2) if self.ready_s is not None else None,
            "reason": self.reason,
            "hint": self.hint,
            "lines": self.lines,
            "notes": self.notes,
            "ended": self.ended,
        }


# ---- pre-launch checks -----------------------------------------------------------------------


def _verify_drafter(plan_: Plan, host: Host) -> tuple[bool, list[str], str | None]:
    """verify-config on the drafter as it is on `host`: (ok, failed-check lines, note)."""
    spec = plan_.spec
    if spec.spec != "dflash" or not spec.drafter:
        return True, [], None
    if spec.engine == LLAMA_CPP:  # a GGUF file; verify-config's engine rules are vLLM's/SGLang's
        note = "a llama.cpp drafter is not verified before launch: "
        return True, [], note + f"`dflashctl verify-config {spec.drafter}` reads its GGUF header"
    if not host.is_dir(spec.drafter):
        return True, [], f"drafter {spec.drafter} is not a directory on {host.label}: not verified"
    target = spec.model if host.is_dir(spec.model) else None
    engine = spec.engine
    if host.is_local:
        from dflashctl.drafter.verify import run_verify

        report = run_verify(
            Path(spec.drafter), target=Path(target) if target else None, engine=engine
        )
    else:
        from dflashctl.drafter.check_remote import verify_on_host

        report = verify_on_host(host, spec.drafter, target=target, engine=engine)
    failed = [c for c in report.checks if c.failed]
    lines = [
        f"{c.name}: {c.status}, found {json.dumps(c.found, default=str)}"
        + (f", expected {json.dumps(c.expected, default=str)}" if c.expected is not None else "")
        for c in failed
    ]
    return not failed, lines, None


def _check_port(plan_: Plan, host: Host) -> None:
    holder = host.port_holder(plan_.spec.port)
    if holder is None:
        return
    where = f"port {plan_.spec.port}" + ("" if host.is_local else f" on {host.label}")
    for dep in state.all_deployments():
        if dep.host == plan_.host and holder.pid is not None and dep.pid == holder.pid:
            raise PortInUseError(
                f"{where} is held by an old server of ours: deployment {dep.name} "
                f"(pid {dep.pid}, {dep.engine}, started {dep.started_at})",
                f"stop it first: dflashctl stop {dep.name}",
            )
    who = f"pid {holder.pid}" if holder.pid else "another process"
    if holder.cmdline:
        who += f" ({holder.cmdline[:120]})"
    raise PortInUseError(
        f"{where} is already in use by {who}",
        "stop that process, or pick another --port; dflashctl only stops servers it started",
    )


_MISSING_MODULES = (
    "import importlib.util, sys; "
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


def _check_engine_modules(plan_: Plan, host: Host) -> None:
    """The bundled engine's imports (fastapi, uvicorn, torch, ...) are there in the interpreter
    that will run it: without them the process dies after the launch, as a bare
    ModuleNotFoundError in its log. Nothing is imported, only looked up. For llama.cpp: that
    llama-server is an executable there."""
    if plan_.spec.engine == LLAMA_CPP:
        exe = plan_.spec.llama_server()
        found = host.is_executable(exe) if "/" in exe else host.which(exe) is not None
        if not found:
            where = "" if host.is_local else f" on {host.label}"
            raise EngineError(
                f"no llama-server {exe!r}{where}",
                "build llama.cpp's server (cmake --build build --target llama-server) and put "
                f"it on PATH, or name it with {LLAMA_SERVER_ENV}=PATH",
            )
        return
    if plan_.spec.engine != "local":
        return
    python = plan_.spec.python or host.python
    if host.is_local and python == sys.executable:
        missing = [m for m in LOCAL_ENGINE_MODULES if importlib.util.find_spec(m) is None]
    else:
        res = host.sh(f"{quote_argv([python, '-c', _MISSING_MODULES, *LOCAL_ENGINE_MODULES])}")
        if not res.ok:
            raise EngineError(
                f"{python} on {host.label} could not be run: {res.tail(1, strip=True)}",
                "name the engine's interpreter with --python",
            )
        missing = res.stdout.split()
    if missing:
        where = "" if host.is_local else f" on {host.label}"
        raise EngineError(
            f"the bundled engine needs {', '.join(missing)}, missing in {python}{where}",
            f"{LOCAL_ENGINE_INSTALL} in that environment (./bin/dflashctl does it for a "
            "checkout), or name another interpreter with --python",
        )


# ---- launching and waiting -------------------------------------------------------------------


class _Log:
    """Incremental reader of this launch's log (it starts empty: the old one was rotated)."""

    def __init__(self, host: Host, path: str) -> None:
        self.host, self.path = host, path
        self.offset = 0
        self.partial = b""
        self.lines: list[str] = []

    def poll(self) -> list[str]:
        st = self.host.stat(self.path)
        if st is None or st.size <= self.offset:
            return []
        data = self.host.read_range(self.path, self.offset, min(st.size - self.offset, 8 << 20))
        self.offset += len(data)
        data = self.partial + data
        parts = data.split(b"\n")
        self.partial = parts.pop()
        new = [logscan.clean(p.decode("utf-8", "replace")) for p in parts]
        self.lines.extend(new)
        if len(self.lines) > MAX_LINES:  # keep the start (root causes) and the end
            self.lines = self.lines[:2000] + self.lines[-(MAX_LINES - 2000) :]
        return new

    def flush_partial(self) -> list[str]:
        if not self.partial:
            return []
        line = logscan.clean(self.partial.decode("utf-8", "replace"))
        self.partial = b""
        self.lines.append(line)
        return [line]


@dataclass
class _Failure:
    reason: str
    lines: list[str]
    hint: str | None = None


def _alive(host: Host, dep: state.Deployment) -> bool:
    info = host.proc(dep.pid)
    return info is not None and (dep.starttime == 0 or info.starttime == dep.starttime)


def _models(reply_body: bytes) -> list[str]:
    try:
        data = json.loads(reply_body)
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []


def wait_ready(
    host: Host,
    dep: state.Deployment,
    spec: EngineSpec,
    *,
    timeout: float,
    emit: Callable[[str, str], None],
    log: _Log,
    poll: float,
) -> _Failure | None:
    """Poll until ready (None) or failed (_Failure). See the module docstring for "ready"."""
    t0 = time.monotonic()
    ready_line = False
    fatal_at: float | None = None
    served: list[str] = []
    health: int | None = None
    ok_since: float | None = None
    said = ""  # the log's latest phase line (loading weights, compiling, capturing graphs)
    while True:
        for line in log.poll():
            emit("log", line)
            said = logscan.phase(line) or said
            if fatal_at is None and logscan.fatal(line) is not None:
                fatal_at = time.monotonic()
            if logscan.is_ready_line(line, spec.ready_lines):
                ready_line = True
        alive = _alive(host, dep)
        now = time.monotonic()
        if not alive:
            time.sleep(0.2)  # the last lines a dying process wrote
            for line in log.poll() + log.flush_partial():
                emit("log", line)
            lines = logscan.explain(log.lines)
            return _Failure(
                "the engine process exited before it was ready", lines, logscan.hint_for(lines)
            )
        if fatal_at is not None and now - fatal_at > 3.0:
            lines = logscan.explain(log.lines)
            return _Failure(
                "the log shows a fatal error (the process is still running: stopped)",
                lines,
                logscan.hint_for(lines),
            )
        if fatal_at is None:
            reply = host.http_get(spec.bind, spec.port, "/health", timeout=3.0)
            health = reply.status if reply is not None else None
            if health == 200:
                models = host.http_get(spec.bind, spec.port, "/v1/models", timeout=5.0)
                served = _models(models.body) if models is not None and models.status == 200 else []
                if spec.model_id in served or (served and not spec.model_id):
                    ok_since = ok_since or now
                    if ready_line or now - ok_since > 10.0:
                        if not ready_line:
                            emit("note", "ready by /health and /v1/models; no ready line in log")
                        return None
            phase = (
                "waiting for the engine to load"
                if health is None
                else f"/health answers {health}"
                if health != 200
                else f"/v1/models lists {served or 'nothing yet'}"
            )
            emit("wait", f"{phase} · {said}" if said else phase)
        if now - t0 > timeout:
            detail = f"/health {health if health is not None else 'unreachable'}"
            if served and spec.model_id not in served:
                detail += f"; /v1/models lists {served}, not {spec.model_id!r}"
            lines = logscan.explain(log.lines) if log.lines else ["(the log is empty)"]
            return _Failure(
                f"not ready after {timeout:g} s ({detail}); stopped",
                lines,
                "a big model may need a longer --ready-timeout",
            )
        time.sleep(poll)


def _stop_quietly(host: Host, dep: state.Deployment) -> None:
    from dflashctl.server.control import stop_on_host

    with contextlib.suppress(DflashError):
        stop_on_host(host, dep, grace=5.0)
    state.remove(dep.name)


def launch(
    plan_: Plan,
    host: Host,
    *,
    on_event: OnEvent | None = None,
    poll: float | None = None,
    keep: bool = False,
) -> LaunchResult:
    """Pre-launch checks, start, wait until ready. A failure is a result (ok False), not an
    exception; DflashError (exit 2) only when it could not run (unreachable host, port taken).
    `keep`: leave the state for a caller that goes on streaming (foreground). The deployment's
    name is held from the first check to ready: a second launch of it meanwhile is refused."""
    with state.reserved(plan_.name):
        return _launch(plan_, host, on_event=on_event, poll=poll, keep=keep)


def _launch(
    plan_: Plan,
    host: Host,
    *,
    on_event: OnEvent | None,
    poll: float | None,
    keep: bool,
) -> LaunchResult:
    t0 = time.monotonic()
    opts = plan_.options

    def emit(kind: str, message: str) -> None:
        if on_event is not None:
            on_event(Event(kind, plan_.name, message, time.monotonic() - t0))

    result = LaunchResult(
        ok=False,
        name=plan_.name,
        host=plan_.host,
        engine=plan_.spec.engine,
        url=plan_.url,
        log=plan_.log,
        cmd=plan_.argv,
        notes=list(plan_.notes),
    )
    if opts.verify and plan_.spec.spec == "dflash" and plan_.spec.drafter:
        if plan_.spec.engine != LLAMA_CPP:
            emit("step", f"checking the drafter config on {host.label} (verify-config)")
        ok, lines, note = _verify_drafter(plan_, host)
        if note:
            result.notes.append(note)
        if not ok and not opts.force:
            result.reason = f"the drafter config on {host.label} fails verify-config"
            result.lines = lines
            host_opt = f" --host {plan_.host}" if plan_.host else ""
            result.hint = (
                f"see `dflashctl verify-config {plan_.spec.drafter}{host_opt}`; repair it with "
                "--fix (with --drafter NAME), or launch anyway with --force"
            )
            return result
        if not ok:
            result.notes.append(f"verify-config found {len(lines)} problem(s): launched (--force)")

    from dflashctl.server.known_defects import refused

    confirmed = [m for m in plan_.defects if refused(m)]
    if confirmed and not opts.force:
        version = f"{plan_.spec.engine} {plan_.engine_version}"
        result.reason = (
            f"{version} on {host.label} with this launch has "
            f"{len(confirmed)} known defect(s): {', '.join(m.defect.id for m in confirmed)}"
        )
        result.lines = [" ".join(m.defect.fix.split()) for m in confirmed]
        result.hint = (
            "change what each line says (`dflashctl doctor --engine "
            f"{plan_.spec.engine}` lists them), or launch anyway with --force"
        )
        return result
    if confirmed:
        result.notes.append(f"{len(confirmed)} known defect(s) refused: launched (--force)")

    previous = state.load(plan_.name)
    if previous is not None:
        from dflashctl.server.control import stop_deployment

        emit("step", f"stopping the previous deployment {previous.name} (pid {previous.pid})")
        stopped = stop_deployment(previous, grace=10.0)
        result.notes.append(f"previous deployment {previous.name}: {stopped.outcome}")

    emit("step", f"checking port {plan_.spec.port} on {host.label}")
    _check_port(plan_, host)
    _check_engine_modules(plan_, host)

    run_dir = host.abspath(plan_.run_dir)
    log_path = posixpath.join(run_dir, "server.log")
    host.makedirs(run_dir)
    host.rotate_log(log_path)
    host.write_file(posixpath.join(run_dir, "cmd"), (quote_argv(plan_.argv) + "\n").encode())
    secrets = {k: opts.env.get(k) or os.environ.get(k, "") for k in plan_.secret_names}
    emit("step", f"starting {plan_.spec.engine} on {host.label}")
    pid = host.start_detached(
        plan_.argv, cwd=run_dir, log=log_path, env=plan_.env, secret_env=secrets
    )
    info = host.proc(pid)
    host.write_file(posixpath.join(run_dir, "server.pid"), f"{pid}\n".encode())
    dep = state.Deployment(
        name=plan_.name,
        engine=plan_.spec.engine,
        host=plan_.host,
        url=plan_.url,
        pid=pid,
        starttime=info.starttime if info is not None else 0,
        log=log_path,
        run_dir=run_dir,
        port=plan_.spec.port,
        bind=plan_.spec.bind,
        model=plan_.spec.model,
        model_id=plan_.spec.model_id,
        drafter=plan_.spec.drafter,
        cmd=plan_.argv,
        started_at=state.now_iso(),
        ssh_config=_ssh_config_of(host),
        spec=plan_.spec.spec,
    )
    state.save(dep)
    result.pid, result.log = pid, log_path
    log = _Log(host, log_path)
    try:
        failure = wait_ready(
            host,
            dep,
            plan_.spec,
            timeout=opts.ready_timeout,
            emit=emit,
            log=log,
            poll=poll or (0.25 if host.is_local else 0.5),
        )
    except BaseException:
        _stop_quietly(host, dep)  # an interrupted launch leaves nothing running
        raise
    if failure is not None:
        _stop_quietly(host, dep)
        result.reason, result.lines, result.hint = failure.reason, failure.lines, failure.hint
        return result
    dep.ready_at = state.now_iso()
    state.save(dep)
    result.ok = True
    result.ready_s = time.monotonic() - t0
    result.log_reader = log
    emit("step", f"ready in {result.ready_s:.1f} s: {plan_.url}")
    return result


def _ssh_config_of(host: Host) -> str | None:
    opts = getattr(host, "opts", None)
    if opts is None:
        return None
    path = opts.config_path()
    return str(path) if path else None


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached a foreground serve: handled like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signame = signal.Signals(signum).name


FORWARDED = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_stop_the_engine() -> Iterator[None]:
    """While a foreground serve runs, SIGTERM and SIGHUP raise `Signalled`, so the engine it
    started is stopped as on Ctrl-C (only the main thread can take signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_signalled(signum: int, _frame: object) -> None:
        raise Signalled(signum)

    old = {s: signal.signal(s, raise_signalled) for s in FORWARDED}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _ignore_signals(signum: int, _frame: object) -> None:
    """A second SIGTERM/SIGHUP while the engine is being stopped: the stop goes on."""


def serve_foreground(
    plan_: Plan,
    host: Host,
    *,
    on_event: OnEvent | None = None,
    poll: float | None = None,
) -> LaunchResult:
    """Launch, then stream the log until the process exits, or Ctrl-C, SIGTERM or SIGHUP
    arrives: those stop the engine (SIGTERM to its process group, SIGKILL after 10 s)."""
    with signals_stop_the_engine():
        return _serve_foreground(plan_, host, on_event=on_event, poll=poll)


def _serve_foreground(
    plan_: Plan, host: Host, *, on_event: OnEvent | None, poll: float | None
) -> LaunchResult:
    result = launch(plan_, host, on_event=on_event, poll=poll)
    if not result.ok:
        return result
    log: _Log = result.log_reader
    dep = state.load(plan_.name)
    assert dep is not None
    t0 = time.monotonic()

    def emit(kind: str, message: str) -> None:
        if on_event is not None:
            on_event(Event(kind, plan_.name, message, time.monotonic() - t0))

    last_check = 0.0
    try:
        while True:
            for line in log.poll():
                emit("log", line)
            now = time.monotonic()
            if now - last_check > 1.0:
                last_check = now
                if not _alive(host, dep):
                    for line in log.poll() + log.flush_partial():
                        emit("log", line)
                    state.remove(dep.name)
                    result.ok = False
                    result.ended = "exited"
                    result.reason = "the engine process exited"
                    result.lines = logscan.explain(log.lines[-400:])
                    return result
            time.sleep(poll or (0.2 if host.is_local else 0.5))
    except KeyboardInterrupt as e:
        why = e.signame if isinstance(e, Signalled) else "Ctrl-C"
        if threading.current_thread() is threading.main_thread():
            for s in FORWARDED:
                signal.signal(s, _ignore_signals)
        emit("step", f"{why}: stopping {dep.name} (pid {dep.pid})")
        from dflashctl.server.control import stop_on_host

        stopped = stop_on_host(host, dep, grace=10.0)
        if stopped.gone:
            state.remove(dep.name)
        result.ended = "interrupted"
        result.notes.append(f"stopped on {why}: {stopped.outcome}")
        return result
