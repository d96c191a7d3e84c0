"""Launch one deployment and know when it is really up.

`plan()` resolves the settings into an engine command for the host that will run it (defaults,
the embedded demo pair, `num_speculative_tokens` = block size - 1 read from the drafter config
*on that host*); `--dry-run` stops there. `launch()` then:

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
import json
import os
import posixpath
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflashctl.errors import DflashError, PortInUseError, UsageError, require_finite
from dflashctl.hosts.host import Host, quote_argv
from dflashctl.server import deployments as state
from dflashctl.server import logscan
from dflashctl.server.engines import (
    DEFAULT_PORT,
    ENGINES,
    EngineSpec,
    adopt_flags,
    engine_env,
    render,
    split_speculative_config,
)

SECRET_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)$", re.IGNORECASE)
AUTO_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
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
class ServeOptions:
    """Everything `dflashctl serve` (or one host of a playbook) asks for."""

    engine: str = "local"
    model: str | None = None
    drafter: str | None = None
    port: int | None = None
    bind: str | None = None
    num_speculative_tokens: int | None = None
    spec: str = "dflash"
    tensor_parallel_size: int | None = None
    served_model_name: str | None = None
    python: str | None = None
    executable: str | None = None
    extra_args: list[str] = field(default_factory=list)
    speculative_config: dict[str, Any] = field(default_factory=dict)  # playbook: vLLM's keys
    env: dict[str, str] = field(default_factory=dict)
    pass_env: list[str] = field(default_factory=list)
    secret_env: list[str] = field(default_factory=list)  # env keys set from ${...} references
    host: str | None = None
    name: str | None = None
    ready_timeout: float = 600.0
    force: bool = False
    verify: bool = True

    @classmethod
    def from_settings(cls, settings: dict[str, Any], **over: Any) -> ServeOptions:
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in settings.items() if k in known}
        values.update({k: v for k, v in over.items() if v is not None})
        return cls(**values)


@dataclass
class Plan:
    name: str
    host: str | None
    spec: EngineSpec
    argv: list[str]
    url: str
    run_dir: str
    log: str
    env: dict[str, str]
    secret_names: list[str]
    k_source: str | None
    notes: list[str]
    options: ServeOptions

    @property
    def host_label(self) -> str:
        return self.host or "local"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host_label,
            "engine": self.spec.engine,
            "url": self.url,
            "cmd": self.argv,
            "cmd_text": quote_argv(self.argv),
            "env": self.env,
            "secret_env": self.secret_names,  # names only: values never leave this process
            "num_speculative_tokens": self.spec.num_speculative_tokens,
            "num_speculative_tokens_source": self.k_source,
            "run_dir": self.run_dir,
            "log": self.log,
            "model_id": self.spec.model_id,
            "notes": self.notes,
        }


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


# ---- planning --------------------------------------------------------------------------------


def demo_pair_dirs(host: Host, *, setup: bool = True) -> tuple[str, str]:
    """(target, drafter) of the embedded demo pair on `host`: the target as `demo_target` set it
    up there (converted once into that host's cache; the first call downloads and converts), the
    drafter as installed with the dflashctl that will run the engine."""
    if host.is_local:
        import dflashctl
        from dflashctl.demo_target import ensure

        drafter = Path(dflashctl.__file__).resolve().parent / "assets" / "demo" / "drafter"
        if not setup:
            from dflashctl.demo_target import target_dir

            return str(target_dir()), str(drafter)
        return str(ensure()), str(drafter)
    code = (
        "import os, dflashctl; from dflashctl.demo_target import ensure; print(ensure()); "
        "print(os.path.join(os.path.dirname(os.path.abspath(dflashctl.__file__)), "
        "'assets', 'demo', 'drafter'))"
    )
    res = host.sh(f"{_q(host.python)} -c {_q(code)}", timeout=1800.0)
    lines = res.stdout.strip().splitlines()
    if res.rc != 0 or len(lines) < 2:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise DflashError(
            f"{host.label}: the demo pair could not be set up with {host.python} there: {last}",
            "install dflashctl[engine,demo] on that host, or name its interpreter with --python",
        )
    return lines[-2], lines[-1]


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _read_drafter_config(host: Host, drafter: str) -> dict[str, Any] | None:
    cfg = posixpath.join(drafter, "config.json")
    try:
        if host.stat(cfg) is None:
            return None
        data = json.loads(host.read_file(cfg, 16 << 20))
    except (DflashError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def speculative_tokens(host: Host, drafter: str) -> tuple[int | None, str | None]:
    """K = block size - 1 from the drafter's config.json on `host`, else from the registry."""
    cfg = _read_drafter_config(host, drafter)
    if cfg is not None:
        from dflashctl.drafter.config import resolve

        r = resolve(cfg)
        if r.block_size:
            return r.block_size - 1, f"{host.where(drafter)}/config.json {r.block_size_source}"
    from dflashctl.drafter.registry import find_entry

    base = posixpath.basename(drafter.rstrip("/"))
    for key, how in ((drafter, ""), (base, f" (matched by the directory name {base})")):
        with contextlib.suppress(DflashError):
            entry = find_entry(key) if key else None
            if entry is not None and entry.block_size:
                return entry.block_size - 1, f"registry entry {entry.name}{how}"
    return None, None


def _adopt_engine_flags(opts: ServeOptions) -> tuple[ServeOptions, list[str]]:
    """The engine's own --host/--port/--tensor-parallel-size/--served-model-name among the extra
    arguments become serve's settings (rendered once); a disagreement is a UsageError."""
    import dataclasses

    found, rest = adopt_flags(opts.engine, list(opts.extra_args))
    if not found:
        return opts, []
    changes: dict[str, Any] = {"extra_args": rest}
    notes = []
    for setting, (flag, value) in found.items():
        ours = getattr(opts, setting)
        if ours is not None and ours != value:
            raise UsageError(
                f"{flag} {value} after `--` and serve's {setting} {ours} disagree", "give it once"
            )
        changes[setting] = value
        if flag == "--host":
            notes.append(f"{flag} {value} after `--` is the listen address: serve --bind {value}")
    return dataclasses.replace(opts, **changes), notes


def _user_speculative_config(opts: ServeOptions) -> tuple[list[str], dict[str, Any], str]:
    """(extra args without the user's --speculative-config, its keys, where they came from).

    vLLM with DFlash only: there the user's keys are merged into the one JSON dflashctl renders.
    Elsewhere a playbook's `speculative_config` is passed on as the engine's own flag."""
    sc = dict(opts.speculative_config)
    args = list(opts.extra_args)
    if opts.engine != "vllm" or opts.spec != "dflash":
        if sc and opts.engine == "vllm":  # --spec none: the user's own speculation (a baseline)
            args += ["--speculative-config", json.dumps(sc, separators=(",", ":"))]
        elif sc:
            raise UsageError(
                f"speculative_config is vLLM's --speculative-config, not {opts.engine}'s",
                "give that engine's own flags in extra_args",
            )
        return args, {}, ""
    from_args, args = split_speculative_config(args)
    source = "--speculative-config" if from_args else "playbook speculative_config"
    sc.update(from_args)
    method = sc.get("method", "dflash")
    if method != "dflash":
        raise UsageError(
            f"{source} sets method {method!r}; dflashctl serve renders a DFlash config",
            "for another method, pass --spec none and your own --speculative-config after --",
        )
    return args, sc, source


# vLLM's DFlash proposer (vllm/v1/spec_decode/dflash.py) builds 1 + K query slots per request:
# the anchor (last committed token) and K mask tokens. A drafter trained on blocks of B sees
# exactly its block at K = B - 1 (z-lab's README: 15 for b16; llama.cpp clamps 16 to 15).
# vLLM's docs and CI write 16 for z-lab/Qwen3-8B-DFlash-b16: a 17th slot beyond the trained
# block, which vLLM neither checks nor reads block_size for. SGLang counts the anchor:
# --speculative-num-draft-tokens = B.
def k_notes(engine: str, k: int | None, block_k: int | None) -> list[str]:
    """Why this K: block size - 1, and what a K beyond the trained block costs."""
    if k is None or block_k is None:
        return []
    block = block_k + 1
    if k > block_k:
        return [
            f"num_speculative_tokens {k} > block size {block} - 1: the drafter was trained on "
            f"blocks of {block} (anchor + {block_k} masks); the {k - block_k} slot(s) beyond "
            f"it rarely get accepted and cost verify tokens every step; {block_k} fits the block"
        ]
    if engine == "vllm" and k == block_k:
        docs = f" (vLLM's docs write {block}: one slot past the block)" if block == 16 else ""
        return [
            f"num_speculative_tokens {k} = block size {block} - 1: vLLM drafts the anchor plus "
            f"K masks, {block} slots, the block the drafter was trained on{docs}"
        ]
    if engine == "sglang" and k == block_k:
        return [f"--speculative-num-draft-tokens {block}: SGLang counts the block with its anchor"]
    return []


def _expand(host: Host, path: str | None) -> str | None:
    if path is not None and (path == "~" or path.startswith("~/")):
        return host.abspath(path)
    return path


def plan(opts: ServeOptions, host: Host, *, setup: bool = True) -> Plan:
    """Resolve the options into a command for `host` (reads the drafter config there). An
    `OfflineHost` (a dry run) is never connected to: the notes say what was not checked. With
    `setup` False nothing is downloaded (the demo target's path is where it would be)."""
    from dflashctl.hosts.host import OfflineHost

    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine {opts.engine!r}", f"use one of: {', '.join(ENGINES)}")
    require_finite(ready_timeout=opts.ready_timeout)
    if not opts.ready_timeout > 0:
        raise UsageError("--ready-timeout must be a positive number of seconds")
    if opts.port is not None and not 1 <= opts.port <= 65535:
        raise UsageError(f"--port {opts.port}: a TCP port is 1 to 65535", "e.g. --port 8000")
    notes: list[str] = []
    model, drafter = _expand(host, opts.model), _expand(host, opts.drafter)
    if model is None:
        if opts.engine != "local":
            raise UsageError(f"--engine {opts.engine} needs --model (a hub id or a directory)")
        if isinstance(host, OfflineHost):
            raise UsageError(
                f"the demo pair's paths on {host.label} are known only there",
                "add --check to connect and ask, or name --model and --drafter",
            )
        target_dir, drafter_dir = demo_pair_dirs(host, setup=setup)
        if (
            opts.spec == "dflash"
            and drafter is None
            and (host.stat(posixpath.join(drafter_dir, "config.json")) is None)
        ):
            raise DflashError(
                f"the embedded demo drafter is missing ({host.where(drafter_dir)}): this "
                "installation of dflashctl was built without it",
                "reinstall dflashctl, or serve your own pair: "
                "dflashctl serve --model TARGET_DIR --drafter DRAFTER_DIR",
            )
        model = target_dir
        if drafter is None and opts.spec == "dflash":
            drafter = drafter_dir
        notes.append("serving the embedded demo pair")
        if not setup and host.is_local:
            from dflashctl.demo_target import is_ready

            if not is_ready():
                notes.append(
                    "the demo target is not set up here yet: the first real serve downloads "
                    "and converts it (about 100 MB)"
                )
    if opts.spec == "none" and drafter is not None:
        notes.append("--spec none: the drafter is not used (plain greedy control)")
        drafter = None if opts.engine == "local" else drafter
    opts, adopted = _adopt_engine_flags(opts)
    notes += adopted
    extra_args, user_sc, sc_source = _user_speculative_config(opts)
    if "model" in user_sc:
        theirs = _expand(host, str(user_sc["model"]))
        if drafter is not None and theirs != drafter:
            notes.append(f"drafter {theirs} from {sc_source} (its keys win over --drafter)")
        drafter = theirs
        user_sc["model"] = theirs
    k = opts.num_speculative_tokens
    k_source: str | None = "--num-speculative-tokens" if k is not None else None
    if "num_speculative_tokens" in user_sc:
        theirs_k = user_sc["num_speculative_tokens"]
        if not isinstance(theirs_k, int) or isinstance(theirs_k, bool) or theirs_k < 1:
            raise UsageError(f"{sc_source}: num_speculative_tokens must be a positive integer")
        if k is not None and k != theirs_k:
            raise UsageError(
                f"--num-speculative-tokens {k} and {sc_source} num_speculative_tokens "
                f"{theirs_k} disagree",
                "give K once",
            )
        k, k_source = theirs_k, sc_source
    if opts.spec == "dflash" and drafter:
        block_k, block_source = speculative_tokens(host, drafter)
        if k is None:
            k, k_source = block_k, block_source
        notes += k_notes(opts.engine, k, block_k)
    port = opts.port or DEFAULT_PORT[opts.engine]
    bind = opts.bind or ("127.0.0.1" if host.is_local else "0.0.0.0")
    python = _expand(host, opts.python) or (
        host.python if opts.engine == "local" or not host.is_local else "python3"
    )
    spec = EngineSpec(
        engine=opts.engine,
        model=model,
        drafter=drafter if opts.spec == "dflash" else None,
        port=port,
        bind=bind,
        num_speculative_tokens=k,
        spec=opts.spec,
        tensor_parallel_size=opts.tensor_parallel_size,
        served_model_name=opts.served_model_name,
        python=python,
        executable=_expand(host, opts.executable),
        extra_args=extra_args,
        speculative_extra=user_sc,
    )
    argv = render(spec)
    if spec.engine == "local" and spec.spec == "dflash" and k is None:
        notes.append("num_speculative_tokens: the engine takes block size - 1 from the drafter")
    name = state.check_name(opts.name or state.default_name(opts.host, port))
    url_host = bind
    if bind in ("0.0.0.0", "::", ""):
        url_host = "127.0.0.1" if host.is_local else _remote_hostname(host)
    elif not host.is_local and bind in ("127.0.0.1", "localhost"):
        notes.append(f"bound to {bind} on {host.label}: reachable there (or through a tunnel)")
    run_dir = posixpath.join(state.run_root(not host.is_local), name)
    env = engine_env(opts.engine)
    secret_names: list[str] = []
    for key, value in opts.env.items():
        if SECRET_RE.search(key) or key in opts.secret_env:
            secret_names.append(key)
        else:
            env[key] = value
    for key in opts.pass_env:
        if key not in secret_names and key in os.environ:
            secret_names.append(key)
    if not host.is_local and opts.engine != "local":
        for key in AUTO_SECRETS:
            if key in os.environ and key not in secret_names:
                secret_names.append(key)
    if isinstance(host, OfflineHost):
        unchecked = [f"the drafter's config.json there (K from {k_source})" if k_source else ""]
        unchecked += ["what ~ is there", f"that {spec.python} exists", f"that port {port} is free"]
        notes.append(
            f"not checked on {host.label} (a dry run does not connect; --check does): "
            + ", ".join(u for u in unchecked if u)
        )
    return Plan(
        name=name,
        host=opts.host,
        spec=spec,
        argv=argv,
        url=f"http://{url_host}:{port}",
        run_dir=run_dir,
        log=posixpath.join(run_dir, "server.log"),
        env=env,
        secret_names=secret_names,
        k_source=k_source,
        notes=notes,
        options=opts,
    )


def _remote_hostname(host: Host) -> str:
    target = getattr(host, "target", None)
    return str(getattr(target, "hostname", host.label))


# ---- pre-launch checks -----------------------------------------------------------------------


def _verify_drafter(plan_: Plan, host: Host) -> tuple[bool, list[str], str | None]:
    """verify-config on the drafter as it is on `host`: (ok, failed-check lines, note)."""
    spec = plan_.spec
    if spec.spec != "dflash" or not spec.drafter:
        return True, [], None
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
    while True:
        for line in log.poll():
            emit("log", line)
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
            emit("wait", phase)
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
    `keep`: leave the state for a caller that goes on streaming (foreground)."""
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

    previous = state.load(plan_.name)
    if previous is not None:
        from dflashctl.server.control import stop_deployment

        emit("step", f"stopping the previous deployment {previous.name} (pid {previous.pid})")
        stopped = stop_deployment(previous, grace=10.0)
        result.notes.append(f"previous deployment {previous.name}: {stopped.outcome}")

    emit("step", f"checking port {plan_.spec.port} on {host.label}")
    _check_port(plan_, host)

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
def _signals_stop_the_engine() -> Iterator[None]:
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
    with _signals_stop_the_engine():
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
