"""The tuner (bench/gpu/tune.py): with injected timings it records the fastest variant, which the kernel's
launcher then chooses; on the simulator it refuses to tune unless dry-running, and a dry run times and
records the real scan variants at their small sizes."""

import json

import pytest
from typer.testing import CliRunner

from bench.gpu import tune
from eggnog.kernels.core.tuning import TUNABLES, Tunable
from eggnog.runtime.errors import BadInput


@pytest.fixture
def toy():
    """A tunable whose launches do nothing and note which variant ran; its timings come from a table."""
    launched = []
    tunable = Tunable("toy_kernel", ("wide", "narrow", "tall"), "wide", (("job a", (4, 8)), ("job b", (16, 8))),
                      lambda variant, sizes: lambda: launched.append(variant), small=((1, 2),))
    yield tunable, launched
    TUNABLES.pop("toy_kernel")


def test_the_fastest_variant_is_recorded_and_then_chosen(toy, tmp_path):
    tunable, launched = toy
    path = str(tmp_path / "tuning.json")
    seconds = {"wide": 1.0, "narrow": 0.5, "tall": 0.9}
    timer = lambda launch: (launch(), seconds[launched[-1]])[1]  # noqa: E731
    rows = tune.tune({"toy_kernel": tunable}, "Some GPU", timer, repeats=3, quick=False, small=False, path=path)
    assert {(r["problem"], r["variant"]) for r in rows if r["chosen"]} == {("4x8", "narrow"), ("16x8", "narrow")}
    assert launched.count("tall") == 2 * (1 + 3)  # a warm-up launch and three timed ones a problem
    assert tunable.choose((4, 8), "Some GPU", path=path) == "narrow"
    assert tunable.choose((4, 8), "Another GPU", path=path) == "wide"  # per device name
    assert tunable.choose((5, 8), "Some GPU", path=path) == "wide"  # per problem size


def test_noise_keeps_the_default(toy, tmp_path):
    tunable, launched = toy
    path = str(tmp_path / "tuning.json")
    seconds = {"wide": 1.0, "narrow": 0.99, "tall": 1.2}
    timer = lambda launch: (launch(), seconds[launched[-1]])[1]  # noqa: E731
    rows = tune.tune({"toy_kernel": tunable}, "Some GPU", timer, repeats=2, quick=True, small=False, path=path)
    assert [r["variant"] for r in rows if r["chosen"]] == ["wide"]
    assert {r["problem"] for r in rows} == {"4x8"}  # --quick: the first problem only
    assert json.loads(open(path).read()) == {"Some GPU": {"toy_kernel": {"4x8": "wide"}}}


def test_unknown_kernels_are_refused():
    with pytest.raises(BadInput, match="--only names no tunable kernel no_such_kernel"):
        tune.tunables(["no_such_kernel"])
    assert {"scan_forward", "scan_backward"} <= set(tune.tunables())


def test_the_simulator_does_not_tune_without_dry_run(tmp_path):
    result = CliRunner().invoke(tune.app, ["--tuning-file", str(tmp_path / "t.json")])
    assert result.exit_code == 2
    assert "the tuner times kernels on a real GPU" in result.output
    assert not (tmp_path / "t.json").exists()


def test_a_dry_run_tunes_the_scan_at_its_small_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(tune, "write_result", lambda name, device, rows, extra: tmp_path / f"{name}.json")
    path = tmp_path / "t.json"
    result = CliRunner().invoke(tune.app, ["--only", "scan_forward", "--quick", "--dry-run",
                                           "--tuning-file", str(path)])
    assert result.exit_code == 0, result.output
    chosen = json.loads(path.read_text())["CUDA simulator"]["scan_forward"]
    assert list(chosen) == ["2x130x3"] and chosen["2x130x3"] in TUNABLES["scan_forward"].variants
