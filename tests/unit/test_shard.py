"""Sharding one sweep over the nodes: the assignment, the plan (spec field, -e shard, one host's own plan)
and the merged report (reference per node, node factor, out of line, normalised ranking)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from report_trees import P260, level, manifest, variant

from serve_system.cli import main
from serve_system.experiment import shard as shardmod
from serve_system.experiment.manifest import Manifest
from serve_system.experiment.spec.messages import SpecError
from serve_system.experiment.spec.reader import load_spec
from serve_system.node import plans, records
from serve_system.results import intervals as iv
from serve_system.results import report
from serve_system.results import shard as shardres

VARIANTS = ["base", "a", "b", "c", "d", "e"]


# ------------------------------------------------------------------------------------ the assignment

def test_every_candidate_once_and_the_reference_everywhere() -> None:
    s = shardmod.assign(VARIANTS, ["n2", "n1"], "base")
    assert s.hosts == ["n1", "n2"]  # name order, whatever the order given
    dealt = [c for cs in s.assignment.values() for c in cs]
    assert sorted(dealt) == ["a", "b", "c", "d", "e"] and len(dealt) == len(set(dealt))
    assert [len(cs) for cs in s.assignment.values()] == [3, 2]  # equal costs: round-robin, first host first
    for h in s.hosts:
        assert s.variants_of(h)[0] == "base" and s.variants_of(h)[1:] == s.assignment[h]
        assert s.assignment[h] == sorted(s.assignment[h], key=VARIANTS.index)
    assert {s.host_of(c) for c in "abcde"} == {"n1", "n2"} and s.host_of("base") is None
    # deterministic: same inputs, same deal; the seed only reorders candidates of equal cost
    assert shardmod.assign(VARIANTS, ["n1", "n2"], "base") == s
    assert sorted(map(len, shardmod.assign(VARIANTS, ["n1", "n2"], "base", seed="x").assignment.values())) \
        == [2, 3]


def test_a_grid_factor_does_not_line_up_with_the_nodes() -> None:
    grid = ["base", "d100_i1", "d100_i2", "d2000_i1", "d2000_i2"]
    spec_order = {h: cs for h, cs in shardmod.assign(grid, ["n1", "n2"], "base").assignment.items()}
    seeded = shardmod.assign(grid, ["n1", "n2"], "base", seed="sharded").assignment
    # some seed lines i1/i2 up with the nodes; the experiment's name here does not, and every node
    # still gets two candidates
    assert [len(cs) for cs in seeded.values()] == [2, 2]
    assert {c[-2:] for c in seeded["n1"]} == {"i1", "i2"}
    assert sorted(c for cs in spec_order.values() for c in cs) == grid[1:]


def test_longest_first_to_the_least_loaded_host() -> None:
    costs = {"base": 10, "a": 50, "b": 40, "c": 30, "d": 20, "e": 10}
    s = shardmod.assign(VARIANTS, ["n1", "n2", "n3"], "base", costs)
    assert s.assignment == {"n1": ["a"], "n2": ["b", "e"], "n3": ["c", "d"]}
    loads = [sum(costs[c] for c in cs) for cs in s.assignment.values()]
    assert loads == [50, 50, 50]  # round-robin in cost order would give 70, 50, 30


def test_more_hosts_than_candidates_and_bad_input() -> None:
    s = shardmod.assign(["base", "a"], ["n1", "n2", "n3"], "base")
    assert s.assignment == {"n1": ["a"], "n2": [], "n3": []} and s.variants_of("n3") == ["base"]
    with pytest.raises(ValueError, match="no hosts"):
        shardmod.assign(VARIANTS, [], "base")
    with pytest.raises(ValueError, match="not one of the variants"):
        shardmod.assign(VARIANTS, ["n1"], "nope")
    assert shardmod.reference_of("first", VARIANTS) == "base" and shardmod.reference_of("c", VARIANTS) == "c"
    assert shardmod.from_record(s.record()) == s == shardmod.from_record(s.host_record("n2"))
    assert shardmod.from_record(None) is None
    # a shard record from disk is checked as it is read: one line naming the file and the field
    with pytest.raises(records.RecordError, match=r"^manifest.json: shard.reference: expected str"):
        records.from_json({"shard": {"reference": 1, "hosts": [], "assignment": {}}}, Manifest,
                          "manifest.json")


def test_a_run_resharded_over_other_hosts_is_refused() -> None:
    s = shardmod.assign(VARIANTS, ["n1", "n2"], "base")
    shardmod.check_same_hosts(s.record(), s, "spec.yml")
    shardmod.check_same_hosts(None, s, "spec.yml")
    with pytest.raises(SpecError) as exc:
        shardmod.check_same_hosts(s.record(), shardmod.assign(VARIANTS, ["n1"], "base"), "spec.yml")
    assert exc.value.lines == [("spec.yml: shard: this run was sharded over n1, n2 (reference 'base'), "
                                "this plan over n1 (reference 'base'): run it on the same hosts, or start a "
                                "new run id (-e run_id=...)")]


# ------------------------------------------------------------------------------------ the spec and the plan

SPEC = {
    "name": "sweep", "model": "food_classifier",
    "base_config_text": 'name: "food_classifier"\nbackend: "python"\nmax_batch_size: 16\n'
                        'instance_group [{ count: 1 kind: KIND_CPU }]\n',
    "load": {"levels": [1, 4]}, "perf": {"measurement_interval_ms": 1000},
    "variants": [{"name": "baseline"}],
    "sweep": {"name": "d{delay}", "grid": {"delay": [100, 500, 1000, 2000, 4000]},
              "config": {"dynamic_batching": {"max_queue_delay_microseconds": "{delay}"}}},
}


def _spec(tmp_path: Path, **over: object) -> Path:
    p = tmp_path / "sweep.yml"
    p.write_text(yaml.safe_dump({**SPEC, **over}, sort_keys=False))
    return p


@pytest.mark.parametrize(("over", "line"), [
    ({"shard": {"reference": "nope"}}, ("sweep.yml: shard.reference: no variant named 'nope': give one of "
                                       "baseline, d100, d500, d1000, d2000, d4000, or first")),
    ({"shard": {}, "repetitions": "auto"}, ("sweep.yml: shard: not with repetitions: auto yet (its decisions "
                                           "compare variants on one host): give repetitions a number")),
    ({"shard": {}, "sweep": None}, ("sweep.yml: shard: one variant, nothing to spread over hosts: remove "
                                   "shard, or add variants")),
])
def test_spec_shard_setting_is_checked(tmp_path: Path, over: dict[str, object], line: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, **over))
    assert line in [ln.replace(f"{tmp_path}/", "") for ln in exc.value.lines]


def test_plan_deals_the_sweep_over_the_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, shard={"reference": "d1000"})
    run = tmp_path / "results" / "sweep" / "r1"
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "n2=0", "--host", "n1=0", "--role"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["shard_args"] == ["--shard-hosts=n1,n2"]
    host_plans = {h: records.read(run / h / "plan.json", plans.HostPlan) for h in ("n1", "n2")}
    # each host's variants in the spec's order: the reference and its candidates
    got = {h: [v.name for v in p.variants if v.name != "d1000"] for h, p in host_plans.items()}
    assert all("d1000" in [v.name for v in p.variants] for p in host_plans.values())
    assert sorted(n for names in got.values() for n in names) == ["baseline", "d100", "d2000", "d4000",
                                                                  "d500"]
    assert sorted(map(len, got.values())) == [2, 3]
    for h, p in host_plans.items():
        assert p.shard is not None and p.shard.candidates == got[h] and p.shard.hosts == ["n1", "n2"]
        assert p.shard.rule == shardmod.RULE
        assert view["hosts"][h]["calls"][0]["variants"] == [v.name for v in p.variants]
        assert not any((run / h / v).exists() for v in got["n1" if h == "n2" else "n2"])
    man = records.read(run / "manifest.json", Manifest).shard
    assert man is not None and man.assignment == got and not isinstance(man, plans.HostShard)
    # one host's own plan (the role's second call) deals the same way, given every host of the play
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "n2=0", "--no-manifest", "--quiet",
                 "--shard-hosts", "n1,n2"]) == 0
    n2 = records.read(run / "n2" / "plan.json", plans.HostPlan).shard
    assert n2 is not None and n2.candidates == got["n2"]
    # ... and without them it would deal over itself alone: refused, nothing written
    before = (run / "n2" / "plan.json").read_text()
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "n2=0", "--no-manifest"]) == 1
    err = capsys.readouterr().err
    assert "shard: this run was sharded over n1, n2" in err and "Traceback" not in err
    assert (run / "n2" / "plan.json").read_text() == before
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "n3=0", "--shard-hosts", "n1,n2"]) == 1
    assert "--host 'n3': not one of --shard-hosts (n1, n2)" in capsys.readouterr().err


def test_dash_e_shard_and_its_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path)
    run = tmp_path / "results" / "sweep" / "r2"
    args = ["plan", str(spec), "--run-dir", str(run), "--host", "n1=0", "--host", "n2=0", "--quiet"]
    assert main(args) == 0
    n1 = records.read(run / "n1" / "plan.json", plans.HostPlan)
    assert n1.shard is None and len(n1.variants) == 6  # not sharded: all on each
    run3 = tmp_path / "results" / "sweep" / "r3"
    assert main(["plan", str(spec), "--run-dir", str(run3), "--host", "n1=0", "--host", "n2=0", "--quiet",
                 "--shard"]) == 0
    man = records.read(run3 / "manifest.json", Manifest).shard
    assert man is not None and man.reference == "baseline"  # first
    auto = _spec(tmp_path, repetitions="auto")
    assert main(["plan", str(auto), "--run-dir", str(tmp_path / "results" / "sweep" / "r4"), "--host",
                 "n1=0", "--shard"]) == 1
    assert "-e shard: not with repetitions: auto yet" in capsys.readouterr().err
    assert not (tmp_path / "results" / "sweep" / "r4").exists()
    with pytest.raises(SpecError, match="only for kind: triton"):
        from serve_system.experiment import runfolder
        runfolder.sharding(load_spec(Path(__file__).parents[2] / "experiments" / "specs" / "fastapi.yml"),
                     {"n1": []}, force=True)


# ------------------------------------------------------------------------------------ the merged report

P = P260 / "concurrency_1_4.stdout"
#: node speeds of the reference, per repetition (n3 is 30 % slower: out of line)
NODE = {"n1": (1.0, 0.98, 1.02), "n2": (1.01, 0.99, 1.0), "n3": (0.7, 0.69, 0.71)}
#: each candidate's speed against its node's reference
CAND = {"fast": ("n3", 1.3), "mid": ("n2", 1.2), "slow": ("n1", 1.1)}


def _sharded_run(tmp_path: Path) -> tuple[Path, shardmod.Shard]:
    run = tmp_path / "results" / "sharded" / "r1"
    shard = shardmod.Shard("base", {h: [c for c, (hh, _) in CAND.items() if hh == h] for h in NODE})
    manifest(run, "sharded", [{"name": "most", "metric": "throughput", "goal": "max", "at_load": 4}],
             shard=records.to_json(shard.record()), smallest_effect=0.05)
    for h, speeds in NODE.items():
        for name, factor in [("base", 1.0)] + [(c, f) for c, (hh, f) in CAND.items() if hh == h]:
            variant(run, h, name, None)
            for r, sp in enumerate(speeds, 1):
                level(run, h, name, f"c4_r{r}", load=4, stdout=P, repetition=r, speed=sp * factor)
    return run, shard


def test_merged_report_tells_nodes_from_configurations(tmp_path: Path) -> None:
    run, _shard = _sharded_run(tmp_path)
    out = report.write_report(run)
    view = json.loads(Path(out["summary_json"]).read_text())["shard"]
    assert view["out_of_line"] == ["n3"]  # its reference is 30 % below the others', interval and all
    n3 = next(n for n in view["nodes"] if n["host"] == "n3" and n["metric"] == "throughput")
    assert n3["confirmed"] and n3["factor"] == pytest.approx(0.7 / 1.0, rel=0.02)
    assert view["node_factor"]["n3"]["throughput"] == pytest.approx(0.70, rel=0.02)
    by = {c["variant"]: c for c in view["candidates"]}
    assert by["fast"]["host"] == "n3" and by["fast"]["vs_reference"]["change"] == pytest.approx(0.3, abs=0.01)
    # normalised to the median node: fast is the best configuration though its raw number is the lowest
    assert by["fast"]["normalised"] > by["mid"]["normalised"] > by["slow"]["normalised"]
    assert by["fast"]["mean"] < by["slow"]["mean"] < by["mid"]["mean"]
    md = Path(out["report"]).read_text()
    assert "## Sharded over 3 nodes" in md and "3 candidates, each measured on one node" in md
    assert "| n3 | throughput | conc 4 |" in md and "| **yes** |" in md
    assert "| fast | n3 | throughput | conc 4 |" in md
    assert "- **most** (max throughput at conc 4, each variant over its node's reference): `fast` on n3, " \
           "1.30 x the reference; over `mid` (across nodes): +8 %" in md
    assert "`mid` on n2 at concurrency 4" in md  # the raw best, said to compare across nodes
    assert "(Sharded run: these compare raw numbers across nodes" in md


def test_one_repetition_flags_unconfirmed_and_two_nodes_flag_both() -> None:
    rows = [{"host": h, "variant": "base", "mode": "concurrency", "load": 4.0, "status": "ok",
             "throughput": t} for h, t in (("n1", 100.0), ("n2", 80.0))]
    view = shardres.analyse(rows, shardmod.Shard("base", {"n1": [], "n2": []}), ["throughput"], 0.05)
    assert view.out_of_line == ["n1", "n2"] and not any(n.confirmed for n in view.nodes)
    assert [round(n.factor or 0.0, 3) for n in view.nodes] == [round(100 / 90, 3), round(80 / 90, 3)]


def test_cross_node_effect_adds_the_four_variances() -> None:
    ra, a, rb, b = [100.0, 102.0, 98.0], [110.0, 112.0, 108.0], [70.0, 71.0, 69.0], [91.0, 92.0, 90.0]
    e = shardres.cross_node(ra, a, rb, b)
    assert e.change == pytest.approx((91 / 70) / (110 / 100) - 1, abs=0.005)
    same = iv.effect(a, b)  # the raw comparison: two variances, a narrower interval (around the wrong value)
    assert e.low is not None and e.high is not None and same.low is not None and same.high is not None
    assert math.log1p(e.high) - math.log1p(e.low) > math.log1p(same.high) - math.log1p(same.low)
    assert shardres.cross_node([1.0], a, rb, b).reason == iv.ONE_REPETITION
    # more repetitions of both sides (variant and reference) would decide it: a wide one needs many
    wide = shardres.cross_node([100.0, 60.0], [120.0, 70.0], [100.0, 160.0], [130.0, 200.0])
    more = iv.more_repetitions(wide, 0.0)
    assert more is None or more > 3
