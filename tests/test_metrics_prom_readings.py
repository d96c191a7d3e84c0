"""The Prometheus reader (dflashctl/metrics/prom.py) on its exact numbers: each counter a page
carries (vLLM, llama.cpp, SGLang's gauges, SGLang's server info), each window between two
scrapes (deltas, a restart, the throughputs, the prefix-cache hit rate), and each answer of a
real HTTP server on 127.0.0.1 (HTTP errors, HTML, an SGLang info page). No stand-ins."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import datetime

import pytest
from support.hostile import HostileServer, gzip_bomb
from support.vllm_metrics import MetricsServer

from dflashctl.errors import ServerError
from dflashctl.http_body import BodyTooLarge
from dflashctl.metrics.prom import (
    PageNotFound,
    PromReading,
    fetch_server_info,
    fetch_text,
    lifetime_window,
    parse_reading,
    server_info_windows,
    sglang_idle,
    sglang_window,
    window_between,
)
from dflashctl.metrics.window import SpecWindow

AT = datetime(2026, 11, 20, 10, 0, 0, 123456)
AT2 = datetime(2026, 11, 20, 10, 0, 10, 999999)
_BLANK = {f.name: f.default for f in fields(SpecWindow) if f.name not in ("engine", "format")}


def figures(w: SpecWindow | None) -> dict[str, object] | None:
    if w is None:
        return None
    return {k: v for k, v in asdict(w).items() if k not in _BLANK or v != _BLANK[k]}


def reading(text: str, monotonic: float = 0.0, at: datetime = AT) -> PromReading:
    return parse_reading(text, at=at, monotonic=monotonic)


def vllm(
    drafts: float, tokens: float, accepted: float, pos: tuple[float, ...], **extra: float
) -> str:
    names = {
        "gen": "vllm:generation_tokens_total",
        "hits": "vllm:prefix_cache_hits_total",
        "queries": "vllm:prefix_cache_queries_total",
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
    }
    lines = [
        f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}',
        'vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9',
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {tokens}',
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}',
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
        for i, v in enumerate(pos)
    ]
    lines += [f'{names[k]}{{engine="0"}} {v}' for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def test_a_vllm_page_summed_over_engines() -> None:
    text = vllm(100, 300, 250, (90, 80, 80), gen=400, hits=10, queries=40, running=3, waiting=1)
    text += vllm(50, 150, 50, (30, 20), gen=100, hits=5, queries=10, running=2, waiting=4).replace(
        'engine="0"', 'engine="1"'
    )
    text += 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="x"} 7\n'
    text += 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 7\n'
    text += "vllm:other_metric 5\n"
    r = reading(text, monotonic=7.5)
    assert asdict(r) == {
        "at": AT,
        "monotonic": 7.5,
        "has_vllm": True,
        "has_sglang": False,
        "engine": "vllm",
        "drafts": 150.0,
        "draft_tokens": 450.0,
        "accepted": 300.0,
        "per_pos": {0: 120.0, 1: 100.0, 2: 80.0},
        "gen_tokens": 500.0,
        "prefix_hits": 15.0,
        "prefix_queries": 50.0,
        "running": 5.0,
        "waiting": 5.0,
        "sgl": {},
    }


def test_llama_cpp_counters_read_as_vllms() -> None:
    text = (
        "llamacpp:spec_decode_num_drafts_total 40\n"
        "llamacpp:spec_decode_num_draft_tokens_total 160\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 60\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 30\n'
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 20\n'
        "llamacpp:tokens_predicted_total 900\n"
        "llamacpp:requests_processing 2\n"
        "llamacpp:requests_deferred 1\n"
        "llamacpp:kv_cache_usage_ratio 0.5\n"
        "vllm:spec_decode_num_drafts_total 10\n"
    )
    r = reading(text)
    assert (r.has_vllm, r.has_sglang, r.engine) == (True, False, "llama.cpp")
    assert (r.drafts, r.draft_tokens, r.accepted, r.per_pos) == (50.0, 160.0, 60.0, {0: 30, 1: 20})
    assert (r.gen_tokens, r.running, r.waiting) == (900.0, 2.0, 1.0)
    assert figures(lifetime_window(r)) == {
        "engine": "llama.cpp",
        "format": "llama.cpp-prometheus-lifetime",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
        "stream": "since start",
        "mean_acceptance_length": 2.2,
        "accepted_tokens": 60,
        "drafted_tokens": 160,
        "num_drafts": 50,
        "per_position": [0.6, 0.4],
        "draft_acceptance_rate": 0.375,
        "cumulative": True,
    }


def test_sglang_gauges_keep_rank_zero() -> None:
    text = (
        'sglang:spec_accept_length{tp_rank="1"} 9.0\n'
        'sglang:spec_accept_length{tp_rank="0"} 2.5\n'
        'sglang:spec_accept_length{tp_rank="2"} 8.0\n'
        'sglang:spec_accept_rate{tp_rank="3"} 0.4\n'
        "sglang:gen_throughput 120.5\n"
        "sglang:num_running_reqs 3\n"
        "sglang:num_queue_reqs 2\n"
        "sglang:spec_verify_calls_total 12\n"
        "sglang:token_usage 0.3\n"
    )
    r = reading(text)
    assert (r.has_vllm, r.has_sglang, r.drafts) == (False, True, None)
    assert r.sgl == {
        "sglang:spec_accept_length": 2.5,
        "sglang:spec_accept_rate": 0.4,
        "sglang:gen_throughput": 120.5,
        "sglang:num_running_reqs": 3.0,
        "sglang:num_queue_reqs": 2.0,
        "sglang:spec_verify_calls": 12.0,
    }
    assert figures(sglang_window(r)) == {
        "engine": "sglang",
        "format": "sglang-prometheus",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
        "mean_acceptance_length": 2.5,
        "draft_acceptance_rate": 0.4,
        "generation_throughput": 120.5,
        "running_reqs": 3,
        "waiting_reqs": 2,
    }
    assert figures(sglang_window(reading("sglang:spec_accept_length 1.5\n"))) == {
        "engine": "sglang",
        "format": "sglang-prometheus",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
        "mean_acceptance_length": 1.5,
    }
    assert sglang_window(reading("sglang:gen_throughput 1\n")) is None


@pytest.mark.parametrize(
    "before, after, idle",
    [
        (None, 0, True),
        (None, 1, False),
        (5, 5, True),
        (5, 4, True),
        (5, 6, False),
        (None, None, False),
        ("absent", 1, False),
        ("absent", 0, True),
    ],
)
def test_sglang_idle(before: object, after: float | None, idle: bool) -> None:
    def page(calls: object) -> PromReading:
        return reading(f"sglang:spec_verify_calls {calls}\n" if calls is not None else "")

    a = (
        None
        if before is None
        else reading("sglang:gen_throughput 1\n")
        if before == "absent"
        else page(before)
    )
    assert sglang_idle(a, page(after)) is idle


def test_the_window_between_two_scrapes() -> None:
    a = reading(vllm(100, 300, 250, (90, 80, 80), gen=400, hits=10, queries=40, running=1), 1.0)
    b = reading(
        vllm(
            300, 900, 550, (250, 200, 100, 0), gen=1400, hits=30, queries=90, running=3, waiting=2
        ),
        11.0,
        AT2,
    )
    w, reset = window_between(a, b)
    assert reset is False
    assert figures(w) == {
        "engine": "vllm",
        "format": "vllm-prometheus",
        "timestamp": datetime(2026, 11, 20, 10, 0, 10),
        "timestamp_raw": "2026-11-20 10:00:10",
        "mean_acceptance_length": 2.5,
        "accepted_tokens": 300,
        "drafted_tokens": 600,
        "num_drafts": 200,
        "per_position": [0.8, 0.6, 0.1, 0.0],
        "draft_acceptance_rate": 0.5,
        "accepted_throughput": 30.0,
        "drafted_throughput": 60.0,
        "generation_throughput": 100.0,
        "running_reqs": 3,
        "waiting_reqs": 2,
        "prefix_cache_hit_rate": 0.4,
    }


def test_a_restart_between_scrapes_is_the_new_counts() -> None:
    a = reading(vllm(500, 1500, 900, (400,), gen=9000, hits=50, queries=90), 0.0)
    b = reading(vllm(100, 300, 150, (100,), gen=200, hits=5, queries=10), 10.0)
    w, reset = window_between(a, b)
    assert reset is True
    assert figures(w) == {
        "engine": "vllm",
        "format": "vllm-prometheus",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
        "mean_acceptance_length": 2.5,
        "accepted_tokens": 150,
        "drafted_tokens": 300,
        "num_drafts": 100,
        "per_position": [1.0],
        "draft_acceptance_rate": 0.5,
        "accepted_throughput": 15.0,
        "drafted_throughput": 30.0,
    }
    # accepted fell while drafts grew: a restart too
    w, reset = window_between(reading(vllm(50, 150, 90, ())), reading(vllm(60, 180, 30, ())))
    assert reset is True and w is not None and (w.num_drafts, w.accepted_tokens) == (60, 30)


@pytest.mark.parametrize(
    "a_text, b_text, secs, want",
    [
        # nothing drafted between the scrapes
        (vllm(100, 300, 250, ()), vllm(100, 300, 250, ()), 10.0, (None, False)),
        # no draft-token counter: no rate, no drafted throughput
        (
            "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 5\n",
            "vllm:spec_decode_num_drafts_total 30\nvllm:spec_decode_num_accepted_tokens_total 25\n",
            4.0,
            ({"mean_acceptance_length": 2.0, "accepted_tokens": 20, "num_drafts": 20,
              "accepted_throughput": 5.0}, False),
        ),
        # the same second: no throughput at all
        (vllm(0, 0, 0, (), gen=0), vllm(10, 30, 10, (), gen=50), 0.0,
         ({"mean_acceptance_length": 2.0, "accepted_tokens": 10, "drafted_tokens": 30,
           "num_drafts": 10, "draft_acceptance_rate": 1 / 3}, False)),
        # the draft-token counter in one scrape only; generation in one only; no prefix queries
        (vllm(0, 0, 0, (), hits=0, queries=5), vllm(10, 30, 10, (), gen=50, hits=0, queries=5),
         2.0,
         ({"mean_acceptance_length": 2.0, "accepted_tokens": 10, "drafted_tokens": 30,
           "num_drafts": 10, "draft_acceptance_rate": 1 / 3, "accepted_throughput": 5.0,
           "drafted_throughput": 15.0}, False)),
        # no spec counters on one side
        ("vllm:generation_tokens_total 5\n", vllm(10, 30, 10, ()), 1.0, (None, False)),
        (vllm(10, 30, 10, ()), "vllm:spec_decode_num_drafts_total 20\n", 1.0, (None, False)),
    ],
)  # fmt: skip
def test_windows_between_edges(a_text: str, b_text: str, secs: float, want: object) -> None:
    w, reset = window_between(reading(a_text, 0.0), reading(b_text, secs))
    base = {
        "engine": "vllm",
        "format": "vllm-prometheus",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
    }
    got = None if w is None else {k: v for k, v in figures(w).items() if k not in base}  # type: ignore[union-attr]
    expected, expected_reset = want  # type: ignore[misc]
    assert (got, reset) == (expected, expected_reset)
    if w is not None:
        assert {k: v for k, v in figures(w).items() if k in base} == base  # type: ignore[union-attr]


def test_lifetime_needs_drafts() -> None:
    assert lifetime_window(reading(vllm(0, 0, 0, ()))) is None
    assert lifetime_window(reading("vllm:spec_decode_num_drafts_total 3\n")) is None
    w = lifetime_window(reading(vllm(4, 0, 2, ())))
    assert figures(w) == {
        "engine": "vllm",
        "format": "vllm-prometheus-lifetime",
        "timestamp": datetime(2026, 11, 20, 10, 0, 0),
        "timestamp_raw": "2026-11-20 10:00:00",
        "stream": "since start",
        "mean_acceptance_length": 1.5,
        "accepted_tokens": 2,
        "drafted_tokens": 0,
        "num_drafts": 4,
        "cumulative": True,
    }


def test_server_info_windows() -> None:
    one = {"internal_states": [{"avg_spec_accept_length": 3, "last_gen_throughput": 42}]}
    assert [figures(w) for w in server_info_windows(one, AT)] == [
        {
            "engine": "sglang",
            "format": "sglang-server-info",
            "timestamp": datetime(2026, 11, 20, 10, 0, 0),
            "timestamp_raw": "2026-11-20 10:00:00",
            "stream": "since start",
            "mean_acceptance_length": 3.0,
            "generation_throughput": 42.0,
            "cumulative": True,
        }
    ]
    ranks = {
        "internal_states": [
            {"avg_spec_accept_length": 2.5, "last_gen_throughput": "n/a"},
            {"avg_spec_accept_length": True},
            "not a dict",
            {"avg_spec_accept_length": "2.0"},
            {"avg_spec_accept_length": 1.25},
        ]
    }
    got = [
        (w.stream, w.mean_acceptance_length, w.generation_throughput)
        for w in server_info_windows(ranks, AT)
    ]
    assert got == [("dp0", 2.5, None), ("dp4", 1.25, None)]
    assert server_info_windows({"internal_states": {"a": 1}}, AT) == []
    assert server_info_windows({}, AT) == []


def test_garbage_is_a_server_error_naming_the_page() -> None:
    with pytest.raises(ServerError) as e:
        parse_reading("this is not { prometheus text\n", at=AT, monotonic=0.0, url="http://h/m")
    assert str(e.value).startswith("http://h/m is not Prometheus metrics text (")
    with pytest.raises(ServerError) as e:
        parse_reading("this is not { prometheus text\n", at=AT, monotonic=0.0)
    assert str(e.value).startswith("the page is not Prometheus metrics text (")


@pytest.fixture
def serve():
    servers: list[MetricsServer] = []

    def start(body, **kw) -> MetricsServer:  # type: ignore[no-untyped-def]
        s = MetricsServer(body, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def test_fetch_text_answers(serve) -> None:  # type: ignore[no-untyped-def]
    ok = serve(lambda n: "vllm:x 1\n")
    assert fetch_text(ok.url, 5) == "vllm:x 1\n"
    with pytest.raises(PageNotFound) as nf:
        fetch_text(serve(lambda n: "nope", status=404).url, 5)
    assert str(nf.value).endswith("/metrics answered HTTP 404")
    with pytest.raises(ServerError) as e:
        fetch_text(serve(lambda n: "x", status=400).url, 5)
    assert str(e.value).endswith("/metrics answered HTTP 400") and not isinstance(
        e.value, PageNotFound
    )
    with pytest.raises(ServerError) as e:
        fetch_text(serve(lambda n: "  <html>", ctype="text/plain").url, 5)
    assert str(e.value).endswith("/metrics returned HTML, not Prometheus metrics text")
    with pytest.raises(ServerError) as e:
        fetch_text(serve(lambda n: "vllm:x 1\n", ctype="text/HTML").url, 5)
    assert "returned HTML" in str(e.value)
    assert fetch_text(serve(lambda n: "x 1\n", status=399).url, 5) == "x 1\n"


def test_fetch_server_info(serve) -> None:  # type: ignore[no-untyped-def]
    info = {"internal_states": [{"avg_spec_accept_length": 2.0}]}
    srv = serve(lambda n: json.dumps(info))
    base = srv.url.removesuffix("/metrics")
    assert fetch_server_info(base + "/", 5) == info
    assert srv.paths == ["/server_info"]
    # the old name answers where the new one is missing (the first GET gets 404)
    old = serve(lambda n: "")

    def body(n: int) -> str:
        old.status = 404 if n == 0 else 200  # read after the body is made
        return json.dumps(info)

    old.body = body
    assert fetch_server_info(old.url.removesuffix("/metrics"), 5) == info
    assert old.paths == ["/server_info", "/get_server_info"]
    assert fetch_server_info(serve(lambda n: "{}").url.removesuffix("/metrics"), 5) is None
    assert fetch_server_info(serve(lambda n: "[1]").url.removesuffix("/metrics"), 5) is None
    assert fetch_server_info(serve(lambda n: "not json").url.removesuffix("/metrics"), 5) is None
    err = serve(lambda n: json.dumps(info), status=500)
    assert fetch_server_info(err.url.removesuffix("/metrics"), 5) is None
    missing = serve(lambda n: "", status=404)
    assert fetch_server_info(missing.url.removesuffix("/metrics"), 5) is None
    assert missing.paths == ["/server_info", "/get_server_info"]
    gone = serve(lambda n: "")
    url = gone.url.removesuffix("/metrics")
    gone.close()
    assert fetch_server_info(url, 5) is None


def test_every_page_error_says_what_to_do(serve) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (
            {"status": 404},
            "answered HTTP 404",
            "SGLang serves /metrics only with --enable-metrics; vLLM at http://HOST:PORT/metrics",
        ),
        ({"status": 503}, "answered HTTP 503", "check the server's own log"),
        (
            {"ctype": "text/html"},
            "returned HTML, not Prometheus metrics text",
            "point at the engine's /metrics path on its API port, not a dashboard or proxy page",
        ),
    ]
    for kw, message, hint in cases:
        with pytest.raises(ServerError) as e:
            fetch_text(serve(lambda n: "x 1\n", **kw).url, 5)
        assert (e.value.message.split("/metrics ", 1)[1], e.value.hint) == (message, hint)
    hang = serve(lambda n: "", hang=True)
    with pytest.raises(ServerError) as e:
        fetch_text(hang.url, 0.3)
    assert e.value.message == f"{hang.url} did not answer within 0.3 s"
    assert e.value.hint == (
        "is the server up and not wedged? A loaded server can be slow: raise --timeout"
    )
    gone = serve(lambda n: "")
    url = gone.url
    gone.close()
    with pytest.raises(ServerError) as e:
        fetch_text(url, 5)
    assert e.value.message.startswith(f"cannot reach {url}: ")
    assert e.value.hint == (
        "check host and port: vLLM serves /metrics on its API port (8000 by default), "
        "SGLang on 30000 with --enable-metrics"
    )
    with pytest.raises(ServerError) as e:
        parse_reading("this is not { prometheus text\n", at=AT, monotonic=0.0)
    assert e.value.hint == "point at the engine's /metrics endpoint"


def test_typed_families_with_created_samples_are_summed_whole() -> None:
    from support.vllm_metrics import vllm_page

    r = reading(vllm_page(3, engines=2))
    assert (r.drafts, r.draft_tokens, r.accepted) == (600.0, 1800.0, 1500.0)
    assert r.per_pos == {0: 540.0, 1: 480.0, 2: 480.0}
    text = (
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 7\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 5\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 3\n'
    )
    assert reading(text).per_pos == {0: 5.0, 1: 3.0}
    sgl = (
        "# TYPE sglang:spec_verify_calls counter\n"
        "sglang:spec_verify_calls_total 12\n"
        "sglang:spec_verify_calls_created 1.7e9\n"
    )
    assert reading(sgl).sgl == {"sglang:spec_verify_calls": 12.0}


def test_window_edges_of_one_draft_half_a_second_and_one_query() -> None:
    a = reading(vllm(0, 0, 0, (), hits=0, queries=0), 0.0)
    b = reading(vllm(1, 4, 1, (1, 0, 0), hits=1, queries=1), 0.5)
    w, _ = window_between(a, b)
    assert w is not None
    assert (w.num_drafts, w.accepted_throughput, w.prefix_cache_hit_rate) == (1, 2.0, 1.0)
    gap = reading(
        "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 5\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 4\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 1\n'
    )
    life = lifetime_window(gap)
    assert life is not None and life.per_position == [0.4, 0.0, 0.1]
    only_b = reading(
        "vllm:spec_decode_num_drafts_total 0\nvllm:spec_decode_num_accepted_tokens_total 0\n"
    )
    w, _ = window_between(only_b, reading(vllm(10, 30, 10, ()), 1.0))
    assert w is not None and (w.drafted_tokens, w.draft_acceptance_rate) == (None, None)


# ---- a family's samples after one the reader skips; the parser's own error, whole --------------


@pytest.mark.parametrize(
    "text, want",
    [
        (  # vLLM's exposition (TYPE named with _total): a sample without a position first
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 7\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 5\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 3\n',
            {"has_vllm": True, "per_pos": {0: 5.0, 1: 3.0}},
        ),
        (  # a llama.cpp family whose first sample (_sum) is not one of its counters
            "# TYPE llamacpp:requests_processing summary\n"
            "llamacpp:requests_processing_sum 3\n"
            'llamacpp:requests_processing{quantile="0.5"} 2\n',
            {"has_vllm": True, "engine": "llama.cpp", "running": 2.0},
        ),
        (  # a family named *_created: its _created sample skipped, the _sum after it read
            "# TYPE vllm:spec_decode_num_drafts_created summary\n"
            'vllm:spec_decode_num_drafts_created{quantile="0.5"} 1.7e9\n'
            "vllm:spec_decode_num_drafts_created_sum 5\n",
            {"has_vllm": True},
        ),
    ],
)
def test_a_skipped_sample_does_not_hide_the_rest_of_its_family(
    text: str, want: dict[str, object]
) -> None:
    blank = asdict(PromReading(at=AT, monotonic=0.0))
    got = asdict(reading(text))
    assert {k: v for k, v in got.items() if v != blank[k]} == want


def test_the_parsers_error_is_quoted_to_80_characters() -> None:
    word = "not-a-number-but-a-word-long-enough-to-be-cut-" * 2
    with pytest.raises(ServerError) as e:
        parse_reading(f"vllm:x {word}\n", at=AT, monotonic=0.0, url="http://h/metrics")
    assert e.value.message == (
        "http://h/metrics is not Prometheus metrics text (could not convert string to float: "
        f"'{word[:44]})"  # the parser's 36 characters, then 44 of the word: 80
    )


# ---- raw HTTP answers: redirects, headers, encodings, caps and deadlines -----------------------

PLAIN = "text/plain; version=0.0.4"
INFO = {"internal_states": [{"avg_spec_accept_length": 2.0}]}


def answer(
    status: int = 200,
    body: bytes = b"vllm:x 1\n",
    headers: tuple[tuple[str, str], ...] = (("Content-Type", PLAIN),),
    every: float | None = None,
    wait: threading.Event | None = None,
):
    """A route of HostileServer: status, headers and body exactly as given (the body one byte
    every `every` seconds when set; nothing at all until `wait` is set)."""

    def route(h) -> None:  # type: ignore[no-untyped-def]
        if wait is not None:
            wait.wait(30)
            return
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        if every is None:
            h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        if every is None:
            h.wfile.write(body)
            return
        h.wfile.flush()
        for b in body:
            h.wfile.write(bytes([b]))
            h.wfile.flush()
            time.sleep(every)

    return route


@functools.cache
def bomb() -> bytes:
    return gzip_bomb(33 << 20)  # 33 MiB of zeros: over the 32 MiB page cap once inflated


def gzipped(status: int):  # type: ignore[no-untyped-def]
    return answer(status, bomb(), (("Content-Type", PLAIN), ("Content-Encoding", "gzip")))


# name -> (routes (given the event that releases a hung answer), timeout, the page's text or
# (error class, message after the URL))
PAGES: dict[str, tuple[Callable[[threading.Event], dict[str, object]], float, object]] = {
    "a redirect is followed": (
        lambda _: {
            "/metrics": answer(302, b"", (("Location", "/real/metrics"),)),
            "/real/metrics": answer(),
        },
        5.0,
        "vllm:x 1\n",
    ),
    "no content type": (lambda _: {"/metrics": answer(headers=())}, 5.0, "vllm:x 1\n"),
    "invalid UTF-8 is replaced": (
        lambda _: {"/metrics": answer(body=b"# HELP vllm:x caf\xe9\nvllm:x 1\n")},
        5.0,
        "# HELP vllm:x caf\ufffd\nvllm:x 1\n",
    ),
    "a trickle past the deadline": (
        lambda _: {"/metrics": answer(every=0.15)},
        0.5,
        (ServerError, " did not answer within 0.5 s"),
    ),
    "no answer at all": (
        lambda hang: {"/metrics": answer(wait=hang)},
        0.3,
        (ServerError, " did not answer within 0.3 s"),
    ),
    "a gzip bomb stops at the cap": (
        lambda _: {"/metrics": gzipped(200)},
        20.0,
        (BodyTooLarge, ": the answer is larger than 33554432 bytes (decompressed): refused"),
    ),
    "an error's body is never read": (
        lambda _: {"/metrics": gzipped(400)},
        20.0,
        (ServerError, " answered HTTP 400"),
    ),
}


@pytest.mark.parametrize("name", list(PAGES))
def test_each_raw_answer_of_a_metrics_page(name: str) -> None:
    routes, timeout, want = PAGES[name]
    hang = threading.Event()
    with HostileServer(routes(hang)) as s:  # type: ignore[arg-type]
        url = f"{s.url}/metrics"
        t0 = time.monotonic()
        try:
            got: object = fetch_text(url, timeout)
        except ServerError as e:
            got = (type(e), e.message.removeprefix(url))
        finally:
            hang.set()
        # the deadline is the timeout given, not httpx's own default of 5 s
        assert time.monotonic() - t0 < timeout + 2.5
    assert got == want


def info_page(size: int) -> bytes:
    """INFO as JSON, padded to exactly `size` bytes."""
    head = json.dumps({**INFO, "pad": ""}).encode()
    return json.dumps({**INFO, "pad": "x" * (size - len(head))}).encode()


@pytest.mark.parametrize(
    "routes, base, want",
    [
        # a base with a path (a proxy's prefix) and a trailing slash
        ({"/proxyX/server_info": answer(body=info_page(100))}, "/proxyX/", INFO),
        ({"/server_info": answer(body=info_page(4 << 20))}, "", INFO),  # at the 4 MiB cap
        ({"/server_info": answer(body=info_page((4 << 20) + 1))}, "", None),  # one byte over
    ],
)
def test_server_info_at_its_base_and_its_cap(
    routes: dict[str, object], base: str, want: object
) -> None:
    with HostileServer(routes) as s:  # type: ignore[arg-type]
        got = fetch_server_info(s.url + base, 5)
    assert (got if got is None else {"internal_states": got["internal_states"]}) == want


def test_the_page_is_asked_for_in_gzip_or_deflate_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx's own default Accept-Encoding names every decoder installed (`br` with brotli,
    `zstd` with zstandard), codings `read_body` refuses: the request names its own."""
    import httpx

    monkeypatch.setattr(httpx._client, "ACCEPT_ENCODING", "gzip, deflate, br, zstd")
    asked: list[str | None] = []

    def route(h) -> None:  # type: ignore[no-untyped-def]
        asked.append(h.headers.get("Accept-Encoding"))
        answer()(h)

    with HostileServer({"/metrics": route}) as s:
        assert fetch_text(f"{s.url}/metrics", 5) == "vllm:x 1\n"
    assert asked == ["gzip, deflate"]
