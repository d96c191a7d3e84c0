"""dflashctl fetch --check-upstream: has main moved off the pin, and which files changed.

The real huggingface_hub client against the local Hub server of test_fetch.py (repo info and
tree listings only: the tests prove no file is downloaded). The fixture's `tiny-dflash` is
pinned at c1; main is at c2, whose model.safetensors is a re-upload under the same name.
"""

from __future__ import annotations

import json

from test_fetch import REPO, config_bytes, drafter_config, fetch, hub, one_line_error, sha256  # noqa: F401


def no_downloads(hub) -> None:  # noqa: F811
    assert not [p for _, p in hub.server.requests if "/resolve/" in p]


def test_main_at_the_pinned_commit_is_no_drift(hub, monkeypatch, capsys):  # noqa: F811
    hub.repos.set_ref(REPO, "main", hub.c1)
    code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream")
    assert code == 0, err
    assert "no drift: main is the pinned commit" in out
    # one repo-info call, no listing, no download
    assert hub.server.requests == [("GET", f"/api/models/{REPO}/revision/main")]


def test_main_moved_without_touching_tracked_files_is_no_drift(hub, monkeypatch, capsys):  # noqa: F811
    c4 = hub.repos.commit(REPO, {"README.md": b"new readme"}, parent=hub.c1)
    code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] and report["moved"] and report["changes"] == []
    assert (report["pinned"], report["upstream"], report["pin_source"]) == (hub.c1, c4, "registry")
    assert report["tracked"] == 2
    no_downloads(hub)


def test_a_reupload_under_the_same_name_is_drift(hub, monkeypatch, capsys):  # noqa: F811
    # main is at c2: model.safetensors re-uploaded, config untouched
    code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream")
    assert code == 1, err
    assert "model.safetensors" in out and "changed" in out
    assert sha256(hub.weights)[:12] in out and sha256(hub.reupload)[:12] in out
    assert "DRIFT: 1 tracked file(s)" in out
    assert "config.json" not in out.split("files changed on main")[1]
    no_downloads(hub)

    code, out, err = fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream", "--json")
    assert code == 1, err
    report = json.loads(out)
    assert not report["ok"] and report["upstream"] == hub.c2
    [change] = report["changes"]
    assert change["name"] == "model.safetensors" and change["change"] == "changed"
    assert change["pinned"]["hash"] == sha256(hub.weights) == change["registry_sha256"]
    assert change["upstream"] == {
        "size": len(hub.reupload),
        "hash": sha256(hub.reupload),
        "kind": "sha256",
    }


def test_an_added_file_and_a_changed_config_on_a_branch(hub, monkeypatch, capsys):  # noqa: F811
    new_cfg = config_bytes(drafter_config(block_size=8))
    extra = {"model.safetensors.index.json": b"{}", "config.json": new_cfg}
    hub.repos.commit(REPO, extra, parent=hub.c1, branch="next")
    args = ["tiny-dflash", "--check-upstream", "--branch", "next", "--json"]
    code, out, err = fetch(monkeypatch, capsys, *args)
    assert code == 1, err
    changes = {c["name"]: c for c in json.loads(out)["changes"]}
    assert sorted(changes) == ["config.json", "model.safetensors.index.json"]
    assert changes["model.safetensors.index.json"]["change"] == "added"
    assert changes["model.safetensors.index.json"]["pinned"] is None
    assert changes["config.json"]["change"] == "changed"
    assert changes["config.json"]["upstream"]["kind"] == "git-sha1"
    # --include narrows what is tracked: the weights alone did not change on `next`
    code, out, err = fetch(monkeypatch, capsys, *args, "--include", "*.safetensors")
    assert code == 0, err and json.loads(out)["changes"] == []


def test_a_removed_file(hub, monkeypatch, capsys, tmp_path):  # noqa: F811
    # A repo outside the registry, pinned with --revision; a weight shard gone on main.
    repo = "test-org/shard-dflash"
    c1 = hub.repos.commit(
        repo, {"config.json": hub.config, "a.safetensors": b"1", "b.safetensors": b"2"}
    )
    folder = hub.repos.repo_dir(repo) / "commits"
    c2 = hub.repos.commit(repo, {"README.md": b"z"}, parent=c1)
    (folder / c2 / "b.safetensors").unlink()
    code, out, err = fetch(monkeypatch, capsys, repo, "--revision", c1, "--check-upstream")
    assert code == 1, err
    assert "b.safetensors" in out and "removed" in out


def test_the_pin_can_come_from_a_fetched_lock(hub, monkeypatch, capsys, tmp_path):  # noqa: F811
    dest = tmp_path / "d"
    assert fetch(monkeypatch, capsys, "tiny-dflash", "--dir", str(dest))[0] == 0
    (tmp_path / "empty" / "drafters").mkdir(parents=True)
    monkeypatch.setenv("DFLASHCTL_PLAYBOOKS", str(tmp_path / "empty"))  # registry forgets it
    code, out, err = fetch(
        monkeypatch, capsys, REPO, "--dir", str(dest), "--check-upstream", "--json"
    )
    assert code == 1, err
    report = json.loads(out)
    assert report["pin_source"] == "lock" and report["pinned"] == hub.c1


def test_unknown_repo_is_exit_2(hub, monkeypatch, capsys):  # noqa: F811
    err = one_line_error(
        *fetch(monkeypatch, capsys, "test-org/nope", "--revision", "a" * 40, "--check-upstream")
    )
    assert "repository test-org/nope not found" in err


def test_unknown_branch_and_nothing_pinned_are_exit_2(hub, monkeypatch, capsys):  # noqa: F811
    err = one_line_error(
        *fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream", "--branch", "nope")
    )
    assert "revision 'nope' not found" in err
    err = one_line_error(*fetch(monkeypatch, capsys, "test-org/other-dflash", "--check-upstream"))
    assert "nothing pins test-org/other-dflash" in err


def test_flags_that_make_no_sense_with_check_upstream(hub, monkeypatch, capsys):  # noqa: F811
    err = one_line_error(
        *fetch(monkeypatch, capsys, "tiny-dflash", "--check-upstream", "--host", "gpu1")
    )
    assert "--check-upstream does not take --host" in err
    err = one_line_error(*fetch(monkeypatch, capsys, "tiny-dflash", "--branch", "main"))
    assert "--branch needs --check-upstream" in err
    assert hub.server.requests == []
