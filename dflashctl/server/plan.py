"""What `serve` will run, decided before anything starts: `ServeOptions` (what the user asked
for) resolved by `plan()` into a `Plan` for the host that will run it — defaults, the embedded
demo pair, `num_speculative_tokens` = block size − 1 read from the drafter config *on that
host*, the user's engine flags and speculative-config keys merged, secrets kept out of the
command line. `--dry-run` stops here; `launch.py` carries a plan out. Nothing here prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from dflashctl.errors import DflashError, InputError, UsageError, require_finite
from dflashctl.hosts.host import Host, quote_argv
from dflashctl.server import deployments as state
from dflashctl.server.engines import (
    DEFAULT_PORT,
    ENGINES,
    LLAMA_CPP,
    LLAMA_SERVER_ENV,
    EngineSpec,
    adopt_flags,
    engine_env,
    render,
    split_speculative_config,
)

SECRET_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)$", re.IGNORECASE)
AUTO_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


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
    defects: list[Any] = field(default_factory=list)  # DefectMatch: confirmed and likely
    engine_version: str | None = None  # as read on the host (None: not asked or not found)

    @property
    def host_label(self) -> str:
        return self.host or "local"

    @property
    def launch_line(self) -> str:
        """The engine's command as a user pastes it: as it is here, or as an OpenSSH line that
        runs it on the plan's host (with the command's --ssh-config)."""
        if not self.host:
            return quote_argv(self.argv)
        from dflashctl.hosts.spec import COMMAND_SSH, ssh_line

        return ssh_line(self.host, self.argv, COMMAND_SSH.get("ssh_config"))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host_label,
            "engine": self.spec.engine,
            "url": self.url,
            "cmd": self.argv,
            "cmd_text": quote_argv(self.argv),
            "launch_line": self.launch_line,
            "env": self.env,
            "secret_env": self.secret_names,  # names only: values never leave this process
            "num_speculative_tokens": self.spec.num_speculative_tokens,
            "num_speculative_tokens_source": self.k_source,
            "run_dir": self.run_dir,
            "log": self.log,
            "model_id": self.spec.model_id,
            "notes": self.notes,
            "engine_version": self.engine_version,
            "known_defects": [m.to_json() for m in self.defects],
        }


def demo_pair_dirs(host: Host, *, setup: bool = True) -> tuple[str, str]:
    """(target, drafter) of the embedded demo pair on `host`: the target as `demo_target` set it
    up there (converted once into that host's cache; the first call downloads and converts), the
    drafter as installed with the dflashctl that will run the engine."""
    if host.is_local:
        from dflashctl.demo_target import ensure
        from dflashctl.drafter.registry import embedded_dir

        drafter = embedded_dir("demo")
        assert drafter is not None
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


# The demo pair's cheaper step on the bundled engine (docs/performance.md): an 8,192-token draft
# vocabulary kept beside the drafter (its files stay the whole vocabulary's, as vLLM serves them)
# and verifying only the proposals the drafter is sure of. The text is the target's either way.
DEMO_DRAFT_VOCAB = "draft_vocab.safetensors"
DEMO_DRAFT_CONFIDENCE = "0.5"


def _demo_cpu_step(
    opts: ServeOptions, host: Host, drafter_dir: str
) -> tuple[ServeOptions, list[str]]:
    """The bundled engine's flags for the cheaper step, before the user's own (theirs win);
    none when the engine is another or the installed dflashctl there has no vocabulary file."""
    if opts.engine != "local":
        return opts, []
    given = {a.split("=", 1)[0] for a in opts.extra_args}
    ours: list[str] = []
    vocab = posixpath.join(posixpath.dirname(drafter_dir), DEMO_DRAFT_VOCAB)
    if "--draft-vocab" not in given and host.stat(vocab) is not None:
        ours += ["--draft-vocab", vocab]
    if "--draft-confidence" not in given:
        ours += ["--draft-confidence", DEMO_DRAFT_CONFIDENCE]
    if not ours:
        return opts, []
    note = (
        "the demo pair's CPU step: " + " ".join(ours) + " (an 8,192-token draft vocabulary, "
        "only the confident proposals verified; the same text; `-- --draft-vocab none "
        "--draft-confidence 0` verifies every proposal over the whole vocabulary)"
    )
    return dataclasses.replace(opts, extra_args=[*ours, *opts.extra_args]), [note]


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def read_drafter_config(host: Host, drafter: str) -> dict[str, Any] | None:
    """The drafter's config.json on `host`, or None when it is missing or not a JSON object."""
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
    cfg = read_drafter_config(host, drafter)
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


def require_local_dirs(host: Host, model: str | None, drafter: str | None) -> None:
    """The bundled engine serves directories on `host`: one without a config.json is an
    InputError before anything launches (not an engine that dies while it loads)."""
    for flag, path in (("--model", model), ("--drafter", drafter)):
        if path is not None and host.stat(posixpath.join(path, "config.json")) is None:
            raise InputError(
                f"{flag} {host.where(path)}: no config.json there",
                "the bundled engine serves a model directory and a drafter directory",
            )


def _expand(host: Host, path: str | None) -> str | None:
    if path is not None and (path == "~" or path.startswith("~/")):
        return host.abspath(path)
    return path


def plan(opts: ServeOptions, host: Host, *, setup: bool = True) -> Plan:
    """Resolve the options into a command for `host` (reads the drafter config there). An
    `OfflineHost` (a dry run) is never connected to: the notes say what was not checked. With
    `setup` False (a dry run without --check) nothing is downloaded (the demo target's path is
    where it would be) and the bundled engine's directories are not looked for."""
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
            opts, cheaper = _demo_cpu_step(opts, host, drafter_dir)
            notes += cheaper
        notes.append(
            "serving the embedded demo pair"
            if drafter == drafter_dir or opts.spec != "dflash"
            else f"serving the embedded demo target with the drafter {drafter}"
        )
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
    if opts.engine == "local" and setup and not isinstance(host, OfflineHost):  # launch, --check
        require_local_dirs(host, model, drafter if opts.spec == "dflash" else None)
    if opts.spec == "dflash" and drafter:
        block_k, block_source = speculative_tokens(host, drafter)
        if k is None and block_k is not None and block_k < 1:
            raise InputError(
                f"{block_source}: a block of {block_k + 1} leaves no token to draft",
                f"a DFlash block is at least 2; check the drafter: dflashctl verify-config "
                f"{drafter}",
            )
        if k is None:
            k, k_source = block_k, block_source
        notes += k_notes(opts.engine, k, block_k)
    bind, port = _listen(opts, host)
    python = _expand(host, opts.python) or (
        host.python if opts.engine == "local" or not host.is_local else "python3"
    )
    executable = _expand(host, opts.executable)
    if opts.engine == LLAMA_CPP and executable is None:
        executable = os.environ.get(LLAMA_SERVER_ENV) or None
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
        executable=executable,
        extra_args=extra_args,
        speculative_extra=user_sc,
    )
    argv = render(spec)
    if spec.engine in ("local", LLAMA_CPP) and spec.spec == "dflash" and k is None:
        notes.append("num_speculative_tokens: the engine takes block size - 1 from the drafter")
    name = state.check_name(opts.name or state.default_name(opts.host, port))
    url_host, _ = client_address(opts, host)
    if not host.is_local and bind in ("127.0.0.1", "localhost"):
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
        home = "what ~ is there"
        if any('"~/' in a or a.startswith("~/") for a in argv):
            home += " (the launch writes the home directory for it, inside the JSON too)"
        unchecked += [home, f"that {spec.python} exists", f"that port {port} is free"]
        notes.append(
            f"not checked on {host.label} (a dry run does not connect; --check does): "
            + ", ".join(u for u in unchecked if u)
        )
    if spec.engine == "vllm" and "--no-enable-prefix-caching" in argv:
        notes.append(
            "vLLM: prefix caching off (--no-enable-prefix-caching): a DFlash drafter's context is "
            "not written for prefix-cached tokens (vllm#47930); pass -- --enable-prefix-caching "
            "to keep it"
        )
    p = Plan(
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
    if spec.engine != "local":
        from dflashctl.server.known_defects import describe, launch_defects, plan_defects

        drafter_cfg = None
        if not isinstance(host, OfflineHost):
            drafter_cfg = read_drafter_config(host, spec.drafter) if spec.drafter else None
            p.engine_version, p.defects = plan_defects(p, host, drafter_cfg)
            p.notes += [describe(m) for m in p.defects]
        if p.engine_version is None:  # the build was not read: what the flags alone decide
            why = "not read in a dry run" if isinstance(host, OfflineHost) else "not read"
            for m in launch_defects(p, drafter_cfg):
                fix = " ".join(m.defect.fix.split())
                p.notes.append(
                    f"known defect {m.defect.id}: {m.defect.title}; serve refuses it on an "
                    f"affected build ({m.defect.versions.describe()}; the build {why}). "
                    f"Fix: {fix}"
                )
    return p


def _listen(opts: ServeOptions, host: Host) -> tuple[str, int]:
    """(the address the server binds, its port) on `host`."""
    port = opts.port or DEFAULT_PORT[opts.engine]
    return opts.bind or ("127.0.0.1" if host.is_local else "0.0.0.0"), port


def client_address(opts: ServeOptions, host: Host) -> tuple[str, int]:
    """Where clients (and Prometheus) reach the server `opts` describes on `host`: the bound
    address, or for a wildcard bind 127.0.0.1 here and the host's name (its ssh_config
    HostName) elsewhere. Reads nothing on the host."""
    opts, _ = _adopt_engine_flags(opts)
    bind, port = _listen(opts, host)
    if bind in ("0.0.0.0", "::", ""):
        return ("127.0.0.1" if host.is_local else _remote_hostname(host)), port
    return bind, port


def _remote_hostname(host: Host) -> str:
    target = getattr(host, "target", None)
    return str(getattr(target, "hostname", host.label))
