"""The real bundled engine, served as `dflashctl serve` serves it (`served`), for the diagnose
and monitoring tests; MAX_TOKENS: the answer length they ask of it; `chat_traffic`: a client
sending requests until told to stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MAX_TOKENS = "24"


@contextmanager
def served(target: Path, drafter: Path | None, name: str) -> Iterator[tuple[str, str]]:
    """The bundled engine, launched as `dflashctl serve` does; (url, log); stopped by pid."""
    from dflashctl.commands.demo.run import free_port
    from dflashctl.hosts import open_host
    from dflashctl.server import deployments as state
    from dflashctl.server.control import stop_deployment
    from dflashctl.server.launch import launch
    from dflashctl.server.plan import ServeOptions, plan

    opts = ServeOptions(
        engine="local",
        model=str(target),
        drafter=str(drafter) if drafter else None,
        spec="dflash" if drafter else "none",
        port=free_port(),
        bind="127.0.0.1",
        name=name,
        verify=False,
        force=True,
        extra_args=["--log-interval", "0.5", "--device", "cpu"],
        env={"OMP_NUM_THREADS": "1"},
    )
    with open_host(None) as host:
        res = launch(plan(opts, host), host)
    assert res.ok, (res.reason, res.lines)
    try:
        assert res.url is not None and res.log is not None
        yield res.url, res.log
    finally:
        dep = state.load(name)
        if dep is not None:
            stop_deployment(dep)


def chat_traffic(
    url: str,
    stop: threading.Event,
    prompts: list[str],
    *,
    max_tokens: int = 24,
    answered: list[float] | None = None,
) -> None:
    """Sequential greedy chat requests until `stop`, as a client sends them, each answer's
    arrival time appended to `answered`."""
    import httpx

    with httpx.Client(timeout=120) as client:
        model = client.get(f"{url}/v1/models").json()["data"][0]["id"]
        i = 0
        while not stop.is_set():
            msgs = [{"role": "user", "content": prompts[i % len(prompts)]}]
            body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "messages": msgs}
            r = client.post(f"{url}/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            if answered is not None:
                answered.append(time.time())
            i += 1
