"""The pinned-drafter registry: shipped entries, the schema's errors, lookup and identification."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dflashctl.drafter import registry
from dflashctl.errors import RegistryError

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
INCOAI_REVISION = "015e795645c74b1a0eeef3b570031fb62e769bc5"

GOOD = """\
name: demo
repo: dflashctl/demo-drafter
revision: 0123456789abcdef0123456789abcdef01234567
kind: dflash
confidence: high
source: trained in this repository
files:
  - path: config.json
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    size: 1234
  - path: model.safetensors
    sha256: 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
architectures: [DFlashDraftModel]
num_hidden_layers: 4
hidden_size: 256
vocab_size: 4096
block_size: 8
mask_token_id: 4095
target_layer_ids: [1, 3, 5]
layer_types: [full_attention, full_attention, full_attention, full_attention]
expected_acceptance:
  min: 4.0
  max: 5.0
  source: measured on the held-out prompts
target:
  repo: null
  num_hidden_layers: 8
  hidden_size: 256
  vocab_size: 4096
"""


def _line(text: str) -> int:
    return GOOD.splitlines().index(text) + 1


def _playbooks(tmp_path: Path, text: str, name: str = "demo.yaml") -> Path:
    drafters = tmp_path / "playbooks" / "drafters"
    drafters.mkdir(parents=True, exist_ok=True)
    (drafters / name).write_text(text)
    return tmp_path / "playbooks"


def _error(tmp_path: Path, text: str, name: str = "demo.yaml") -> RegistryError:
    base = _playbooks(tmp_path, text, name)
    with pytest.raises(RegistryError) as info:
        registry.load_entries(base)
    assert "\n" not in info.value.message
    assert str(base / "drafters" / name) in info.value.message
    return info.value


class TestShippedEntries:
    def test_qwen36_27b_canonical_values(self):
        e = registry.get_entry("z-lab/Qwen3.6-27B-DFlash")
        assert e.mask_token_id == 248070
        assert e.target_layer_ids == (1, 16, 31, 46, 61)
        assert e.layer_types == ("sliding_attention",) * 4 + ("full_attention",)
        assert (e.sliding_window, e.block_size, e.num_hidden_layers) == (2048, 16, 5)
        assert (e.hidden_size, e.vocab_size) == (5120, 248320)
        assert (e.target.num_hidden_layers, e.target.hidden_size) == (64, 5120)
        assert e.target.vocab_size == 248320
        assert e.expected_acceptance is not None and e.expected_acceptance.min == 2.5

    def test_dflash2_entry_is_pinned(self):
        e = registry.get_entry("incoai/Qwen3.8-27B-DFlash2")
        assert e.revision == INCOAI_REVISION
        assert e.kind == "dflash2" and e.architectures == ("DFlash2DraftModel",)
        assert e.target_layer_ids == (5, 19, 33, 47, 61)
        assert e.is_causal is False
        assert dict(e.dflash_config)["selector_rank"] == 256

    def test_public_z_lab_drafters_are_there(self):
        repos = {e.repo for e in registry.all_entries()}
        for repo in (
            "z-lab/Qwen3-4B-DFlash-b16",
            "z-lab/Qwen3-8B-DFlash-b16",
            "z-lab/Qwen3.5-4B-DFlash",
            "z-lab/Qwen3.5-35B-A3B-DFlash",
            "z-lab/gpt-oss-20b-DFlash",
        ):
            assert repo in repos

    def test_no_invented_pins(self):
        """Only the revision our sources give; no sha256 until one is verified — except the
        embedded demo pair's, which must be the hashes of the files we ship."""
        import hashlib

        entries = registry.all_entries()
        assert {e.revision for e in entries if e.revision} == {INCOAI_REVISION}
        others = [e for e in entries if e.name != "demo"]
        assert all(f.sha256 is None for e in others for f in e.files)
        demo = registry.get_entry("demo")
        shipped = REPO / "dflashctl" / "assets" / "demo" / "drafter"
        assert {f.path for f in demo.files} == {p.name for p in shipped.iterdir()}
        for f in demo.files:
            data = (shipped / f.path).read_bytes()
            assert f.sha256 == hashlib.sha256(data).hexdigest() and f.size == len(data)

    def test_unconfirmed_values_are_marked(self):
        coder = registry.get_entry("qwen3-coder-30b-a3b-dflash")
        assert coder.is_unconfirmed("mask_token_id") and coder.vocab_size is None
        assert registry.get_entry("qwen3.5-27b-dflash").is_unconfirmed("num_hidden_layers")

    def test_entries_are_internally_consistent(self):
        for e in registry.all_entries():
            if e.layer_types is not None:
                assert len(e.layer_types) == e.num_hidden_layers, e.name
            if e.target_layer_ids and e.target.num_hidden_layers:
                assert max(e.target_layer_ids) < e.target.num_hidden_layers, e.name
            assert e.source_file is not None and e.source_file.stem == e.name


class TestLookup:
    @pytest.mark.parametrize(
        "name", ["qwen3.6-27b-dflash", "z-lab/Qwen3.6-27B-DFlash", "Qwen3.6-27B-DFlash"]
    )
    def test_names(self, name: str):
        assert registry.get_entry(name).repo == "z-lab/Qwen3.6-27B-DFlash"

    def test_unknown_name_suggests_close_ones(self):
        with pytest.raises(RegistryError) as info:
            registry.get_entry("qwen3.6-27b")
        assert info.value.message == "unknown drafter 'qwen3.6-27b'"
        assert "qwen3.6-27b-dflash" in (info.value.hint or "")

    def test_playbooks_found_in_a_checkout(self):
        assert registry.playbooks_dir() == REPO / "playbooks"

    def test_playbooks_found_when_installed(self, tmp_path: Path):
        """The wheel carries playbooks/ as dflashctl/_playbooks (pyproject force-include)."""
        site = tmp_path / "site"
        shutil.copytree(
            REPO / "dflashctl", site / "dflashctl", ignore=shutil.ignore_patterns("engine")
        )
        shutil.copytree(REPO / "playbooks", site / "dflashctl" / "_playbooks")
        code = (
            "from dflashctl.drafter import registry as r; "
            "print(r.playbooks_dir()); print(r.get_entry('qwen3.6-27b-dflash').repo)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert out == [str(site / "dflashctl" / "_playbooks"), "z-lab/Qwen3.6-27B-DFlash"]


class TestSchema:
    def test_a_demo_entry_with_hashes_and_a_range_loads(self, tmp_path: Path):
        (entry,) = registry.load_entries(_playbooks(tmp_path, GOOD))
        assert entry.files[0].sha256 and entry.files[0].size == 1234
        assert entry.expected_acceptance is not None
        assert (entry.expected_acceptance.min, entry.expected_acceptance.max) == (4.0, 5.0)
        assert registry.get_entry("demo", tmp_path / "playbooks") == entry

    def test_unknown_key_names_file_line_and_key(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("block_size: 8", "blok_size: 8"))
        assert f":{_line('block_size: 8')}: key 'blok_size': unknown key" in e.message
        assert e.hint == "did you mean 'block_size'?"

    def test_unknown_nested_key(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("  hidden_size: 256", "  hidden: 256"))
        assert "key 'target.hidden': unknown key" in e.message

    def test_wrong_type(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("num_hidden_layers: 4", "num_hidden_layers: four"))
        line = _line("num_hidden_layers: 4")
        assert f":{line}: key 'num_hidden_layers': must be an integer, found 'four'" in e.message

    def test_bool_is_not_an_integer(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("mask_token_id: 4095", "mask_token_id: true"))
        assert "key 'mask_token_id': must be an integer" in e.message

    @pytest.mark.parametrize(
        "revision",
        [
            "0123456789abcdef",  # short
            "0123456789ABCDEF0123456789ABCDEF01234567",  # upper case is not how git prints it
            "main",
            "0123456789abcdef0123456789abcdef0123456g",
        ],
    )
    def test_bad_revision(self, tmp_path: Path, revision: str):
        text = GOOD.replace("0123456789abcdef0123456789abcdef01234567", revision)
        e = _error(tmp_path, text)
        line = _line("revision: 0123456789abcdef0123456789abcdef01234567")
        assert f":{line}: key 'revision': must be a 40-hex commit id or null" in e.message

    def test_bad_sha256(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("60303ae22b998861", "xyz"))
        assert "key 'files.1.sha256': must be a 64-hex sha256" in e.message

    def test_bad_layer_type_and_length(self, tmp_path: Path):
        e = _error(
            tmp_path, GOOD.replace("[full_attention, full_attention, full", "[full, full, full")
        )
        assert "key 'layer_types'" in e.message
        text = GOOD.replace("num_hidden_layers: 4", "num_hidden_layers: 5")
        e = _error(tmp_path, text)
        assert "has 4 entries but num_hidden_layers is 5" in e.message

    def test_cross_field_rules(self, tmp_path: Path):
        e = _error(
            tmp_path, GOOD.replace("target_layer_ids: [1, 3, 5]", "target_layer_ids: [1, 3, 8]")
        )
        assert "outside 0..7" in e.message
        e = _error(tmp_path, GOOD.replace("mask_token_id: 4095", "mask_token_id: 4096"))
        assert "not below vocab_size 4096" in e.message
        e = _error(tmp_path, GOOD.replace("min: 4.0", "min: 6.0"))
        assert "min <= max" in e.message

    def test_unconfirmed_must_name_a_field(self, tmp_path: Path):
        e = _error(tmp_path, GOOD + "unconfirmed: [mask_token]\n")
        assert "key 'unconfirmed.0'" in e.message and e.hint == "did you mean 'mask_token_id'?"

    def test_missing_required_key(self, tmp_path: Path):
        e = _error(tmp_path, GOOD.replace("kind: dflash\n", ""))
        assert "missing required key 'kind'" in e.message

    def test_name_must_match_the_file(self, tmp_path: Path):
        e = _error(tmp_path, GOOD, name="other.yaml")
        assert "differs from the file name" in e.message

    def test_not_yaml_and_empty(self, tmp_path: Path):
        e = _error(tmp_path, "name: [unclosed\nrepo: x\n")
        assert "not valid YAML" in e.message
        e = _error(tmp_path, "")
        assert "empty file" in e.message
        e = _error(tmp_path, "- just\n- a list\n")
        assert "must be a mapping" in e.message

    def test_duplicate_repo(self, tmp_path: Path):
        _playbooks(tmp_path, GOOD)
        other = GOOD.replace("name: demo", "name: demo2")
        e = _error(tmp_path, other, name="demo2.yaml")
        assert "already defined" in e.message


def _cfg(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


class TestIdentify:
    def test_published_and_stale_configs_are_identified_by_structure(self):
        for name in ("qwen3.6-27b-dflash", "qwen3.6-27b-dflash-stale"):
            found = registry.identify_explained(_cfg(name))
            assert found.entry is not None and found.entry.name == "qwen3.6-27b-dflash"
            assert found.how.startswith("structure: architectures, hidden_size")

    def test_an_entry_with_unconfirmed_identity_is_never_guessed(self):
        """Qwen3.5-27B shares the structure, but its layer count is unconfirmed."""
        cfg = _cfg("qwen3.6-27b-dflash")
        cfg["intermediate_size"] = 12345  # contradicts Qwen3.6-27B's confirmed value
        assert registry.identify(cfg) is None

    def test_ambiguous_structure_names_the_candidates(self):
        cfg = {
            "architectures": ["DFlashDraftModel"],
            "hidden_size": 2048,
            "num_hidden_layers": 6,
            "vocab_size": 248320,
        }
        found = registry.identify_explained(cfg)
        assert found.entry is None
        assert set(found.candidates) == {
            "z-lab/Qwen3.5-35B-A3B-DFlash",
            "z-lab/Qwen3.6-35B-A3B-DFlash",
        }

    def test_lock_file_and_hub_cache_path(self, tmp_path: Path):
        cfg = {"architectures": ["DFlashDraftModel"], "hidden_size": 2048, "num_hidden_layers": 6}
        lock = {"repo": "z-lab/Qwen3.6-35B-A3B-DFlash", "revision": "0" * 40}
        assert registry.identify(cfg, lock).name == "qwen3.6-35b-a3b-dflash"
        snap = tmp_path / "models--z-lab--Qwen3.5-35B-A3B-DFlash" / "snapshots" / ("a" * 40)
        snap.mkdir(parents=True)
        found = registry.identify(cfg, path=snap / "config.json")
        assert found is not None and found.name == "qwen3.5-35b-a3b-dflash"

    def test_a_directory_name_is_ignored_when_the_structure_contradicts_it(self, tmp_path: Path):
        folder = tmp_path / "Qwen3.6-27B-DFlash"
        folder.mkdir()
        cfg = _cfg("qwen3.6-27b-dflash")
        assert registry.identify(cfg, path=folder).name == "qwen3.6-27b-dflash"
        cfg.update(hidden_size=4096, num_attention_heads=32)
        assert registry.identify(cfg, path=folder) is None

    def test_unknown_drafter(self):
        assert registry.identify({"architectures": ["DFlashDraftModel"], "hidden_size": 7}) is None
        assert registry.identify({}) is None


def test_registry_readme_describes_the_demo_gap():
    """No stand-in demo entry: the README says where it goes and what it must carry."""
    text = (REPO / "playbooks" / "drafters" / "README.md").read_text()
    assert "demo.yaml" in text and "sha256" in text
    demo = REPO / "playbooks" / "drafters" / "demo.yaml"
    if demo.exists():  # once the trained pair lands, its entry pins every file
        entry = registry.get_entry("demo")
        assert entry.files and all(f.sha256 for f in entry.files)
        assert entry.expected_acceptance is not None
