"""The known-defects catalogue: it loads and validates, and each entry matches its condition and
not its near misses. Drafter weights are real safetensors files; versions are real strings."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.drafter_files import drafter_config, write_checkpoint, write_drafter

from dflashctl.defects.catalogue import load_catalogue, parse_catalogue
from dflashctl.defects.k_norm import read_k_norm
from dflashctl.defects.launch import from_argv
from dflashctl.defects.markdown import update_doc
from dflashctl.defects.match import DefectMatch, assess, likely_causes, match
from dflashctl.defects.predicates import PREDICATES, Facts
from dflashctl.errors import InputError

SLIDING, FULL = "sliding_attention", "full_attention"
V2 = "VLLM_USE_V2_MODEL_RUNNER"


def ids(matches: list[DefectMatch]) -> list[str]:
    return [m.defect.id for m in matches]


def one(facts: Facts, defect_id: str, **kw: bool) -> DefectMatch | None:
    found = [m for m in match(facts, **kw) if m.defect.id == defect_id]
    return found[0] if found else None


# ---- the catalogue itself -------------------------------------------------------------------


def test_catalogue_loads_with_the_required_entries():
    cat = load_catalogue()
    want = {
        "vllm-cpu-context-k-norm",
        "vllm-aux-layer-off-by-one",
        "vllm-swa-as-full-attention",
        "vllm-v1-mixed-sliding-full",
        "vllm-v1-top-level-target-layer-ids",
        "sglang-last-layer-capture",
    }
    assert want <= {d.id for d in cat.defects}
    assert str(cat.engines["vllm"].dflash_since) == "0.20.0"
    assert str(cat.engines["sglang"].dflash_since) == "0.5.11"
    for d in cat.defects:
        assert d.sources and d.fix and d.symptom and d.confirm
        assert all(c.name in PREDICATES for c in d.conditions)


def test_every_alarm_kind_mapped_to_effects_is_one_metrics_raises():
    """The catalogue maps `dflashctl metrics` finding kinds to defect effects: a kind it names
    must be one the rules produce (a misspelt kind would silently never match)."""
    import re

    import dflashctl.metrics.alarms as alarms
    from dflashctl.defects.catalogue import ALARM_EFFECTS

    kinds = set(re.findall(r'Finding\(\s*"([a-z_]+)"', Path(alarms.__file__).read_text("utf-8")))
    assert set(ALARM_EFFECTS) <= kinds


def test_unknown_bounds_stay_unknown():
    d = load_catalogue().get("vllm-aux-layer-off-by-one")
    assert d.versions.introduced is None and d.versions.fixed is None
    assert "40727" in (d.versions.fixed_by or "")
    assert d.versions.to_json()["fixed"] == "unknown"


GOOD = """
schema: 1
engines: {vllm: {dflash_since: "0.20.0", source: s}}
defects:
  - id: x
    title: t
    engine: vllm
    versions: {introduced: unknown, fixed: unknown}
    build: any
    runner: any
    conditions: [sliding_layers]
    severity: warning
    effect: low_acceptance
    symptom: s
    cause: c
    confirm: c
    fix: f
    sources: [s]
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("conditions: [sliding_layers]", "conditions: [no_such]", "unknown predicate 'no_such'"),
        ("fixed: unknown}", "fixed: 0.2}", "quote versions as strings"),
        ("fixed: unknown}", 'fixed: "banana"}', "'banana' is not a version"),
        (
            "{introduced: unknown, fixed: unknown}",
            '{introduced: "0.30", fixed: "0.20"}',
            "not after introduced",
        ),
        (
            "fixed: unknown}",
            'fixed: unknown, confirmed_affected: ["0.1"], introduced2: 1}',
            "introduced2",
        ),
        ("severity: warning", "severity: fatal", "'fatal' is not one of error, warning"),
        ("    sources: [s]", "    sources: [s]\n    colour: red", "colour: unknown key"),
        ("    fix: f\n", "", "fix: missing"),
        ("conditions: [sliding_layers]", "conditions: [{architecture: X}]", "takes a list"),
        ("schema: 1", "schema: 2", "not a schema"),
        ("defects:", "defects: [\n", "malformed YAML"),
    ],
)
def test_malformed_catalogue_is_one_line(old: str, new: str, message: str, tmp_path: Path):
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    with pytest.raises(InputError) as e:
        parse_catalogue(text, tmp_path / "defects.yaml")
    assert message in e.value.message
    assert "\n" not in e.value.message


def test_confirmed_affected_outside_the_range_is_refused(tmp_path: Path):
    text = GOOD.replace(
        "versions: {introduced: unknown, fixed: unknown}",
        'versions: {introduced: unknown, fixed: "0.30.0", confirmed_affected: ["0.31.0"]}',
    )
    with pytest.raises(InputError, match="outside"):
        parse_catalogue(text, tmp_path / "d.yaml")


def test_good_catalogue_parses_and_bad_version_in_facts_is_an_input_error(tmp_path: Path):
    cat = parse_catalogue(GOOD, tmp_path / "d.yaml")
    assert [d.id for d in cat.defects] == ["x"]
    with pytest.raises(InputError, match="not a version"):
        match(Facts("vllm", "latest"), cat)


# ---- matching, word for word: versions, build, runner, mitigation (issue 31) ----------------


def _cat(tmp_path: Path, versions: str, extra: str = "", build: str = "any", runner: str = "any"):
    text = GOOD.replace("{introduced: unknown, fixed: unknown}", versions)
    text = text.replace("build: any", f"build: {build}").replace("runner: any", f"runner: {runner}")
    text = text.replace("conditions: [sliding_layers]", "conditions: []")
    return parse_catalogue(
        text.replace("    sources: [s]\n", "    sources: [s]\n" + extra), tmp_path
    )


def _found(cat, facts: Facts) -> list[tuple[str, list[str], list[str]]]:
    return [
        (m.certainty, m.evidence, m.unchecked) for m in match(facts, cat, include_possible=True)
    ]


def test_version_build_and_runner_evidence(tmp_path: Path):
    v = '{introduced: "0.30.0", fixed: unknown, confirmed_affected: ["0.31.0"]}'
    cat = _cat(tmp_path / "d.yaml", v, build="cpu", runner="v1")
    runner = "runner v1: runner v1 (given)"
    assert _found(cat, Facts("vllm", "0.31.0", build="cpu", runner="v1")) == [
        ("confirmed", ["vllm 0.31.0: a release measured affected", "cpu build", runner], [])
    ]
    inside = "vllm 0.32.0 is inside the affected range (introduced 0.30.0; fixed unknown; "
    assert _found(cat, Facts("vllm", "0.32.0", build="cpu", runner="v1")) == [
        ("likely", [inside + "affected: 0.31.0)", "cpu build", runner], [])
    ]
    assert _found(cat, Facts("vllm", None, runner="v1")) == [
        ("possible", [runner], ["vllm version not known", "build not known"])
    ]
    for outside in (
        Facts("vllm", "0.32.0", build="gpu", runner="v1"),
        Facts("vllm", "0.32.0", build="cpu", runner="v2"),
        Facts("vllm", "0.29.9", build="cpu", runner="v1"),
        Facts("sglang", "0.5.11"),
    ):
        assert _found(cat, outside) == []


@pytest.mark.parametrize(
    ("version", "applies"), [("0.20.0", True), ("0.32.9", True), ("0.33.0", False), ("0.34", False)]
)
def test_the_fixed_release_and_after_are_not_affected(tmp_path: Path, version: str, applies: bool):
    unaffected = '{introduced: unknown, fixed: unknown, confirmed_unaffected: ["0.33.0"]}'
    for v in ('{introduced: unknown, fixed: "0.33.0"}', unaffected):
        found = _found(_cat(tmp_path / "d.yaml", v), Facts("vllm", version))
        assert [c for c, _e, _u in found] == (["likely"] if applies else [])


def test_before_dflash_support_is_not_affected(tmp_path: Path):
    cat = _cat(tmp_path / "d.yaml", "{introduced: unknown, fixed: unknown}")
    assert _found(cat, Facts("vllm", "0.19.1")) == []
    assert _found(cat, Facts("vllm", "0.20.0"))[0][0] == "likely"


def test_an_env_only_mitigation_and_likely_causes_text(tmp_path: Path):
    cat = _cat(tmp_path / "d.yaml", "{introduced: unknown, fixed: unknown}",
               '    mitigation: {env: {FIX_IT: "1"}}\n')  # fmt: skip
    [m] = match(Facts("vllm", "0.32.0", env={"FIX_IT": "1"}), cat)
    assert m.mitigated == "FIX_IT=1"
    assert likely_causes(Facts("vllm", "0.32.0", env={"FIX_IT": "1"}), "collapse", cat) == []
    assert likely_causes(Facts("vllm", "0.32.0"), "collapse", cat) == [
        ("known engine defect x: t. Fix: f", "c")
    ]
    assert likely_causes(Facts("vllm", None), "below_expected", cat) == [
        ("known engine defect x: t (not checked: vllm version not known). Fix: f", "c")
    ]
    assert likely_causes(Facts("vllm", "0.32.0"), "decay", cat) == []  # not its effect
    cpu = _cat(tmp_path / "d.yaml", "{introduced: unknown, fixed: unknown}", build="cpu")
    assert likely_causes(Facts("vllm", None), "collapse", cpu) == [
        ("known engine defect x: t (not checked: vllm version not known; build not known). "
         "Fix: f", "c")
    ]  # fmt: skip
    assert likely_causes(Facts("vllm", "0.32.0"), "no_such_alarm", cat) == []


def test_a_match_as_json(tmp_path: Path):
    cat = _cat(tmp_path / "d.yaml", "{introduced: unknown, fixed: unknown}")
    [m] = match(Facts("vllm", "0.32.0"), cat)
    assert m.to_json() == {
        "id": "x", "title": "t", "severity": "warning", "effect": "low_acceptance",
        "certainty": "likely",
        "evidence": [
            "vllm 0.32.0 is inside the affected range (introduced unknown (DFlash support from "
            "0.20.0); fixed unknown)"
        ],
        "unchecked": [], "mitigated": None, "symptom": "s", "confirm": "c", "fix": "f",
        "sources": ["s"],
    }  # fmt: skip


# ---- each predicate's answer and evidence, word for word (issue 31) -------------------------

S, F = SLIDING, FULL
ONLY_TOP = {**drafter_config(), "dflash_config": {}, "target_layer_ids": [0, 2]}
NO_IDS = {**drafter_config(), "dflash_config": {}}


def _no_ids(layers: int) -> dict:
    return {**drafter_config(layers=layers), "dflash_config": {}, "layer_types": [F] * layers}


def _windowed(types: list[str]) -> dict:
    return drafter_config(layers=len(types), layer_types=types, sliding_window=64,
                          use_sliding_window=True)  # fmt: skip


def _launch(**kw):
    from dflashctl.defects.launch import LaunchSettings

    return LaunchSettings(source="argv", **kw)


PREDICATE_CASES = [
    ("architecture", ["DFlashDraftModel"], {}, None, "no drafter config given"),
    ("architecture", ["DFlashDraftModel"], {"drafter_config": drafter_config()}, True,
     "drafter architecture DFlashDraftModel"),
    ("architecture", ["X"], {"drafter_config": drafter_config(architectures=[])}, False,
     "drafter architecture (none)"),
    ("k_norm_differs_between_layers", None, {}, None,
     "k_norm weights not read (no drafter directory)"),
    ("dflash_target_layer_ids", None, {"drafter_config": ONLY_TOP}, True,
     "layers from target_layer_ids [0, 2]"),
    ("dflash_target_layer_ids", None, {"drafter_config": NO_IDS}, False,
     "layers from no layer ids (taken as given)"),
    ("sliding_layers", None, {"drafter_config": _windowed([S, S, F, S])}, True,
     "layers 0–1 sliding (window 64), layer 2 full, layer 3 sliding (window 64)"),
    ("sliding_layers", None, {"drafter_config": drafter_config(layers=1)}, False, "layer 0 full"),
    ("sliding_layers", None, {"drafter_config": _no_ids(0)}, False, "no layers"),
    ("mixed_sliding_full", None, {"drafter_config": _windowed([S, F, F])}, True,
     "layer_types: 1 sliding, 2 full"),
    ("mixed_sliding_full", None, {"drafter_config": drafter_config()}, False,
     "layer_types: 0 sliding, 2 full"),
    ("mixed_sliding_full", None, {"drafter_config": _windowed([S, S])}, False,
     "layer_types: 2 sliding, 0 full"),
    ("top_level_target_layer_ids_only", None, {"drafter_config": ONLY_TOP}, True,
     "target_layer_ids [0, 2] only at the top level"),
    ("top_level_target_layer_ids_only", None, {"drafter_config": ONLY_TOP, "num_target_layers": 8},
     True, "target_layer_ids [0, 2] only at the top level; V1 captures its default layers "
     "[1, 3, 4] of the 8-layer target; ValueError: DFlash drafter expects 256 concatenated aux "
     "hidden features but received 384 (on the first request; /health still answers 200)"),
    ("top_level_target_layer_ids_only", None, {"drafter_config": {**_no_ids(3),
     "target_layer_ids": [0, 2, 4]}, "num_target_layers": 8}, True, "target_layer_ids [0, 2, 4] "
     "only at the top level; V1 captures its default layers [1, 3, 4] of the 8-layer target; "
     "same count: silently the wrong layers"),
    ("taps_differ_from_layers", None, {"drafter_config": NO_IDS}, False,
     "no layer ids or no layer count: fc sized by the layer count anyway"),
    ("taps_differ_from_layers", None, {"drafter_config": drafter_config()}, False,
     "2 taps, 2 drafter layers"),
    ("taps_differ_from_layers", None, {"drafter_config": drafter_config(layers=3,
     layer_types=[F] * 3)}, True, "2 taps, 3 drafter layers"),
    ("top_level_target_layer_ids_only", None, {"drafter_config": NO_IDS}, False,
     "the V1 runner reads the layer ids from nowhere"),
    ("top_level_target_layer_ids_only", None, {"drafter_config": drafter_config()}, False,
     "the V1 runner reads the layer ids from dflash_config.target_layer_ids (+1)"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": drafter_config(),
     "num_target_layers": 3}, True, "target_layer_ids [0, 2] with a 3-layer target: 2 is the "
     "last layer"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": drafter_config(),
     "num_target_layers": 4}, False, "target_layer_ids [0, 2] with a 4-layer target"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": drafter_config()}, None,
     "target_layer_ids [0, 2]; target layer count not given"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": {**ONLY_TOP, "target_layer_ids":
     [1, 3]}, "num_target_layers": 4}, True, "target_layer_ids [1, 3] with a 4-layer target: 3 "
     "is the last layer"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": {**drafter_config(),
     "dflash_config": {"target_layer_ids": [0, "x"]}}, "num_target_layers": 4}, False,
     "no target_layer_ids (the formula never picks the last layer)"),
    ("target_layer_id_is_last_layer", None, {"drafter_config": NO_IDS, "num_target_layers": 4},
     False, "no target_layer_ids (the formula never picks the last layer)"),
    ("vllm_metadata_missing", None, {}, None, "installed distributions not known"),
    ("vllm_metadata_missing", None, {"distributions": {"vllm_cpu": "0.32.0"}}, True,
     "vllm-cpu 0.32.0 installed, no `vllm` metadata"),
    ("vllm_metadata_missing", None, {"distributions": {"vllm-cpu": "0.32.0", "vllm": "0.32.0"}},
     False, "metadata under the name vllm present"),
    ("vllm_metadata_missing", None, {"distributions": {"torch": "2.13.0"}}, False, "no vllm-cpu"),
    ("cuda_addons_beside_cpu_torch", None, {"distributions": {}}, False,
     "torch not installed (not a CPU build)"),
    ("cuda_addons_beside_cpu_torch", None, {"distributions": {"torch": "2.13.0"}}, False,
     "torch 2.13.0 (not a CPU build)"),
    ("cuda_addons_beside_cpu_torch", None, {"distributions": {"torch": "2.13.0+cpu",
     "torchvision": "0.28.0", "torchaudio": "2.13.0"}}, True, "torch 2.13.0+cpu beside "
     "torchvision 0.28.0, torchaudio 2.13.0 (CUDA builds)"),
    ("cuda_addons_beside_cpu_torch", None, {"distributions": {"torch": "2.13.0+cpu",
     "torchaudio": "2.13.0"}}, True, "torch 2.13.0+cpu beside torchaudio 2.13.0 (CUDA builds)"),
    ("cuda_addons_beside_cpu_torch", None, {"distributions": {"torch": "2.13.0+cpu",
     "torchvision": "0.28.0+cpu"}}, False,
     "torch 2.13.0+cpu; no CUDA build of torchvision/torchaudio"),
    ("prefix_caching_on", None, {}, None, "the engine's launch flags not known"),
    ("prefix_caching_on", None, {"launch": _launch()}, None, "prefix caching: not known"),
    ("prefix_caching_on", None, {"launch": _launch(enable_prefix_caching=True)}, True,
     "prefix caching: True (argv)"),
    ("prefix_caching_on", None, {"launch": _launch(enable_prefix_caching=False)}, False,
     "prefix caching: False (argv)"),
    ("cuda_graphs_on", None, {"launch": _launch(enforce_eager=False)}, True,
     "enforce_eager: False (argv)"),
    ("cuda_graphs_on", None, {"launch": _launch(enforce_eager=True)}, False,
     "enforce_eager: True (argv)"),
    ("draft_sample_method", "greedy", {"launch": _launch(draft_sample_method="greedy")}, True,
     "draft_sample_method: greedy (argv)"),
    ("draft_sample_method", "greedy", {"launch": _launch(draft_sample_method="probabilistic")},
     False, "draft_sample_method: probabilistic (argv)"),
    ("tensor_parallel_at_least", 2, {}, None, "the engine's launch flags not known"),
    ("tensor_parallel_at_least", 2, {"launch": _launch()}, None, "tensor parallel size: not known"),
    ("tensor_parallel_at_least", 2, {"launch": _launch(tensor_parallel_size=1)}, False,
     "tensor parallel size 1"),
    ("tensor_parallel_at_least", 2, {"launch": _launch(tensor_parallel_size=2)}, True,
     "tensor parallel size 2"),
    ("tensor_parallel_at_least", "2", {"launch": _launch(tensor_parallel_size=3)}, True,
     "tensor parallel size 3"),
    ("spec_method", ["dflash"], {"launch": _launch(method="eagle3"),
     "drafter_config": drafter_config()}, False, "speculative method eagle3"),
    ("spec_method", ["dflash"], {"drafter_config": drafter_config()}, True,
     "speculative method dflash"),
    ("spec_method", ["dspark"], {"drafter_config": drafter_config(architectures=
     ["DSparkDraftModel"])}, True, "speculative method dspark"),
    ("spec_method", ["dflash"], {"drafter_config": drafter_config(architectures=
     ["Qwen3ForCausalLM"])}, None, "the speculative method not known"),
    ("spec_method", ["dflash"], {"drafter_config": drafter_config(architectures=[])}, None,
     "the speculative method not known"),
    ("spec_method", ["dflash"], {}, None, "the speculative method not known"),
    ("target_layer_ids_missing", None, {}, None, "no drafter config given"),
    ("target_layer_ids_missing", None, {"drafter_config": drafter_config()}, False,
     "layers from dflash_config.target_layer_ids [0, 2]"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(2), "num_target_layers": 8},
     True, "no target_layer_ids in the config; the fallback formula gives [1, 5]"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(1), "num_target_layers": 8},
     True, "no target_layer_ids in the config; the fallback formula gives [4]"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(8), "num_target_layers": 8},
     True, "no target_layer_ids in the config; the fallback formula gives "
     "[1, 2, 2, 3, 3, 4, 4, 5]"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(9), "num_target_layers": 8},
     True, "no target_layer_ids in the config"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(0), "num_target_layers": 8},
     True, "no target_layer_ids in the config"),
    ("target_layer_ids_missing", None, {"drafter_config": _no_ids(2)}, True,
     "no target_layer_ids in the config"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "arg", "facts", "holds", "text"), PREDICATE_CASES)
def test_each_predicates_answer(name: str, arg, facts: dict, holds: bool | None, text: str):
    from dflashctl.defects.predicates import Context, Outcome

    got = PREDICATES[name].fn(Context(Facts("vllm", "0.32.0", **facts)), arg)
    assert got == Outcome(holds, text)


def test_k_norm_answers_from_the_checkpoint(tmp_path: Path):
    import json

    from dflashctl.defects.k_norm import KNormFacts
    from dflashctl.defects.predicates import Context, Outcome

    p = PREDICATES["k_norm_differs_between_layers"].fn
    empty = KNormFacts({})
    assert p(Context(Facts("vllm", k_norm=empty)), None) == Outcome(False, empty.describe())
    (tmp_path / "config.json").write_text(json.dumps(drafter_config()))
    assert p(Context(Facts("vllm", drafter_dir=tmp_path)), None) == Outcome(
        None, f"{tmp_path}: no safetensors checkpoint found"
    )


@pytest.mark.parametrize(
    ("facts", "build", "runner", "why"),
    [(Facts("sglang", "0.5.11+cpu"), "cpu", None, "not vLLM"),
     (Facts("vllm", "0.32.0", runner="v2"), "gpu", "v2", "runner v2 (given)"),
     (Facts("vllm", "0.32.0+cpu"), "cpu", "v1",
      "the CPU build always runs V1 (V2 needs Triton with a CPU backend)"),
     (Facts("vllm", None, distributions={"vllm_cpu": "0.32.0"}, env={V2: " Yes "}), "cpu", "v1",
      f"the CPU build always runs V1 (V2 needs Triton with a CPU backend); {V2}= Yes  is ignored "
      "there"),
     (Facts("vllm", "0.32.0", env={V2: "true"}), "gpu", "v2", f"{V2}=true"),
     (Facts("vllm", "0.32.0", env={V2: "ON"}), "gpu", "v2", f"{V2}=ON"),
     (Facts("vllm", "0.32.0", env={V2: "0"}), "gpu", "v1", f"V1 (default; {V2} =0)"),
     (Facts("vllm", "0.32.0", env={V2: "no"}), "gpu", "v1", f"V1 (default; {V2} =no)"),
     (Facts("vllm", "0.32.0"), "gpu", "v1", f"V1 (default; {V2} not set)"),
     (Facts("vllm", None), None, "v1", f"V1 (default; {V2} not set)"),
     (Facts("sglang", None, distributions={"vllm-cpu": "1"}), None, None, "not vLLM")],
)  # fmt: skip
def test_the_build_and_the_runner(facts: Facts, build, runner, why):
    from dflashctl.defects.predicates import Context

    ctx = Context(facts)
    assert (ctx.build, ctx.runner, ctx.runner_why) == (build, runner, why)


def test_a_version_that_is_not_one():
    from dflashctl.defects.predicates import Context, infer_build, parse_version

    with pytest.raises(InputError) as e:
        parse_version("banana")
    assert e.value.message == "version 'banana' is not a version (PEP 440)"
    with pytest.raises(InputError) as e:
        Context(Facts("vllm", "latest"))
    assert e.value.message == "vllm version 'latest' is not a version (PEP 440)"
    assert infer_build(Facts("vllm", "latest")) is None


# ---- k_norm weights -------------------------------------------------------------------------


def test_read_k_norm_bf16_reads_only_the_k_norm_tensors(tmp_path: Path):
    d = write_drafter(tmp_path / "d", [0.96875, 1.5], layers=2)
    kn = read_k_norm(d)
    assert sorted(kn.layers) == [0, 1]
    assert kn.dtype == "BF16"
    assert kn.layers[0] == (0.96875,) * 32
    assert kn.differs
    assert kn.max_abs_diff() == pytest.approx(0.53125)
    assert "differ between layers" in kn.describe()


def test_bf16_read_through_torch_and_from_bytes_agree(tmp_path: Path):
    d = write_drafter(tmp_path / "d", [[0.5 + i / 64 for i in range(32)], [1.25] * 32])
    via_torch = read_k_norm(d, framework="pt")
    from_bytes = read_k_norm(d, framework="raw")
    assert via_torch.layers == from_bytes.layers
    assert from_bytes.layers[0][:3] == (0.5, 0.515625, 0.53125)


@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_read_k_norm_other_dtypes_through_numpy(tmp_path: Path, dtype: str):
    kn = read_k_norm(write_drafter(tmp_path / "d", [1.0, 1.0, 1.0], layers=3, dtype=dtype))
    assert kn.dtype == dtype and not kn.differs
    assert "equal in every layer" in kn.describe()


def test_read_k_norm_sharded_checkpoint(tmp_path: Path):
    d = tmp_path / "d"
    d.mkdir()
    write_checkpoint(d / "a.safetensors", {"layers.0.self_attn.k_norm.weight": ("BF16", [1.0] * 4)})
    write_checkpoint(d / "b.safetensors", {"layers.1.self_attn.k_norm.weight": ("BF16", [2.0] * 4)})
    (d / "model.safetensors.index.json").write_text(
        '{"weight_map": {"layers.0.self_attn.k_norm.weight": "a.safetensors",'
        ' "layers.1.self_attn.k_norm.weight": "b.safetensors"}}'
    )
    kn = read_k_norm(d)
    assert kn.means() == {0: 1.0, 1: 2.0}


def test_read_k_norm_broken_checkpoint_is_an_input_error(tmp_path: Path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(InputError):
        read_k_norm(d)


# ---- each entry: its condition, and its near misses ----------------------------------------


def test_k_norm_defect_on_cpu_build_with_differing_weights(tmp_path: Path):
    d = write_drafter(tmp_path / "d", [0.96875, 1.5])
    m = one(Facts("vllm", "0.32.0+cpu", drafter_dir=d), "vllm-cpu-context-k-norm")
    assert m is not None and m.certainty == "confirmed"
    assert any("cpu build" in e for e in m.evidence)
    assert any("differ between layers" in e for e in m.evidence)


@pytest.mark.parametrize(
    ("version", "k_norm", "arch"),
    [
        ("0.32.0+cpu", [1.5, 1.5], "DFlashDraftModel"),  # equal weights
        ("0.32.0", [0.96875, 1.5], "DFlashDraftModel"),  # a GPU build
        ("0.32.0+cpu", None, "DFlashDraftModel"),  # no k_norm tensors at all
        ("0.32.0+cpu", [0.96875, 1.5], "DFlash2DraftModel"),  # another model class
        ("0.19.1+cpu", [0.96875, 1.5], "DFlashDraftModel"),  # before vLLM had DFlash
    ],
)
def test_k_norm_defect_near_misses(tmp_path: Path, version: str, k_norm, arch: str):
    cfg = drafter_config(architectures=[arch])
    d = write_drafter(tmp_path / "d", k_norm, cfg=cfg)
    facts = Facts("vllm", version, drafter_dir=d)
    assert one(facts, "vllm-cpu-context-k-norm", include_possible=True) is None


def test_k_norm_defect_is_only_possible_without_weights():
    facts = Facts("vllm", "0.32.0+cpu", drafter_config=drafter_config())
    assert one(facts, "vllm-cpu-context-k-norm") is None
    m = one(facts, "vllm-cpu-context-k-norm", include_possible=True)
    assert m is not None and m.certainty == "possible"
    assert m.unchecked == ["k_norm weights not read (no drafter directory)"]


def test_k_norm_defect_mitigated_by_the_plugin_and_its_switch(tmp_path: Path):
    d = write_drafter(tmp_path / "d", [0.96875, 1.5])
    dists = {"dflashctl_vllm_plugin": "0.1.0", "vllm": "0.32.0+cpu"}
    on = Facts("vllm", "0.32.0+cpu", drafter_dir=d, distributions=dists)
    on.env = {"DFLASHCTL_VLLM_KNORM_FIX": "1"}
    m = one(on, "vllm-cpu-context-k-norm")
    assert (
        m is not None
        and m.mitigated == "dflashctl-vllm-plugin installed, DFLASHCTL_VLLM_KNORM_FIX=1"
    )
    off = Facts("vllm", "0.32.0+cpu", drafter_dir=d, distributions=dists)
    assert one(off, "vllm-cpu-context-k-norm").mitigated is None  # type: ignore[union-attr]


def test_off_by_one_before_the_fix_with_dflash_ids():
    cfg = drafter_config()
    m = one(Facts("vllm", "0.20.0", drafter_config=cfg), "vllm-aux-layer-off-by-one")
    assert m is not None and m.certainty == "likely"
    assert "dflash_config.target_layer_ids [0, 2]" in m.evidence[-1]


@pytest.mark.parametrize(
    ("version", "cfg"),
    [
        ("0.32.0", drafter_config()),  # has the fix
        ("0.34.0", drafter_config()),  # after a release read to be fixed
        ("0.19.1", drafter_config()),  # no DFlash yet
        ("0.20.0", drafter_config(eagle_aux_hidden_state_layer_ids=[1, 3])),  # ids taken as given
    ],
)
def test_off_by_one_near_misses(version: str, cfg):
    assert one(Facts("vllm", version, drafter_config=cfg), "vllm-aux-layer-off-by-one") is None


def _swa_cfg(types: list[str], **kw) -> dict:
    return drafter_config(
        layers=len(types),
        layer_types=types,
        sliding_window=64,
        use_sliding_window=True,
        **kw,
    )


def test_swa_as_full_before_the_fix():
    m = one(
        Facts("vllm", "0.25.0", drafter_config=_swa_cfg([SLIDING, SLIDING])),
        "vllm-swa-as-full-attention",
    )
    assert m is not None and m.certainty == "likely"
    assert "layers 0–1 sliding (window 64)" in m.evidence[-1]


@pytest.mark.parametrize(
    ("version", "types"), [("0.25.0", [FULL, FULL]), ("0.32.0", [SLIDING, SLIDING])]
)
def test_swa_as_full_near_misses(version: str, types: list[str]):
    facts = Facts("vllm", version, drafter_config=_swa_cfg(types))
    assert one(facts, "vllm-swa-as-full-attention") is None


def test_mixed_sliding_full_on_the_v1_runner():
    facts = Facts("vllm", "0.32.0+cpu", drafter_config=_swa_cfg([SLIDING, FULL]))
    facts.env = {"VLLM_USE_V2_MODEL_RUNNER": "1"}  # ignored by the CPU build
    m = one(facts, "vllm-v1-mixed-sliding-full")
    assert m is not None and m.certainty == "confirmed"
    assert any("is ignored there" in e for e in m.evidence)


@pytest.mark.parametrize(
    ("version", "types", "env"),
    [
        ("0.32.0+cpu", [SLIDING, SLIDING], {}),  # uniform sliding is served
        ("0.32.0", [SLIDING, FULL], {"VLLM_USE_V2_MODEL_RUNNER": "1"}),  # V2 runner on a GPU build
    ],
)
def test_mixed_sliding_full_near_misses(version: str, types: list[str], env: dict[str, str]):
    facts = Facts("vllm", version, drafter_config=_swa_cfg(types), env=env)
    assert one(facts, "vllm-v1-mixed-sliding-full") is None


def _top_level(ids_: list[int], layers: int = 2) -> dict:
    cfg = drafter_config(layers=layers, target_layer_ids=ids_)
    cfg["dflash_config"] = {"mask_token_id": 3}
    return cfg


def test_top_level_ids_on_v1_silently_use_the_wrong_layers():
    facts = Facts("vllm", "0.32.0+cpu", drafter_config=_top_level([0, 2]), num_target_layers=4)
    m = one(facts, "vllm-v1-top-level-target-layer-ids")
    assert m is not None and m.certainty == "confirmed"
    assert "V1 captures its default layers [1, 1, 0]" in m.evidence[-1]
    assert "silently the wrong layers" in m.evidence[-1]


def test_top_level_ids_on_v1_crash_when_counts_differ():
    cfg = _top_level([1, 9, 17, 25, 33], layers=5)
    facts = Facts("vllm", "0.32.0", drafter_config=cfg, num_target_layers=36)
    m = one(facts, "vllm-v1-top-level-target-layer-ids")
    assert m is not None
    assert "DFlash drafter expects 640 concatenated aux hidden features" in m.evidence[-1]


@pytest.mark.parametrize(
    ("cfg", "env"),
    [
        (drafter_config(), {}),  # ids inside dflash_config
        (_top_level([0, 2]), {"VLLM_USE_V2_MODEL_RUNNER": "1"}),  # V2 reads the top level
    ],
)
def test_top_level_ids_near_misses(cfg, env):
    facts = Facts("vllm", "0.32.0", drafter_config=cfg, env=env, num_target_layers=4)
    assert one(facts, "vllm-v1-top-level-target-layer-ids") is None


def test_fc_sized_by_layer_count_before_the_fix():
    cfg = drafter_config(layers=8)
    cfg["dflash_config"]["target_layer_ids"] = [1, 6, 11, 16, 21]
    m = one(Facts("vllm", "0.25.0", drafter_config=cfg), "vllm-fc-sized-by-layer-count")
    assert m is not None and m.evidence[-1] == "5 taps, 8 drafter layers"
    assert one(Facts("vllm", "0.32.0", drafter_config=cfg), "vllm-fc-sized-by-layer-count") is None
    same = drafter_config(layers=2)
    assert one(Facts("vllm", "0.25.0", drafter_config=same), "vllm-fc-sized-by-layer-count") is None


def test_v2_runner_zero_acceptance_only_with_the_v2_runner():
    v2 = Facts("vllm", "0.32.0", env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    m = one(v2, "vllm-v2-runner-zero-acceptance")
    assert m is not None and m.certainty == "likely"
    assert one(Facts("vllm", "0.32.0"), "vllm-v2-runner-zero-acceptance") is None
    cpu = Facts("vllm", "0.32.0+cpu", env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert one(cpu, "vllm-v2-runner-zero-acceptance") is None
    assert (
        one(
            Facts("vllm", "0.32.0", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}),
            "vllm-v2-runner-zero-acceptance",
        )
        is None
    )


def test_cpu_packaging_defects_from_the_distributions():
    bare = {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu", "torchvision": "0.28.0"}
    found = ids(match(Facts("vllm", "0.32.0", distributions=bare)))
    assert "vllm-cpu-dist-name" in found and "vllm-cpu-cuda-addons" in found
    fixed = {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu", "torch": "2.13.0+cpu"}
    found = ids(match(Facts("vllm", "0.32.0+cpu", distributions=fixed), include_possible=True))
    assert "vllm-cpu-dist-name" not in found and "vllm-cpu-cuda-addons" not in found
    cuda = {"vllm": "0.32.0", "torch": "2.13.0", "torchvision": "0.28.0"}
    assert ids(match(Facts("vllm", "0.32.0", distributions=cuda))) == []


def test_every_entry_not_matched_says_what_rules_it_out():
    fixed = {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu", "torch": "2.13.0+cpu"}
    a = assess(Facts("vllm", "0.21.0+cpu", distributions=fixed), include_possible=True)
    why = {r.defect.id: (r.by, r.why) for r in a.ruled_out}
    assert why["vllm-cuda-graphs-concurrency-illegal-address"] == (
        "version",
        "vllm 0.21.0+cpu is before 0.22.0 (introduced)",
    )
    assert why["vllm-cpu-dist-name"] == ("condition", "metadata under the name vllm present")
    matched = {m.defect.id for m in a.matches}
    engine_ids = {d.id for d in load_catalogue().for_engine("vllm")}
    assert matched | set(why) == engine_ids and not matched & set(why)  # each entry once
    assert a.matches == match(
        Facts("vllm", "0.21.0+cpu", distributions=fixed), include_possible=True
    )
    gpu = {
        r.defect.id: (r.by, r.why) for r in assess(Facts("vllm", "0.22.1", build="gpu")).ruled_out
    }
    assert gpu["vllm-cpu-context-k-norm"] == ("build", "build gpu, not cpu")


def test_sglang_last_layer():
    cfg = drafter_config(layers=5)
    cfg["dflash_config"]["target_layer_ids"] = [1, 9, 17, 25, 35]
    m = one(
        Facts("sglang", "0.5.11", drafter_config=cfg, num_target_layers=36),
        "sglang-last-layer-capture",
    )
    assert m is not None and m.certainty == "likely"
    assert m.evidence[-1].endswith("35 is the last layer")
    assert (
        one(
            Facts("sglang", "0.5.10", drafter_config=cfg, num_target_layers=36),
            "sglang-last-layer-capture",
        )
        is None
    )
    unknown_n = Facts("sglang", "0.5.11", drafter_config=cfg)
    m = one(unknown_n, "sglang-last-layer-capture", include_possible=True)
    assert m is not None and m.certainty == "possible"
    ok = drafter_config(layers=5)
    ok["dflash_config"]["target_layer_ids"] = [1, 9, 17, 25, 33]
    assert (
        one(
            Facts("sglang", "0.5.11", drafter_config=ok, num_target_layers=36),
            "sglang-last-layer-capture",
        )
        is None
    )


def test_other_engines_and_unknown_versions():
    assert match(Facts("local", "0.1.0", drafter_config=drafter_config())) == []
    loose = match(Facts("vllm", None, drafter_config=drafter_config()), include_possible=True)
    assert loose and all(m.certainty == "possible" for m in loose)
    assert all("vllm version not known" in m.unchecked for m in loose)


def test_errors_come_before_warnings():
    facts = Facts("vllm", "0.32.0+cpu", drafter_config=_swa_cfg([SLIDING, FULL]))
    sev = [m.defect.severity for m in match(facts, include_possible=True)]
    assert sev == sorted(sev, key=["error", "warning"].index)


def test_likely_causes_for_metrics_alarms(tmp_path: Path):
    causes = likely_causes(Facts("vllm", "0.32.0+cpu"), "collapse")
    assert any("vllm-cpu-context-k-norm" in c for c, _ in causes)
    assert all(check for _, check in causes)
    # a decay on 0.32.0: only prefix caching (not known from these facts, so "not checked")
    decay = likely_causes(Facts("vllm", "0.32.0"), "decay")
    assert [c.split(":")[0] for c, _ in decay] == [
        "known engine defect vllm-prefix-caching-poisons-draft-context"
    ]
    off = Facts("vllm", "0.32.0", launch=from_argv("vllm", ["--no-enable-prefix-caching"]))
    assert likely_causes(off, "decay") == []
    assert any(
        "vllm-swa-as-full-attention" in c
        for c, _ in likely_causes(Facts("vllm", "0.25.0"), "decay")
    )
    d = write_drafter(tmp_path / "d", [1.0, 1.0])
    assert not any(
        "k-norm" in c
        for c, _ in likely_causes(Facts("vllm", "0.32.0+cpu", drafter_dir=d), "collapse")
    )


def test_known_defects_doc_is_current(tmp_path: Path):
    doc = Path(__file__).resolve().parent.parent / "docs" / "known-defects.md"
    copy = tmp_path / "known-defects.md"
    copy.write_text(doc.read_text(encoding="utf-8"), encoding="utf-8")
    assert not update_doc(copy), "stale: run `python -m dflashctl.defects.markdown`"
    text = copy.read_text(encoding="utf-8")
    for d in load_catalogue().defects:
        assert f"### `{d.id}`" in text


def test_launch_settings_from_a_command_line():
    sc = '{"method":"dflash","draft_sample_method":"probabilistic"}'
    s = from_argv("vllm", ["vllm", "serve", "m", "--speculative-config", sc, "-tp", "4"])
    assert (s.method, s.draft_sample_method, s.tensor_parallel_size) == (
        "dflash",
        "probabilistic",
        4,
    )
    assert s.enable_prefix_caching is True and s.enforce_eager is False  # vLLM's defaults
    off = from_argv(
        "vllm", ["--no-enable-prefix-caching", "--enforce-eager", "--tensor_parallel_size=2"]
    )
    assert (off.enable_prefix_caching, off.enforce_eager, off.tensor_parallel_size) == (
        False,
        True,
        2,
    )
    sgl = from_argv(
        "sglang", ["--speculative-algorithm", "DFLASH", "--disable-radix-cache", "--tp-size", "8"]
    )
    assert (sgl.method, sgl.enable_prefix_caching, sgl.tensor_parallel_size) == ("dflash", False, 8)


def test_a_real_vllm_log_names_prefix_caching_for_a_decay():
    """vLLM 0.32.0's own start-up config line (the demo pair's recorded log): prefix caching on,
    the method dflash — the prefix-caching defect is a likely cause of a decay, stated plainly."""
    from support.vllm_metrics import DATA

    from dflashctl.metrics import MetricsOptions, analyze_source
    from dflashctl.metrics.analyze import known_defect_causes

    log = DATA.parent / "vllm032_demo" / "healthy.log"
    state = analyze_source(str(log), MetricsOptions()).state
    assert state.launch_fields["enable_prefix_caching"] == "True"
    causes = [c.cause for c in known_defect_causes(state, "decay")]
    assert len(causes) == 1 and "vllm-prefix-caching-poisons-draft-context" in causes[0]
    assert "not checked" not in causes[0]
