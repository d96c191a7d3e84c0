"""Whole logs: fixtures per scenario, streaming in any chunking, binary input, big logs."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import pytest
from support.vllm_metrics import DATA, engine_line, spec_line, startup_lines, write_log

from dflashctl.errors import InputError
from dflashctl.metrics import MetricsOptions, analyze_chunks, analyze_source
from dflashctl.metrics.scanner import LogScanner

REF = datetime(2026, 12, 2)


def report_of(name: str, **opts):
    return analyze_source(str(DATA / name), MetricsOptions(**opts))


def kinds(report) -> list[str]:
    return [f.kind for f in report.findings]


def alarm_kinds(report) -> list[str]:
    return [f.kind for f in report.findings if f.severity == "alarm"]


def state_of(data: bytes, *, sizes=None, engine="auto", max_windows=2000):
    sc = LogScanner(engine, max_windows=max_windows)
    if sizes is None:
        sc.feed(data)
    else:
        rnd = random.Random(sizes)
        i = 0
        while i < len(data):
            n = rnd.randint(1, sizes)
            sc.feed(data[i : i + n])
            i += n
    sc.close()
    return sc, sc.state("t", REF)


def signature(st) -> list[tuple]:
    return [
        (
            w.timestamp_raw,
            w.stream,
            w.launch,
            w.mean_acceptance_length,
            w.accepted_tokens,
            w.drafted_tokens,
            tuple(w.per_position or ()),
            w.generation_throughput,
        )
        for w in st.windows
    ]


class TestScenarios:
    def test_healthy(self):
        r = report_of("vllm_034_healthy.log")
        assert r.ok and alarm_kinds(r) == [] and r.state.total_windows == 8
        assert r.state.engine == "vllm"
        assert r.state.spec_config and r.state.spec_config["method"] == "eagle3"
        assert all(w.stream == "engine 0" for w in r.state.windows)
        assert r.state.windows[0].generation_throughput == 251.0

    def test_collapsed(self):
        r = report_of("vllm_034_collapsed.log")
        assert not r.ok and alarm_kinds(r) == ["collapse"]
        assert r.state.latest is not None and r.state.latest.mean_acceptance_length == 1.03
        causes = r.findings[0].likely_causes
        assert "target/drafter mismatch" in causes[0].cause  # position 1 at 3 %
        assert causes[0].check.startswith("dflashctl verify-config")

    def test_field_story_decorated_prefix(self):
        r = report_of("vllm_decorated_field_story.log")
        assert alarm_kinds(r) == ["collapse", "collapse"]  # two processes, two streams
        assert r.state.latest is not None and r.state.latest.mean_acceptance_length == 1.12

    def test_real_vllm_032_cpu_excerpt(self):
        r = report_of("vllm_032_cpu_real.log")
        w = r.state.latest
        assert w is not None and w.mean_acceptance_length == 1.69 and w.num_drafts == 77
        assert r.ok  # 1.69 and 9.8 % are poor but not a collapse
        assert w.timestamp == datetime(2026, 12, 2, 12, 56, 32) or w.timestamp.month == 12

    def test_stale_restart_banner(self):
        r = report_of("vllm_stale_restart.log")
        assert alarm_kinds(r) == ["stale"]
        assert "earlier launch" in r.findings[0].message

    def test_stale_busy(self):
        r = report_of("vllm_stale_busy.log")
        assert alarm_kinds(r) == ["stale"]
        assert "metrics stopped" in r.findings[0].message

    def test_idle_after_traffic_is_not_stale(self):
        assert report_of("vllm_idle_not_stale.log").ok

    def test_one_busy_line_after_the_last_window_is_a_cut_excerpt_not_a_stale_log(self, tmp_path):
        """An excerpt pasted with the next interval's `Engine 000:` line but not its metrics
        line: the gap is long (a 60 s interval) yet nothing says metrics stopped. Two busy
        lines with no window between them do."""
        lines = []
        for i in range(5):
            lines += [engine_line(60 * i, running=4), spec_line(60 * i, mean=3.2)]
        one = write_log(tmp_path / "cut.log", [*lines, engine_line(600, running=4)])
        assert "stale" not in kinds(report_of(str(one)))
        two = write_log(tmp_path / "stopped.log", [*lines, engine_line(420, running=4),
                                                   engine_line(600, running=4)])  # fmt: skip
        assert alarm_kinds(report_of(str(two))) == ["stale"]

    def test_interleaved_processes_tracebacks_dp(self):
        r = report_of("vllm_interleaved_tracebacks.log")
        assert r.ok
        assert r.state.total_windows == 12
        assert {w.stream for w in r.state.windows} == {"engine 0", "engine 1"}
        e1 = [w for w in r.state.windows if w.stream == "engine 1"]
        assert all(w.generation_throughput == 280.0 for w in e1)
        # the ERROR line that quotes "SpecDecoding metrics:" is not a window
        assert all(w.mean_acceptance_length is not None for w in r.state.windows)

    def test_ansi(self):
        r = report_of("vllm_ansi.log")
        assert r.state.total_windows == 3 and r.ok
        assert r.state.windows[0].generation_throughput == 250.0

    @pytest.mark.parametrize(
        "name, fmt, mean",
        [
            ("vllm_v0.log", "vllm-v0", None),
            ("vllm_v1_early.log", "vllm-v1-early", None),
            ("vllm_0_8_3.log", "vllm-0.8.3", None),
            ("vllm_0_8_5.log", "vllm-0.8.5", 2.87),
        ],
    )
    def test_old_formats(self, name, fmt, mean):
        r = report_of(name)
        w = r.state.latest
        assert w is not None and w.format == fmt
        if mean is not None:
            assert w.mean_acceptance_length == mean

    def test_v0_series_is_per_window(self):
        r = report_of("vllm_v0.log")
        drafted = [w.drafted_tokens for w in r.state.windows]
        assert drafted == [3300, 8211 - 3300, 13311 - 8211]
        assert r.state.windows[0].cumulative and not r.state.windows[1].cumulative

    def test_0_8_3_collapse_by_rate_only(self):
        r = report_of("vllm_0_8_3.log")
        assert alarm_kinds(r) == ["collapse"] and "3.1 %" in r.findings[0].message

    def test_sglang(self):
        r = report_of("sglang_0523_healthy.log")
        assert r.ok and r.state.engine == "sglang" and r.state.total_windows == 6
        assert r.state.spec_config and r.state.spec_config["method"] == "DFLASH"
        assert any("0.5.11" in n for n in r.state.notes)
        r = report_of("sglang_collapsed.log")
        assert alarm_kinds(r) == ["collapse"]

    def test_sglang_variants(self):
        r = report_of("sglang_old_and_variants.log")
        assert r.state.total_windows == 3 and r.ok
        assert [w.format for w in r.state.windows] == ["sglang-accept-len", "sglang", "sglang"]
        assert r.state.unknown_fields == ["novel field"]

    def test_speculation_off(self):
        for name in ("sglang_no_spec.log", "vllm_no_spec.log"):
            r = report_of(name)
            assert alarm_kinds(r) == ["no_speculation"], name

    def test_no_metrics_is_a_warning(self):
        r = report_of("vllm_no_metrics.log")
        assert r.ok and kinds(r) == ["no_metrics"]

    def test_truncated_last_line_is_ignored(self):
        r = report_of("vllm_truncated_last_line.log")
        assert r.ok and r.state.total_windows == 3  # the partial collapsed line is not read
        assert any("incomplete last line" in n for n in r.state.notes)

    def test_binary_garbage(self):
        with pytest.raises(InputError, match="not a text log"):
            report_of("binary_garbage.bin")

    def test_garbage_bytes_inside_a_log_are_tolerated(self):
        r = report_of("vllm_with_garbage_bytes.log")
        assert r.state.total_windows == 2 and r.ok

    def test_engine_forced(self):
        r = report_of("vllm_034_healthy.log", engine="sglang")
        assert r.state.total_windows == 0  # no SGLang lines in a vLLM log


class TestInputs:
    def test_missing_directory_empty(self, tmp_path: Path):
        with pytest.raises(InputError, match="no such log file"):
            analyze_source(str(tmp_path / "nope.log"), MetricsOptions())
        with pytest.raises(InputError, match="directory"):
            analyze_source(str(tmp_path), MetricsOptions())
        empty = tmp_path / "empty.log"
        empty.write_bytes(b"")
        r = analyze_source(str(empty), MetricsOptions())
        assert r.state.total_windows == 0 and kinds(r) == ["no_metrics"]

    def test_utf16(self, tmp_path: Path):
        p = tmp_path / "u16.log"
        p.write_bytes("\n".join(startup_lines(0)).encode("utf-16"))
        with pytest.raises(InputError, match="UTF-16"):
            analyze_source(str(p), MetricsOptions())

    def test_mostly_binary_later_with_no_metrics(self, tmp_path: Path):
        p = tmp_path / "b.log"
        rnd = random.Random(3)
        p.write_bytes(b"hello\n" + bytes(rnd.getrandbits(8) for _ in range(200_000)))
        with pytest.raises(InputError, match="not a text log"):
            analyze_source(str(p), MetricsOptions())

    def test_unreadable(self):
        """As the user nobody (root reads anything; CI is root): one line, exit 2."""
        import shutil

        from support.unprivileged import run_unprivileged, world_dir

        d = world_dir()
        try:
            p = write_log(d / "x.log", [spec_line(0)])
            p.chmod(0)
            res = run_unprivileged(["metrics", str(p)], cwd=d)
            assert res.returncode == 2, res.stdout + res.stderr
            assert "cannot read" in res.stderr and "Traceback" not in res.stderr
        finally:
            shutil.rmtree(d)


class TestStreaming:
    @pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
    @pytest.mark.parametrize("sizes", [1, 7, 4096])
    def test_any_chunking_gives_the_same_result(self, name, sizes):
        data = (DATA / name).read_bytes()
        _, whole = state_of(data)
        _, chunked = state_of(data, sizes=sizes)
        assert signature(chunked) == signature(whole)
        assert chunked.total_windows == whole.total_windows
        assert chunked.launches == whole.launches

    def test_byte_lines_iterator_plugs_in(self):
        # what a remote (SSH) reader will hand over: an iterator of byte lines
        data = (DATA / "vllm_034_collapsed.log").read_bytes()
        lines = iter(data.splitlines(keepends=True))
        r = analyze_chunks(lines, source="remote:log", opts=MetricsOptions(), ref=REF)
        assert alarm_kinds(r) == ["collapse"] and r.state.source == "remote:log"

    def test_partial_line_completed_later(self):
        line = spec_line(0).encode() + b"\n"
        sc = LogScanner()
        sc.feed(line[:50])
        assert sc.new_windows() == []
        sc.feed(line[50:])
        assert len(sc.new_windows()) == 1

    def test_overlong_line_is_dropped(self):
        data = b"x" * (3 << 20) + b"\n" + spec_line(0).encode() + b"\n"
        sc, st = state_of(data, sizes=1 << 20)
        assert st.total_windows == 1 and sc.long_lines_dropped == 1

    def test_series_is_bounded(self):
        lines = []
        for i in range(300):
            lines += [engine_line(10 * i), spec_line(10 * i, per_position=[0.8, 0.6, 0.4])]
        data = ("\n".join(lines) + "\n").encode()
        _, st = state_of(data, max_windows=50)
        assert st.total_windows == 300 and len(st.windows) == 50
        assert any("keeps the latest 50" in n for n in st.notes)


def _big_log(n: int, seed: int = 0) -> tuple[bytes, list[tuple[float, int, float]]]:
    """A vLLM 0.34 log with filler between windows; returns it and (mean, drafted, gen) per
    window, to check the fast path against."""
    rnd = random.Random(seed)
    out = [*startup_lines(0)]
    expect = []
    for i in range(n):
        for _ in range(rnd.randint(0, 40)):
            out.append(
                f'INFO:     127.0.0.1:{rnd.randint(1, 65000)} - "POST /v1/x HTTP/1.1" 200 OK'
            )
        if rnd.random() < 0.1:
            out.append("Traceback (most recent call last):\n  File 'x'\nValueError: boom")
        pp = [round(rnd.uniform(0.3, 0.9), 3), round(rnd.uniform(0.1, 0.3), 3), 0.05]
        drafts = rnd.randint(100, 900)
        gen = float(rnd.randint(1, 900))
        out.append(engine_line(60 + 10 * i, gen=gen))
        line = spec_line(60 + 10 * i, per_position=pp, drafts=drafts)
        out.append(line)
        acc = round(sum(pp) * drafts)
        expect.append((round(1 + acc / drafts, 2), drafts * 3, gen))
    return ("\n".join(out) + "\n").encode(), expect


class TestFastPath:
    def test_every_window_of_a_long_log(self, monkeypatch):
        data, expect = _big_log(3000)
        slow = []
        original = LogScanner._hit

        def counting(self, *args):
            slow.append(1)
            return original(self, *args)

        monkeypatch.setattr(LogScanner, "_hit", counting)
        for sizes in (None, 65536, 333):
            slow.clear()
            _, st = state_of(data, sizes=sizes, max_windows=5000)
            if sizes != 333:  # tiny reads leave no room for the look-back: all slow
                assert len(slow) < 300  # most lines went through the fast loop
            got = [
                (w.mean_acceptance_length, w.drafted_tokens, w.generation_throughput)
                for w in st.windows
            ]
            assert got == expect
            assert st.launches == 1 and st.windows[-1].stream == "engine 0"

    def test_a_restart_without_a_version_line_unlocks_the_format(self):
        """After a restart (here announced only by `Starting vLLM`), the next launch may be
        another vLLM version printing another metrics format: both launches' windows count, and
        the version comes from the first launch's line until a new one says otherwise."""
        early = (
            "INFO 11-20 11:00:{s:02d} [metrics.py:48] Speculative metrics: Draft acceptance "
            "rate: 0.552, Number of accepted tokens: 331, Number of draft tokens: 600, "
        )
        lines = [*startup_lines(0, pid=1)]
        lines += [spec_line(60 + 10 * i) for i in range(3)]
        lines.append("INFO 11-20 10:59:00 [api_server.py:1] Starting vLLM API server on :8000")
        lines += [early.format(s=10 * i) for i in range(3)]
        # chunks smaller than a line, as a growing log is read; within one chunk the scan has
        # already passed the later lines when it meets the start-up line (docs/metrics.md)
        _, st = state_of(("\n".join(lines) + "\n").encode(), sizes=64)
        assert [w.format for w in st.windows][-1] != st.windows[0].format
        assert len(st.windows) == 6 and st.launches == 2
        assert st.engine_version == "0.34.0"

    def test_restart_in_the_middle_is_a_new_launch(self):
        lines = [*startup_lines(0, pid=1)]
        for i in range(20):
            lines += [engine_line(60 + 10 * i), spec_line(60 + 10 * i)]
        lines += startup_lines(600, pid=50)
        for i in range(5):
            lines += [engine_line(700 + 10 * i, pid=50), spec_line(700 + 10 * i, pid=50)]
        _, st = state_of(("\n".join(lines) + "\n").encode(), sizes=4096)
        assert st.launches == 2
        assert [w.launch for w in st.windows] == [0] * 20 + [1] * 5
        assert st.latest_launch_has_startup


class TestNeedleFinder:
    """The hot loop finds the locked needle by memchr of its rarest byte (metrics/needle.py):
    it must give exactly the positions `bytes.find` gives, whatever the log holds."""

    NEEDLE = b"SpecDecoding metrics: Mean acceptance length: "

    def test_same_positions_as_find_for_every_range(self):
        from dflashctl.metrics.needle import NeedleFinder

        rnd = random.Random(7)
        nd = b"abMab"
        for trial in range(60):
            # runs of the needle, overlapping near-misses, the rare byte alone, at the edges
            parts = [rnd.choice([nd, b"abM", b"Mab", b"M", b"ab", b"x", b"abMabMab", b"\n"])
                     for _ in range(rnd.randint(0, 14))]  # fmt: skip
            buf = b"".join(parts)
            for hay in (buf, bytearray(buf)):
                f = NeedleFinder(nd, hay[: rnd.randint(0, len(hay))])
                for start in range(len(hay) + 2):
                    for end in range(start, len(hay) + 3):
                        assert f.find(hay, start, end) == hay.find(nd, start, end), (
                            trial, hay, start, end
                        )  # fmt: skip

    def test_a_common_rare_byte_falls_back_to_find(self):
        from dflashctl.metrics.needle import SPARE_MISSES, NeedleFinder

        f = NeedleFinder(self.NEEDLE, self.NEEDLE.replace(b"M", b"") * 2 + b"M")
        assert f._byte == b"M"  # the least frequent byte of the sample
        hay = b"M" * 5000 + self.NEEDLE + b"MM x" + self.NEEDLE
        assert f.find(hay, 0, len(hay)) == 5000  # the misses ran out on the way: plain find
        assert f._byte is None and f._misses == SPARE_MISSES + 1
        assert f.find(hay, 5001, len(hay)) == hay.find(self.NEEDLE, 5001)

    def test_a_log_full_of_the_rare_byte_gives_the_same_windows(self, tmp_path: Path, monkeypatch):
        """Past the sample the rare byte (`M`) turns common (memory figures, model names, near
        misses): the finder falls back to `find`, and every window is still found, the same ones
        plain `find` finds."""
        from dflashctl.metrics.needle import NeedleFinder

        lines = [*startup_lines(0, pid=1)]
        for i in range(400):
            lines += [engine_line(60 + 10 * i), spec_line(60 + 10 * i, drafts=1000 + i)]
            if i >= 100:
                lines.append("(APIServer pid=1) INFO 11-20 10:00:00 [gpu.py:1] Model MiB M M M M")
            if i % 50 == 7:  # a near miss: the needle's head, then M, no line of metrics
                lines.append("(APIServer pid=1) INFO 11-20 10:00:00 [x.py:1] SpecDecoding metricsM")
        log = write_log(tmp_path / "m.log", lines)
        sc = LogScanner()
        sc.feed(log.read_bytes())
        assert sc._needle_finder is not None and sc._needle_finder._byte is None  # fell back
        fast = analyze_source(str(log), MetricsOptions())
        monkeypatch.setattr(
            NeedleFinder, "find", lambda self, buf, a, b: buf.find(self.needle, a, b)
        )
        plain = analyze_source(str(log), MetricsOptions())
        assert fast.state.total_windows == plain.state.total_windows == 400
        assert [w.num_drafts for w in fast.state.windows] == list(range(1000, 1400))
        assert fast.to_json() == plain.to_json()

    def test_a_short_first_sample_is_picked_again_from_a_longer_region(self):
        """The first fast scan can be a line or a small read (its sample: a few bytes, where every
        byte ties); the next, longer region picks the byte again from a full sample."""
        from dflashctl.metrics.needle import SAMPLE

        lines = [*startup_lines(0, pid=1)]
        for i in range(600):
            lines += [engine_line(60 + 10 * i), spec_line(60 + 10 * i)]
            lines.append('(APIServer pid=1) INFO:     10.0.0.1:5 - "POST /v1/chat HTTP/1.1" 200 OK')
        data = ("\n".join(lines) + "\n").encode()
        cut = data.index(b"SpecDecoding", data.index(b"SpecDecoding") + 1) + 400
        sc = LogScanner()
        sc.feed(data[:cut])
        first = sc._needle_finder
        assert first is not None and first.sampled < 1000
        sc.feed(data[cut:])
        f = sc._needle_finder
        assert f is not first and f.sampled == SAMPLE and f._byte == b"M" and f._misses == 0
        assert sc.total_windows == 600
