"""dflashctl fetch: the real huggingface_hub client against a Hub-compatible server on 127.0.0.1.

The server (tests/support/hub.py) serves repos the tests build on disk: a tiny DFlash drafter
whose weights are real safetensors files written with the safetensors library, in several
commits (the original, a re-upload of the weights under the same name, a stale config on a
branch). A temporary registry (`DFLASHCTL_PLAYBOOKS`) pins the original commit and its sha256s.
Nothing is mocked: `--host`'s copy runs against this machine's `LocalHost` here (TestHost) and
against a real sshd in test_fetch_host.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save
from support.cli import run_main
from support.hub import HubRepos, HubServer
from support.safetensors_files import dflash_tensors

from dflashctl.commands.fetch.remote import push_to_host
from dflashctl.commands.fetch.target import STAGING_NAME
from dflashctl.drafter.registry import LOCK_NAME
from dflashctl.errors import RemoteError
from dflashctl.hosts.host import LocalHost

REPO = "test-org/tiny-dflash"  # in the test registry as tiny-dflash, pinned at commit c1
OTHER = "test-org/other-dflash"  # not in the registry
GATED = "test-org/gated-dflash"
TOKEN = "hf_test_right_token"
SLIDING, FULL = "sliding_attention", "full_attention"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def drafter_config(**overrides: Any) -> dict[str, Any]:
    """A tiny DFlash drafter (2 layers, hidden 64) that verify-config passes."""
    cfg: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "attention_bias": False,
        "block_size": 4,
        "dflash_config": {"mask_token_id": 500, "target_layer_ids": [1, 4]},
        "dtype": "float16",
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 64,
        "intermediate_size": 128,
        "layer_types": [SLIDING, FULL],
        "max_position_embeddings": 4096,
        "max_window_layers": 2,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "num_target_layers": 6,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
        "sliding_window": 32,
        "tie_word_embeddings": False,
        "use_sliding_window": True,
        "vocab_size": 512,
    }
    cfg.update(overrides)
    return cfg


def config_bytes(cfg: dict[str, Any]) -> bytes:
    return (json.dumps(cfg, indent=2) + "\n").encode()


def tensors(seed: int) -> dict[str, np.ndarray]:
    """The drafter's tensor names and shapes (dflash-facts §7), seeded F16 values."""
    spec = dflash_tensors(
        layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, taps=2
    )
    rng = np.random.default_rng(seed)
    return {
        name: rng.standard_normal(shape).astype(np.float16) for name, (_, shape) in spec.items()
    }


def weights(seed: int) -> bytes:
    """Real safetensors bytes, written by the safetensors library."""
    return save(tensors(seed), metadata={"format": "pt"})


def sharded(seed: int) -> dict[str, bytes]:
    """The same weights as two shards and their index, as large checkpoints are published."""
    t = tensors(seed)
    names = sorted(t)
    parts = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    files = {
        shard: save({n: t[n] for n in ns}, metadata={"format": "pt"}) for shard, ns in parts.items()
    }
    index = {
        "metadata": {"total_size": sum(v.nbytes for v in t.values())},
        "weight_map": {n: shard for shard, ns in parts.items() for n in ns},
    }
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


STALE = drafter_config(
    dflash_config={"mask_token_id": 498, "target_layer_ids": [1, 5]},
    layer_types=[FULL, FULL],
)


class Hub:
    """The repos, the registry and the running server of one test."""

    def __init__(self, root: Path) -> None:
        self.repos = HubRepos(root / "hub")
        self.config = config_bytes(drafter_config())
        self.weights = weights(0)
        self.reupload = weights(1)
        base = {"config.json": self.config, "model.safetensors": self.weights, "README.md": b"x"}
        self.c1 = self.repos.commit(REPO, base)
        self.repos.set_ref(REPO, "v1", self.c1)
        # The weights re-uploaded under the same name: main moves to c2.
        self.c2 = self.repos.commit(REPO, {"model.safetensors": self.reupload}, parent=self.c1)
        # A stale config on a branch, weights untouched.
        self.c3 = self.repos.commit(
            REPO, {"config.json": config_bytes(STALE)}, parent=self.c1, branch="stale"
        )
        self.o1 = self.repos.commit(OTHER, base)
        self.o2 = self.repos.commit(OTHER, {"README.md": b"y"}, parent=self.o1, branch="dev")
        self.g1 = self.repos.commit(GATED, base)
        self.repos.gate(GATED, TOKEN)
        self.playbooks = root / "playbooks"
        self.write_registry()
        self.server = HubServer(root / "hub").start()

    def write_registry(self) -> None:
        drafters = self.playbooks / "drafters"
        drafters.mkdir(parents=True, exist_ok=True)
        (drafters / "tiny-dflash.yaml").write_text(
            f"""name: tiny-dflash
repo: {REPO}
revision: {self.c1}
kind: dflash
confidence: high
source: tests/test_fetch.py
files:
  - path: config.json
    sha256: {sha256(self.config)}
  - path: model.safetensors
    sha256: {sha256(self.weights)}
    size: {len(self.weights)}
architectures: [DFlashDraftModel]
model_type: qwen3
num_hidden_layers: 2
hidden_size: 64
num_attention_heads: 4
num_key_value_heads: 2
head_dim: 16
vocab_size: 512
block_size: 4
mask_token_id: 500
target_layer_ids: [1, 4]
layer_types: [{SLIDING}, {FULL}]
sliding_window: 32
target:
  repo: test-org/tiny-target
  num_hidden_layers: 6
  hidden_size: 64
  vocab_size: 512
"""
        )

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    h = Hub(tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("DFLASHCTL_PLAYBOOKS", str(h.playbooks))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)
    yield h
    h.server.stop()


def fetch(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    return run_main(monkeypatch, capsys, "fetch", *args)


def read_lock(directory: Path) -> dict[str, Any]:
    return json.loads((directory / LOCK_NAME).read_text())


def listing(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))


def one_line_error(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, `Error: ...` plus a hint on stderr, no traceback."""
    assert code == 2, err
    assert out == ""
    assert err.startswith("Error: "), err
    assert "Hint: " in err
    assert "Traceback" not in err
    return err


class TestPinned:
    def test_registry_pin_fetches_verifies_and_locks(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
        assert code == 0, err
        assert listing(dest) == ["config.json", LOCK_NAME, "model.safetensors"]
        assert (dest / "model.safetensors").read_bytes() == hub.weights
        lock = read_lock(dest)
        assert {k: lock[k] for k in ("repo", "revision", "files")} == {
            "repo": REPO,
            "revision": hub.c1,
            "files": {
                "config.json": sha256(hub.config),
                "model.safetensors": sha256(hub.weights),
            },
        }
        assert lock["fetched_at"].endswith("Z") and lock["ref"] is None
        assert lock["registry"] == "tiny-dflash"
        assert "config.json" in out and out.count("pinned") >= 2
        assert "verify-config: OK" in out
        # The pinned commit needs no repo-info call: the tree, then HEAD + GET per file.
        kinds = sorted(
            {
                (m, p.split("/")[5] if p.startswith("/api/") else "resolve")
                for m, p in hub.server.requests
            }
        )
        assert kinds == [("GET", "resolve"), ("GET", "tree"), ("HEAD", "resolve")]

    def test_fetch_again_verifies_and_touches_nothing(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        lock_before = (dest / LOCK_NAME).read_bytes()
        mtimes = {p: (dest / p).stat().st_mtime_ns for p in listing(dest)}
        hub.server.stop()  # no network from here on
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
        assert code == 0, err
        assert "in place: every file hashes to the lock; nothing downloaded" in out
        assert (dest / LOCK_NAME).read_bytes() == lock_before
        assert {p: (dest / p).stat().st_mtime_ns for p in listing(dest)} == mtimes

    def test_a_file_changed_on_disk_is_fetched_again_and_the_edit_kept(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        dest = tmp_path / "drafter"
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        (dest / "config.json").write_text('{"edited": true}\n')
        hub.server.requests.clear()
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
        assert code == 0, err
        assert (dest / "config.json").read_bytes() == hub.config
        backups = [p for p in listing(dest) if p.startswith("config.json.bak-")]
        assert len(backups) == 1
        assert (dest / backups[0]).read_text() == '{"edited": true}\n'
        assert all("model.safetensors" not in path for _, path in hub.server.requests)
        assert "changed or missing since the lock was written" in out

    def test_bytes_other_than_the_pin_are_refused_and_not_kept(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        hub.server.faults.tamper.add(
            "model.safetensors"
        )  # same size, same ETag: only sha256 sees it
        dest = tmp_path / "drafter"
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest)))
        assert (
            "model.safetensors: sha256 " in err
            and f"is not the pinned {sha256(hub.weights)}" in err
        )
        assert "corrupted mirror or a tampered download" in err
        assert not (dest / "model.safetensors").exists()
        assert not (dest / LOCK_NAME).exists()
        assert not dest.exists()  # created by this fetch: nothing of it lingers (issue 30 #7)
        dest.mkdir()  # a directory that was there before keeps no staging folder either
        one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest)))
        assert listing(dest) == []
        hub.server.faults.tamper.clear()
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        assert (dest / "model.safetensors").read_bytes() == hub.weights

    def test_main_moved_to_a_reupload_is_taken_only_with_allow_unpinned(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        # main moved to c2, whose model.safetensors is other bytes under the same name
        dest = tmp_path / "drafter"
        args = ["tiny-dflash", "--revision", "main", "--dir", str(dest)]
        err = one_line_error(*fetch(monkeypatch, capsys, *args))  # main resolves to c2 ...
        assert "model.safetensors: sha256" in err and "is not the pinned" in err  # ... the pin
        assert "re-uploaded model.safetensors" in err and "--allow-unpinned" in err
        assert not (dest / "model.safetensors").exists()  # the other bytes were not kept
        code, out, err = fetch(monkeypatch, capsys, *args, "--allow-unpinned")
        assert code == 0, err
        lock = read_lock(dest)
        assert (lock["revision"], lock["ref"]) == (hub.c2, "main")
        assert lock["files"]["model.safetensors"] == sha256(hub.reupload)
        assert "accepted" in out and "differs from the registry's pin" in out
        assert f"unpinned: main was at {hub.c2}" in out

    @pytest.mark.parametrize(
        ("lock", "needle"),
        [
            ('{"repo": "x", "revision"', "truncated JSON"),
            ('{"repo": "x"}', "not a dflashctl lock"),
            (
                json.dumps({"repo": REPO, "revision": "a" * 40, "files": {"../victim": "0" * 64}}),
                "'../victim' is not a plain path inside the directory",
            ),
        ],
        ids=["truncated", "not-ours", "escapes-the-directory"],
    )
    def test_a_broken_lock_is_a_one_line_error(
        self, hub, monkeypatch, capsys, tmp_path, lock, needle
    ):
        dest = tmp_path / "drafter"
        dest.mkdir()
        (dest / LOCK_NAME).write_text(lock)
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest)))
        assert needle in err
        assert listing(dest) == [LOCK_NAME] and hub.server.requests == []

    def test_a_reupload_under_the_same_name_is_caught_by_the_pin(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        hub.repos.set_ref(REPO, "v2", hub.c2)
        dest = tmp_path / "drafter"
        err = one_line_error(
            *fetch(monkeypatch, capsys, "tiny-dflash", "--revision", "v2", "--dir", str(dest))
        )
        assert "model.safetensors: sha256 " in err and "is not the pinned" in err
        assert "re-uploaded model.safetensors under the same name" in err
        assert f"fetch the pinned revision {hub.c1}" in err
        assert not (dest / "model.safetensors").exists()


class TestRevisions:
    def test_a_branch_is_resolved_to_its_commit_and_recorded(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        dest = tmp_path / "other"
        code, out, err = fetch(monkeypatch, capsys, OTHER, "--revision", "dev", "--dir", str(dest))
        assert code == 0, err
        lock = read_lock(dest)
        assert (lock["revision"], lock["ref"]) == (hub.o2, "dev")
        assert f"'dev' resolved to commit {hub.o2} (recorded in the lock)" in out
        assert ("GET", f"/api/models/{OTHER}/revision/dev") in hub.server.requests
        # Not in the registry: each file is checked against the hash the Hub publishes
        # (the LFS sha256 of the weights, the git blob id of config.json).
        report = json.loads(
            fetch(monkeypatch, capsys, OTHER, "--revision", hub.o2, "--dir", str(tmp_path / "o2"),
                  "--json")[1]
        )  # fmt: skip
        assert {f["name"]: f["status"] for f in report["files"]} == {
            "config.json": "hub",
            "model.safetensors": "hub",
        }

    def test_a_tag_of_the_registry_repo_at_the_pinned_commit(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        dest = tmp_path / "drafter"
        code, out, err = fetch(monkeypatch, capsys, REPO, "--revision", "v1", "--dir", str(dest))
        assert code == 0, err
        assert (read_lock(dest)["revision"], read_lock(dest)["ref"]) == (hub.c1, "v1")
        assert "pinned" in out

    def test_nothing_names_a_revision_outside_the_registry(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        dest = tmp_path / "other"
        err = one_line_error(*fetch(monkeypatch, capsys, OTHER, "--dir", str(dest)))
        assert "refusing to fetch an unpinned revision" in err
        assert "--allow-unpinned" in err and "--revision <40-hex commit, tag or branch>" in err
        assert hub.server.requests == [] and not dest.exists()

    def test_a_branch_named_by_revision_is_resolved_and_recorded(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        """One rule: --revision main is a branch like any other (fetch --help says so)."""
        dest = tmp_path / "other"
        args = [OTHER, "--revision", "main", "--dir", str(dest), "--json"]
        code, out, err = fetch(monkeypatch, capsys, *args)
        assert code == 0, err
        report = json.loads(out)
        assert (report["revision"], report["ref"]) == (hub.o1, "main")
        assert f"'main' resolved to commit {hub.o1} (recorded in the lock)" in report["notes"]
        assert read_lock(dest)["revision"] == hub.o1

    def test_allow_unpinned_says_which_commit_it_got(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "other"
        code, out, err = fetch(
            monkeypatch, capsys, OTHER, "--allow-unpinned", "--dir", str(dest), "--json"
        )
        assert code == 0, err
        report = json.loads(out)
        assert (report["revision"], report["ref"]) == (hub.o1, "main")
        assert f"unpinned: main was at {hub.o1} when fetched (--allow-unpinned)" in report["notes"]
        assert read_lock(dest)["revision"] == hub.o1


class TestTrustOnFirstUse:
    """A registry entry without a pinned revision: the first fetch takes main's commit, says
    so and locks it with the sha256s; later fetches stay on it until --revision moves them."""

    def _entry(self, hub) -> None:
        (hub.playbooks / "drafters" / "other-dflash.yaml").write_text(
            (hub.playbooks / "drafters" / "tiny-dflash.yaml")
            .read_text()
            .replace("name: tiny-dflash", "name: other-dflash")
            .replace(f"repo: {REPO}", f"repo: {OTHER}")
            .replace(f"revision: {hub.c1}", "revision: null")
        )

    def test_first_fetch_locks_main_later_ones_stay(self, hub, monkeypatch, capsys, tmp_path):
        self._entry(hub)
        dest = tmp_path / "other"
        code, out, err = fetch(monkeypatch, capsys, "other-dflash", "--dir", str(dest), "--json")
        assert code == 0, err
        report = json.loads(out)
        assert (report["revision"], report["ref"]) == (hub.o1, "main")
        assert any(
            n.startswith(f"trust on first use: the registry pins no revision of other-dflash; "
                         f"main is {hub.o1} now") for n in report["notes"]
        ), report["notes"]  # fmt: skip
        lock = read_lock(dest)
        assert lock["revision"] == hub.o1 and set(lock["files"]) >= {"config.json"}
        # main moves on; the next fetch into the directory stays on the locked commit
        hub.repos.commit(OTHER, {"README.md": b"z"}, parent=hub.o1)
        hub.server.requests.clear()
        code, out, err = fetch(monkeypatch, capsys, "other-dflash", "--dir", str(dest), "--json")
        assert code == 0, err
        again = json.loads(out)
        assert again["revision"] == hub.o1 and again["action"] == "verified"
        assert any(f"the lock pins {OTHER} at {hub.o1}" in n for n in again["notes"])
        assert hub.server.requests == []  # verified against the lock: no network
        # --revision main moves it: main's commit now, resolved and recorded
        args = ["other-dflash", "--revision", "main", "--dir", str(dest), "--json"]
        code, out, err = fetch(monkeypatch, capsys, *args)
        assert code == 0, err
        moved = json.loads(out)["revision"]
        assert moved != hub.o1 and read_lock(dest)["revision"] == moved


class TestHubErrors:
    @pytest.mark.parametrize(
        ("args", "needle"),
        [
            (["test-org/missing", "--revision", "a" * 40], "repository test-org/missing not found"),
            ([REPO, "--revision", "b" * 40], f"revision '{'b' * 40}' not found in {REPO}"),
            ([OTHER, "--revision", "no-such-branch"], "revision 'no-such-branch' not found"),
            ([GATED, "--revision", "main", "--allow-unpinned"], "is gated: downloads need"),
            (["tiny-dflsh"], "unknown drafter 'tiny-dflsh'"),
            (["tiny-dflash", "--revision", " "], "--revision is empty"),
        ],
        ids=["missing-repo", "missing-commit", "missing-branch", "gated", "typo", "empty-rev"],
    )
    def test_one_line_exit_2(self, hub, monkeypatch, capsys, tmp_path, args, needle):
        dest = tmp_path / "d"
        err = one_line_error(*fetch(monkeypatch, capsys, *args, "--dir", str(dest)))
        assert needle in err
        assert not dest.exists()  # nothing to resume from: no directory left behind

    def test_gated_with_the_wrong_token_then_the_right_one(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        dest = tmp_path / "gated"
        monkeypatch.setenv("HF_TOKEN", "hf_wrong")
        err = one_line_error(
            *fetch(monkeypatch, capsys, GATED, "--revision", hub.g1, "--dir", str(dest))
        )
        assert "gated and the token has no access to it (HTTP 403)" in err
        assert "accept the licence on" in err
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        code, _, err = fetch(monkeypatch, capsys, GATED, "--revision", hub.g1, "--dir", str(dest))
        assert code == 0, err
        assert read_lock(dest)["revision"] == hub.g1

    def test_gated_without_token_suggests_hf_token(self, hub, monkeypatch, capsys, tmp_path):
        err = one_line_error(
            *fetch(monkeypatch, capsys, GATED, "--revision", hub.g1, "--dir", str(tmp_path / "g"))
        )
        assert "(HTTP 401)" in err and "set HF_TOKEN" in err

    def test_server_error_leaves_nothing_under_a_final_name(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        hub.server.faults.error500.add("model.safetensors")
        dest = tmp_path / "drafter"
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest)))
        assert "the Hub answered HTTP 500" in err
        assert not (dest / "model.safetensors").exists() and not (dest / "config.json").exists()
        assert not (dest / LOCK_NAME).exists()

    def test_network_down(self, hub, monkeypatch, capsys, tmp_path):
        hub.server.stop()
        err = one_line_error(
            *fetch(monkeypatch, capsys, OTHER, "--revision", "dev", "--dir", str(tmp_path / "d"))
        )
        assert f"cannot reach {hub.url}" in err

    def test_a_download_cut_mid_file_resumes_and_verifies(self, hub, monkeypatch, capsys, tmp_path):
        hub.server.faults.cut_once.add("model.safetensors")
        dest = tmp_path / "drafter"
        code, _, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
        assert code == 0, err
        assert (dest / "model.safetensors").read_bytes() == hub.weights
        gets = [p for m, p in hub.server.requests if m == "GET" and p.endswith("model.safetensors")]
        assert len(gets) == 2  # cut, then resumed with a Range request


class TestOffline:
    def test_offline_with_everything_in_place(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        hub.server.requests.clear()
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))
        assert code == 0, err
        assert "nothing downloaded" in out and hub.server.requests == []

    def test_offline_from_the_shared_cache(self, hub, monkeypatch, capsys, tmp_path):
        """Downloaded earlier into HF_HOME (by any huggingface_hub tool), fetched here offline."""
        from huggingface_hub import snapshot_download

        snapshot_download(
            REPO,
            revision="v1",
            endpoint=hub.url,
            cache_dir=os.environ["HF_HOME"] + "/hub",
            allow_patterns=["config.json", "*.safetensors"],
        )
        hub.server.stop()
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        dest = tmp_path / "drafter"
        code, out, err = fetch(monkeypatch, capsys, REPO, "--revision", "v1", "--dir", str(dest))
        assert code == 0, err
        assert (dest / "model.safetensors").read_bytes() == hub.weights
        assert read_lock(dest)["revision"] == hub.c1
        assert "offline: 'v1' read from the cache's refs" in out

    def test_offline_with_nothing_on_disk(self, hub, monkeypatch, capsys, tmp_path):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        dest = tmp_path / "drafter"
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest)))
        assert "offline mode (HF_HUB_OFFLINE)" in err and "is not on disk" in err
        assert hub.server.requests == [] and not dest.exists()
        err = one_line_error(
            *fetch(monkeypatch, capsys, OTHER, "--revision", "dev", "--dir", str(dest))
        )
        assert "'dev' of test-org/other-dflash is not known here" in err


class TestInclude:
    def test_include_fetches_only_the_matching_files(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        code, _, err = fetch(
            monkeypatch, capsys, "tiny-dflash", "--include", "config.json", "--dir", str(dest)
        )
        assert code == 0, err
        assert listing(dest) == ["config.json", LOCK_NAME]
        lock = read_lock(dest)
        assert list(lock["files"]) == ["config.json"] and lock["include"] == ["config.json"]
        # Adding the weights later fetches only what is new.
        hub.server.requests.clear()
        code, _, err = fetch(
            monkeypatch, capsys, "tiny-dflash", "--include", "*.safetensors",
            "--include", "config.json", "--dir", str(dest),
        )  # fmt: skip
        assert code == 0, err
        assert sorted(read_lock(dest)["files"]) == ["config.json", "model.safetensors"]
        assert ("GET", f"/{REPO}/resolve/{hub.c1}/config.json") not in hub.server.requests

    def test_include_matching_nothing(self, hub, monkeypatch, capsys, tmp_path):
        err = one_line_error(
            *fetch(monkeypatch, capsys, "tiny-dflash", "--include", "*.gguf",
                   "--dir", str(tmp_path / "d"))
        )  # fmt: skip
        assert "matches *.gguf" in err


class TestVerdict:
    def test_json_report(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest), "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["ok"] is True and report["action"] == "downloaded"
        assert (report["repo"], report["revision"]) == (REPO, hub.c1)
        assert {f["name"]: f["status"] for f in report["files"]} == {
            "config.json": "pinned",
            "model.safetensors": "pinned",
        }
        assert report["verify"]["ok"] is True
        assert {"field", "status", "found", "expected", "hint"} <= set(
            report["verify"]["checks"][0]
        )
        again = json.loads(
            fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest), "--json")[1]
        )
        assert again["action"] == "verified" and again["downloaded"] == []

    def test_a_stale_config_arrives_verified_and_verify_config_names_it(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        """The bytes are what the branch holds (sha256 checked), but they are stale: exit 1."""
        dest = tmp_path / "drafter"
        code, out, err = fetch(
            monkeypatch, capsys, "tiny-dflash", "--revision", "stale", "--allow-unpinned",
            "--dir", str(dest),
        )  # fmt: skip
        assert code == 1, err
        assert "verify-config: problems in what arrived" in out
        for field in (
            "dflash_config.mask_token_id",
            "dflash_config.target_layer_ids",
            "layer_types",
        ):
            assert field in out
        code, out, _ = fetch(
            monkeypatch, capsys, "tiny-dflash", "--revision", "stale", "--allow-unpinned",
            "--dir", str(dest), "--json",
        )  # fmt: skip
        report = json.loads(out)
        assert code == 1 and report["ok"] is False and report["action"] == "verified"
        bad = {c["field"]: c for c in report["verify"]["checks"] if c["status"] == "mismatch"}
        assert bad["dflash_config.mask_token_id"]["found"] == 498
        assert bad["dflash_config.mask_token_id"]["expected"] == 500

    def test_switching_revision_replaces_files_and_removes_stale_ones(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        files = {"config.json": hub.config, **sharded(0)}
        commit = hub.repos.commit(OTHER, files, branch="sharded")
        dest = tmp_path / "other"
        code, out, err = fetch(monkeypatch, capsys, OTHER, "--revision", commit, "--dir", str(dest))
        assert code == 0, err
        assert listing(dest) == sorted([LOCK_NAME, *files])
        code, out, err = fetch(monkeypatch, capsys, OTHER, "--revision", hub.o1, "--dir", str(dest))
        assert code == 0, err
        # Stale shards would make engines (and verify-config) see two checkpoints.
        assert listing(dest) == ["config.json", LOCK_NAME, "model.safetensors"]
        for name in sharded(0):
            assert f"removed {name}" in out


class TestHost:
    def test_remote_dir_needs_host(self, hub, monkeypatch, capsys):
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--remote-dir", "/x"))
        assert "--remote-dir needs --host" in err

    @pytest.mark.parametrize(
        ("args", "needle"),
        [
            (["--remote-fetch"], "--remote-fetch needs --host"),
            (["--python", "python3"], "--python needs --remote-fetch"),
            (["--host", "gpu1", "--remote-fetch", "--dir", "d"], "--dir is a local directory"),
        ],
    )
    def test_remote_fetch_flags(self, hub, monkeypatch, capsys, args, needle):
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", *args))
        assert needle in err
        assert hub.server.requests == []

    class CorruptingHost(LocalHost):
        """This machine, where every upload arrives with a byte flipped, as a bad disk or a
        broken transfer would leave it: what a real host will not do on demand."""

        def upload(self, local: str | Path, path: str) -> None:
            super().upload(local, path)
            data = Path(path).read_bytes()
            Path(path).write_bytes(bytes([data[0] ^ 1]) + data[1:])

    def test_push_re_hashes_on_the_host(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        placed = tmp_path / "remote-home" / "models" / "tiny"
        with LocalHost() as host:
            copy = push_to_host(host, dest, str(placed))
            assert copy.uploaded == ["config.json", "model.safetensors"]
            assert copy.verified == read_lock(dest)["files"]
            assert listing(placed) == ["config.json", LOCK_NAME, "model.safetensors"]
            again = push_to_host(host, dest, str(placed))
        assert again.uploaded == [] and again.verified == copy.verified

    def test_push_refuses_a_copy_that_arrived_different(self, hub, monkeypatch, capsys, tmp_path):
        dest = tmp_path / "drafter"
        assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
        placed = tmp_path / "remote-home" / "models" / "tiny"
        with pytest.raises(RemoteError, match="arrived with other bytes than were sent"):
            push_to_host(self.CorruptingHost(), dest, str(placed))
        assert [p for p in listing(placed) if not p.startswith(STAGING_NAME)] == []


class TestCli:
    def test_help_does_not_import_huggingface_hub(self):
        code = (
            "import sys\n"
            "sys.argv = ['dflashctl', 'fetch', '--help']\n"
            "from dflashctl.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('HF=' + str('huggingface_hub' in sys.modules))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert "HF=False" in out.stdout and "--allow-unpinned" in out.stdout

    def test_console_script_reads_hf_endpoint_and_fails_in_one_line(self, hub, tmp_path):
        """A fresh process: HF_ENDPOINT is read by the real client at import time."""
        env = dict(os.environ, HF_ENDPOINT=hub.url)
        bin_dir = Path(sys.executable).parent
        dflashctl = bin_dir / "dflashctl"
        cmd = [str(dflashctl)] if dflashctl.exists() else [sys.executable, "-m", "dflashctl"]
        args = ["fetch", "test-org/missing", "--revision", "c" * 40, "--dir", str(tmp_path / "d")]
        r = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.startswith(f"Error: repository test-org/missing not found on {hub.url}")
        assert "Traceback" not in r.stderr
        assert ("GET", "/api/models/test-org/missing/tree/" + "c" * 40) in hub.server.requests


def test_piped_fetch_names_what_it_waits_for(tmp_path, monkeypatch):
    """An endpoint that accepts and never answers: piped, fetch says what it is waiting for
    (issue 18: 24.6 s of silence before "cannot reach"); HF_HUB_OFFLINE=1 does not wait."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_ETAG_TIMEOUT": "4",
           "HF_HUB_DOWNLOAD_TIMEOUT": "4", "HF_HOME": str(tmp_path / "hf")}  # fmt: skip
    env.pop("HF_HUB_OFFLINE", None)
    cmd = [sys.executable, "-m", "dflashctl", "fetch", REPO, "--revision", "v1", "--dir"]
    try:
        res = subprocess.run(
            [*cmd, str(tmp_path / "d1")], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        silent.close()
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"fetch: resolving {REPO}@v1 at http://127.0.0.1:{port} …" in res.stderr
    res = subprocess.run(
        [*cmd, str(tmp_path / "d2")], env={**env, "HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2 and "offline mode (HF_HUB_OFFLINE)" in res.stderr
    assert "fetch: resolving" not in res.stderr  # no wait to name


class TestSharedCache:
    """Without --dir: the shared Hugging Face cache (HF_HOME), as `hf download` does, so an
    engine given the hub id finds the files; the lock in $DFLASHCTL_HOME/locks/."""

    def test_files_land_where_an_engine_given_the_hub_id_looks(
        self, hub, monkeypatch, capsys, tmp_path
    ):
        from huggingface_hub import snapshot_download

        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["in_cache"] and report["action"] == "downloaded"
        assert {f["status"] for f in report["files"]} == {"pinned"}
        assert not (tmp_path / "tiny-dflash").exists()  # nothing written into the cwd
        # what vLLM does with `model: test-org/tiny-dflash`: the cache, no network
        hub.server.stop()
        found = Path(  # allow_patterns as vLLM's loader asks (it needs no README)
            snapshot_download(REPO, revision=hub.c1, local_files_only=True,
                              allow_patterns=["*.json", "*.safetensors"],
                              cache_dir=Path(os.environ["HF_HOME"]) / "hub")
        )  # fmt: skip
        assert found == Path(report["directory"])
        assert (found / "model.safetensors").read_bytes() == hub.weights
        lock = json.loads(Path(report["lock"]).read_text())
        assert Path(report["lock"]).is_relative_to(Path(os.environ["DFLASHCTL_HOME"]))
        assert lock["revision"] == hub.c1 and lock["directory"] == str(found)
        # the second fetch: verified in the cache (offline here: the server is gone)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        code, out, err = fetch(monkeypatch, capsys, "tiny-dflash")
        assert code == 0, err
        assert "in place: every file hashes to the lock" in out
        assert f"speculative config's model: {found}" in out

    def test_other_bytes_leave_nothing_in_the_cache(self, hub, monkeypatch, capsys, tmp_path):
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        hub.server.faults.tamper.add("model.safetensors")
        err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash"))
        assert "model.safetensors: sha256 " in err and "the file was not kept" in err
        with pytest.raises(LocalEntryNotFoundError):  # an engine cannot pick it up
            hf_hub_download(REPO, "model.safetensors", revision=hub.c1, local_files_only=True,
                            cache_dir=Path(os.environ["HF_HOME"]) / "hub")  # fmt: skip
        hub.server.faults.tamper.clear()
        code, _, err = fetch(monkeypatch, capsys, "tiny-dflash")  # a retry downloads anew
        assert code == 0, err

    def test_local_dir_is_dir(self, hub, monkeypatch, capsys, tmp_path):
        """`hf download --local-dir` spelling."""
        dest = tmp_path / "drafter"
        code, _, err = fetch(monkeypatch, capsys, "tiny-dflash", "--local-dir", str(dest))
        assert code == 0, err
        assert listing(dest) == ["config.json", LOCK_NAME, "model.safetensors"]

    def test_check_upstream_reads_the_cache_lock(self, hub, monkeypatch, capsys, tmp_path):
        self_other = hub.playbooks / "drafters" / "other-dflash.yaml"
        self_other.write_text(
            (hub.playbooks / "drafters" / "tiny-dflash.yaml")
            .read_text()
            .replace("name: tiny-dflash", "name: other-dflash")
            .replace(f"repo: {REPO}", f"repo: {OTHER}")
            .replace(f"revision: {hub.c1}", "revision: null")
        )
        assert fetch(monkeypatch, capsys, "other-dflash")[0] == 0  # trust on first use
        code, out, err = fetch(monkeypatch, capsys, "other-dflash", "--check-upstream", "--json")
        assert code == 0, err
        assert json.loads(out)["pinned"] == hub.o1
