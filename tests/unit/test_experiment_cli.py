"""The experiment's CLI commands: validate, import, stats, plan, report (in-process, real files)."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from serve_system.cli import main
from serve_system.experiment import plan
from serve_system.experiment.spec.reader import load_spec
from serve_system.experiment.tritonlocal import free_ports
from serve_system.node import bundle as nodebundle
from serve_system.node import plans, records
from serve_system.results import report
from serve_system.triton.pbtxt import ModelConfig

FIX = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def test_validate_pbtxt_ok_and_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = FIX / "model_repository" / "food_classifier" / "config.pbtxt"
    assert main(["validate", str(good)]) == 0
    bad = tmp_path / "m" / "config.pbtxt"
    bad.parent.mkdir()
    bad.write_text('name: "m"\nbackend: "python"\nmax_batch_size: 4\n'
                   'dynamic_batching { preferred_batch_size: [8] }\n')
    typo = tmp_path / "typo.pbtxt"
    typo.write_text('name: "m"\n  instance_groups [ ]\n')
    capsys.readouterr()
    assert main(["validate", str(good), str(bad), str(typo)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        (f"{bad}: dynamic_batching.preferred_batch_size: preferred batch size 8 > max_batch_size 4 "
        "(Triton: dynamic batching preferred size must be <= max batch size)"),
        (f'{typo}:2:3: instance_groups is not a field of model config (did you mean "instance_group"? its '
         f"fields: {', '.join(f.name for f in ModelConfig.DESCRIPTOR.fields)})"),
    ]


def test_validate_gpu_host_count(capsys: pytest.CaptureFixture[str]) -> None:
    pbtxt = FIX / "model_repository" / "food_classifier" / "config.pbtxt"
    assert main(["validate", "--gpus", "0", str(pbtxt)]) == 1
    assert "KIND_GPU on a host with no GPU" in capsys.readouterr().err


def _refusing_blip(tmp_path: Path) -> Path:
    """The shipped blip spec with on_missing_gpus: refuse (its base config inline: the copy is elsewhere)."""
    import textwrap

    base = (ROOT / "model_repository" / "blip" / "config.pbtxt").read_text()
    text = (ROOT / "experiments" / "specs" / "blip.yml").read_text()
    text = text.replace("on_missing_gpus: adapt", "on_missing_gpus: refuse").replace(
        "base_config: model_repository/blip/config.pbtxt\n",
        "base_config_text: |\n" + textwrap.indent(base, "  "))
    path = tmp_path / "blip.yml"
    path.write_text(text)
    return path


def test_validate_specs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = ROOT / "experiments" / "specs"
    # every shipped spec validates on a 0-GPU host (adapted); with on_missing_gpus: refuse, blip's
    # GPU variants are refused there
    assert main(["validate", "--gpus", "0", str(specs / "mnist_cpu_sweep.yml"), str(specs / "dli_bert.yml"),
                 str(specs / "blip.yml")]) == 0
    capsys.readouterr()
    refusing = _refusing_blip(tmp_path)
    assert main(["validate", "--gpus", "0", str(refusing)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"{refusing}: gpu_dynbatch: instance_group: ")
    bad = tmp_path / "s.yml"
    bad.write_text((specs / "dli_bert.yml").read_text().replace("percentile: 85", "percentil: 85"))
    assert main(["validate", str(bad)]) == 1
    assert capsys.readouterr().err.startswith(
        f"{bad}: perf.percentil: unknown key (did you mean 'percentile'?")


def test_import_seed_logs_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(
        ["import", "--json", str(FIX / "perf" / "notebook_05.txt"), str(FIX / "perf" / "blip_01.txt")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 5
    nb = rows[0]
    assert {k: nb[k] for k in ("mode", "load", "throughput", "latency_avg_us", "queue_us", "compute_input_us",
                               "compute_infer_us", "compute_output_us")} == {
        "mode": "concurrency", "load": 8, "throughput": 78.6276, "latency_avg_us": 101232, "queue_us": 44892,
        "compute_input_us": 197, "compute_infer_us": 55111, "compute_output_us": 216}
    assert {"p50_us", "p90_us", "p95_us", "p99_us"} <= set(nb) and "batch_size" not in nb
    assert [r["load"] for r in rows[1:]] == [1, 2, 3, 4] and "queue_us" not in rows[1]


def test_import_unmeasured_level_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    p260 = FIX / "perf260"
    assert main(["import", "--json", "-b", "1", str(p260 / "unstable_count_windows.txt"),
                 str(p260 / "rate_40_poisson_grpc.csv")]) == 0
    bad, rate = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (bad["status"] == "unmeasured" and bad["throughput"] is None
            and "stable measurement" in bad["error"])
    assert rate["mode"] == "request_rate" and rate["load"] == 40 and rate["p95_us"] == 38509
    assert rate["batch_size"] == 1


def test_import_table_and_nothing_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(FIX / "perf" / "mnist_01.txt")]) == 0
    assert "709.111" in capsys.readouterr().out
    empty = tmp_path / "x.txt"
    empty.write_text("hello\n")
    assert main(["import", str(empty)]) == 1
    assert "no perf_analyzer results found" in capsys.readouterr().err


def test_stats_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tmp_path / "before.json"
    # the snapshot of a freshly loaded model: every counter at zero
    before.write_text(json.dumps({"model_stats": [{"name": "food_classifier", "version": "1",
                                                   "inference_count": 0, "execution_count": 0}]}))
    after = FIX / "notebook_stats_after.json"
    assert main(["stats", str(before), str(after), "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["inference_count"] == 1436 and d["execution_count"] == 386 and d["avg_batch_size"] == 3.7202
    assert d["batch_size_histogram"] == {"1": 26, "2": 127, "3": 55, "4": 9, "5": 73, "6": 82, "7": 14}
    assert main(["stats", str(before), str(after)]) == 0
    assert "1436 inferences in 386 executions (avg batch 3.72)" in capsys.readouterr().out


def _fake_run(run: Path) -> None:
    """A run tree as the role writes it, from real perf_analyzer 2.60 outputs and the notebook stats."""
    p260 = FIX / "perf260"
    (run / "node-1").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "experiment": "demo", "run_id": "r1", "stand_in": "Generated stand-in weights.",
        "objectives": [{"name": "fast", "metric": "throughput", "goal": "max", "at_load": 4},
                       {"name": "tight", "metric": "p99_us", "goal": "min",
                        "constraints": {"throughput": {"min": 10000}}}]}))
    after = json.loads((FIX / "notebook_stats_after.json").read_text())
    for variant in ("a", "b"):
        for load in (1, 4):
            d = run / "node-1" / variant / f"c{load}_r1"
            d.mkdir(parents=True)
            (d / "perf.stdout").write_text((p260 / "concurrency_1_4.stdout").read_text())
            (d / "perf.csv").write_text((p260 / "concurrency_1_4.csv").read_text())
            (d / "stats_after.json").write_text(json.dumps(after))
            attempts = [records.Attempt(argv=["perf_analyzer"], rc=0, start=10.0, end=12.0,
                                        peak_rss_bytes=15_000_000 * load),
                        records.Attempt(argv=["perf_analyzer"], rc=0, start=12.0, end=15.5,
                                        reason="unstable", peak_rss_bytes=16_000_000)]
            records.write(d / "level.json", records.LevelRecord(
                variant=variant, level=f"c{load}_r1", mode="concurrency", load=load, repetition=1,
                status="ok", start=10.0, end=15.5, attempts=attempts,
                client_peak_rss_bytes=records.client_peak_rss(attempts)))
            (d / "metrics.jsonl").write_text(json.dumps({"t": 1.0, "text": "nv_cpu_utilization 0.5\n"})
                                             + "\n")
        records.write(run / "node-1" / variant / "variant.json", records.VariantRecord(
            name=variant, model="food_classifier", version="1", status="measured"))
    ref = run / "node-1" / "c_refused"
    ref.mkdir()
    records.write(ref / "variant.json", records.VariantRecord(
        name="c_refused", model="food_classifier", version="1", status="refused",
        error="default priority level out of range"))


def test_report_from_raw_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "results" / "demo" / "r1"
    _fake_run(run)
    assert main(["report", str(run)]) == 0
    assert "5 row(s)" in capsys.readouterr().out
    rows = json.loads((run / "summary.json").read_text())["rows"]
    a4 = next(r for r in rows if r["variant"] == "a" and r["load"] == 4)
    assert a4["throughput"] == 158.156 and a4["queue_us"] == 15154 and a4["p99_us"] == 158118
    assert a4["avg_batch_size"] == round(1436 / 386, 4) and a4["batch_size_histogram"]["2"] == 127
    assert (a4["retried"] is True and a4["duration_s"] == 5.5 and a4["cpu_util"] == 0.5
            and a4["gpu_util"] is None)
    a1 = next(r for r in rows if r["variant"] == "a" and r["load"] == 1)
    assert a4["client_peak_rss_bytes"] == 60_000_000 and a1["client_peak_rss_bytes"] == 16_000_000
    with (run / "summary.csv").open() as fh:
        assert {r["client_peak_rss_bytes"] for r in csv.DictReader(fh)} >= {"60000000", "16000000"}
    assert rows[-1]["status"] == "refused"
    md = (run / "report.md").read_text()
    assert "Stand-in model" in md and "default priority level out of range" in md
    assert "**fast** (max throughput at load 4): `a` on node-1 at concurrency 4" in md
    assert "**tight**" in md and "no measured level qualifies" in md
    assert sorted(p.name for p in (run / "plots").iterdir()) == [
        "node-1_batch_sizes.png", "node-1_cpu_utilisation.png", "node-1_latency_breakdown.png",
        "node-1_latency_vs_concurrency.png", "node-1_throughput_latency.png"]
    assert (run / "summary.csv").read_text().splitlines()[0].split(",")[:4] == ["experiment", "run_id",
                                                                                "host", "variant"]


def test_best_respects_constraints() -> None:
    rows = [{"host": "h", "variant": v, "mode": "concurrency", "load": 8, "status": "ok", "throughput": t,
             "p95_us": p}
            for v, t, p in (("x", 100.0, 9000.0), ("y", 300.0, 60000.0), ("z", 200.0, 20000.0))]
    most = plans.ObjectiveRecord("most", "throughput", "max")
    top = report.best(rows, most)
    assert top is not None and top.variant == "y"
    b = report.best(rows, dataclasses.replace(most, constraints={"p95_us": plans.BoundRecord(max=50000)}))
    assert b is not None and b.variant == "z"
    assert report.best(rows, plans.ObjectiveRecord("fast", "p95_us", "min", at_load=16)) is None


def _todo(variant: dict) -> int:  # type: ignore[type-arg]
    return sum(not lv["done"] for lv in variant["levels"])


def _dynbatch_in_repo(tmp_path: Path) -> Path:
    """The shipped dynbatch spec in a copy of the repository (its model repository the fixtures')."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "experiments", repo / "experiments")
    shutil.copytree(FIX / "model_repository", repo / "model_repository")
    (repo / "ansible.cfg").write_text("[defaults]\n")
    return repo / "experiments" / "specs" / "dynbatch.yml"


def test_plan_writes_run_folder_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    args = ["plan", str(spec), "--run-dir", str(run), "--host", "node-1=0", "--host", "node-2=2",
            "--node-work-dir", "/work/dynbatch/r1"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"node-1", "node-2"} and out["node-1"]["models"] == ["food_classifier"]
    v1 = {v["name"]: v for v in out["node-1"]["variants"]}
    assert _todo(v1["dynbatch"]) == 15 and "KIND_CPU" in (
        run / "node-1" / "dynbatch" / "config.pbtxt").read_text()
    assert "KIND_GPU" in (run / "node-2" / "dynbatch" / "config.pbtxt").read_text()
    assert v1["baseline"]["input_data"].endswith("experiments/files/food_input.json")
    assert "/work/dynbatch/r1/food_input.json" in v1["baseline"]["levels"][0]["argv"]
    assert json.loads((run / "manifest.json").read_text())["objectives"][0]["name"] == "most_throughput_at_8"
    # the node bundle: a zip application of the node package (as it imports here) with the plan and its inputs
    node_pkg = Path(nodebundle.__file__).parent
    with zipfile.ZipFile(run / "node-1" / ".node.pyz") as z:
        assert set(z.namelist()) == {"__main__.py", "plan.json", "fastapi_bench.py", "food_input.json",
                                     *(f"serve_system/{n}" for n in nodebundle.FOUNDATION),
                                     *(f"serve_system/node/{p.name}" for p in node_pkg.glob("*.py")
                                       if p.name != nodebundle.CLIENT)}
        assert "serve_system/node/runner.py" in z.namelist()
        assert json.loads(z.read("plan.json")) == out["node-1"]
    # run as the node runs it, with the standard library alone (-I -S: no site-packages, no PYTHONPATH):
    # its data members are put beside it, then the runner answers
    node = tmp_path / "node"
    node.mkdir()
    shutil.copyfile(run / "node-1" / ".node.pyz", node / ".node.pyz")
    proc = subprocess.run([sys.executable, "-I", "-S", str(node / ".node.pyz"),
                           "--plan", str(node / "plan.json"), "--variant", "nope",
                           "--progress", str(node / "progress.json")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2 and "no variant named 'nope'" in proc.stderr, proc.stderr
    assert sorted(p.name for p in node.iterdir()) == [".node.pyz", ".runner.lock", "fastapi_bench.py",
                                                      "food_input.json", "plan.json"]
    lvl = run / "node-1" / "baseline" / "c1_r1"
    lvl.mkdir()
    (lvl / "level.json").write_text(json.dumps({"end": 1.0}))  # not a complete record: not done
    assert records.done_levels(run / "node-1") == set()
    records.write(lvl / "level.json", records.LevelRecord(
        variant="baseline", level="c1_r1", mode="concurrency", load=1, repetition=1, status="ok",
        start=0.0, end=1.0, attempts=[]))
    assert records.done_levels(run / "node-1") == {("baseline", "c1_r1")}
    assert main(args + ["--quiet"]) == 0
    plan = json.loads((run / "node-1" / "plan.json").read_text())
    assert [_todo(v) for v in plan["variants"]] == [14, 15]
    assert main(args + ["--quiet", "--fresh"]) == 0
    plan = json.loads((run / "node-1" / "plan.json").read_text())
    assert [_todo(v) for v in plan["variants"]] == [15, 15] and not lvl.exists()


def test_plan_answers_the_role_what_it_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    results = tmp_path / "results"
    (tmp_path / "playbooks").mkdir()  # the role gives <playbook_dir>/../results
    args = ["plan", str(spec), "--results-dir", str(tmp_path / "playbooks" / ".." / "results"), "--run-id",
            "r2", "--host", "node-1=0",
            "--node-work-root", "/work", "--role", "--perf-timeout", "10", "--ready-timeout", "5",
            "--perf-memory-mb", "", "--metrics-interval", "", "--client-container", "client",
            "--node-dir-root", "/srv/work", "--progress", "/work/p.json"]
    assert main(args) == 0
    view = json.loads(capsys.readouterr().out)
    run = results / "dynbatch" / "r2"
    assert {k: view[k] for k in ("experiment", "kind", "run_dir", "run_subdir")} == {
        "experiment": "dynbatch", "kind": "triton", "run_dir": str(run.resolve()),
        "run_subdir": "dynbatch/r2"}
    host = view["hosts"]["node-1"]
    assert host["models"] == ["food_classifier"] and host["node_dir"] == "/srv/work/dynbatch/r2"
    # repetitions auto: one runner call for every variant's first 3 repetitions; up to 2 more calls,
    # each asked of serve-system decide; the baseline is restored by the role's restore, or by the call
    # itself once the host has spent the spec's budget of 2.5 measured minutes
    [call] = host["calls"]
    runner = ["docker", "exec", "-i", "client", "python3", "/work/dynbatch/r2/.node.pyz",
              "--plan", "/work/dynbatch/r2/plan.json"]
    log = call["start"][call["start"].index("--log") + 1]
    assert call["start"] == [
        "docker", "exec", "--detach", *runner[3:], "--variant=baseline", "--variant=dynbatch",
        "--repetition=1", "--repetition=2", "--repetition=3", "--restore-past=2.5", "--log", log,
        "--stderr", f"{log}.err"]
    # one follow per level still to measure (each prints its progress line), bounded by the settings
    follow = ["python3", "/srv/work/dynbatch/r2/.node.pyz", "--follow", f"/srv/work/dynbatch/r2/{log}",
              "--stderr", f"/srv/work/dynbatch/r2/{log}.err", "--timeout", "40"]
    assert call["todo"] == 18 and call["follow"] == [[*follow, "--seq", str(n)] for n in range(1, 19)]
    assert call["wait_end"] == [*follow, "--seq", "0"] and call["runtime"] is None
    assert call["explain"] == [*runner, "--triton-log", "--variant=baseline", "--variant=dynbatch"]
    assert host["restore"] == [*runner, "--restore"] and host["more_rounds"] == 2
    # the runner's settings travel in the host plan: given ones, the others their one default
    assert records.read(run / "node-1" / "plan.json", plans.HostPlan).runner == plans.RunnerSettings(
        perf_timeout=10, ready_timeout=5, container="client", client_dir="/work/dynbatch/r2",
        node_dir="/srv/work/dynbatch/r2", progress="/work/p.json")
    plan = records.read(run / "node-1" / "plan.json", plans.HostPlan)
    assert plan.endpoints == {"triton": "http://triton_server:8000",
                              "metrics": "http://triton_server:8002/metrics",
                              "fastapi": "http://fastapi_server:8000"}
    assert "/work/dynbatch/r2/food_input.json" in plan.variants[0].levels[0].argv
    # -e variants=dynbatch (a comma list or repeated): the calls measure only those
    assert main([*args, "--only", "dynbatch"]) == 0
    only = json.loads(capsys.readouterr().out)["hosts"]["node-1"]["calls"]
    assert [[a for a in c["start"] if a.startswith("--variant")] for c in only] == [["--variant=dynbatch"]]
    assert plan.adaptive is not None and plan.adaptive.only is None  # without -e variants: every variant
    picked = records.read(run / "node-1" / "plan.json", plans.HostPlan)
    assert picked.adaptive is not None and picked.adaptive.only == ["dynbatch"]  # decide repeats only it
    # a fixed count of repetitions: one runner call for everything, then the baseline restored
    doc = yaml.safe_load(spec.read_text())
    doc["repetitions"] = 2
    del doc["budget"]
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main([*args, "--fresh"]) == 0
    fixed = json.loads(capsys.readouterr().out)["hosts"]["node-1"]
    assert fixed["more_rounds"] == 0 and [c["start"][8:11] for c in fixed["calls"]] == [
        ["--variant=baseline", "--variant=dynbatch", "--restore"]] and fixed["calls"][0]["todo"] == 12
    # an unknown name: one line before anything is written
    shutil.rmtree(results)
    assert main([*args, "--only", "dynbatch,nope"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"{spec}: variants: no variant named 'nope' (-e variants): give one of baseline, dynbatch\n")
    assert not results.exists()
    assert main(["plan", str(spec), "--results-dir", str(results), "--role"]) == 1
    assert capsys.readouterr().err == "--results-dir: give the run id too (--run-id NAME)\n"


def test_plan_interleaves_repetitions_in_a_seeded_order(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    doc = yaml.safe_load(spec.read_text())
    doc["repetitions"] = 4
    doc.pop("budget", None)
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    results = tmp_path / "results"

    def rounds(run_id: str, host: str = "node-1") -> tuple[list[list[str]], int | None]:
        assert main(["plan", str(spec), "--results-dir", str(results), "--run-id", run_id, "--host",
                     f"{host}=0", "--quiet"]) == 0
        hp = records.read(results / "dynbatch" / run_id / host / "plan.json", plans.HostPlan)
        return hp.rounds, hp.seed

    first, seed = rounds("a")
    # every round holds every variant once: repetition r of each, then r + 1; counterbalanced: in
    # every block of two rounds each variant goes first once (AB, BA)
    assert len(first) == 4 and all(sorted(r) == ["baseline", "dynbatch"] for r in first)
    assert all(a == b[::-1] for a, b in (first[0:2], first[2:4]))
    assert seed == plan.run_seed("dynbatch", "a", "node-1")
    # the order is the run's: the same run id plans the same order (resume), another run id its own
    assert rounds("a") == (first, seed)
    orders = {tuple(map(tuple, rounds(f"r{i}")[0])) for i in range(8)}
    assert len(orders) > 1 and any(r[0] == "dynbatch" for o in orders for r in o)
    # one repetition: the plan's own order (the baseline first)
    hp = [dataclasses.replace(v, levels=[lv for lv in v.levels if lv.repetition == 1])
          for v in plan.plan(load_spec(ROOT / "experiments" / "specs" / "dynbatch.yml"), 0)]
    assert plan.interleave(hp, 123) == [["baseline", "dynbatch"]]


def test_plan_refuses_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    refusing = _refusing_blip(tmp_path)
    assert main(["plan", str(refusing), "--run-dir", str(run), "--host", "node-1=0"]) == 1
    assert "gpu_dynbatch: instance_group: uses 1 GPU(s), the host has 0" in capsys.readouterr().err
    assert not run.exists()


def test_interleaved_rounds_are_counterbalanced() -> None:
    """Three variants, six repetitions: in each block of three rounds every variant is measured once
    in every position of a round (a Latin square), each block in its own seeded order."""
    base = plan.plan(load_spec(ROOT / "experiments" / "specs" / "dynbatch.yml"), 0)
    lv = base[0].levels[0]
    variants = [dataclasses.replace(base[i % 2], name=name,
                                    levels=[dataclasses.replace(lv, repetition=r) for r in range(1, 7)])
                for i, name in enumerate(("a", "b", "c"))]
    for seed in range(20):
        rounds = plan.interleave(variants, seed)
        assert len(rounds) == 6 and all(sorted(r) == ["a", "b", "c"] for r in rounds)
        for block in (rounds[:3], rounds[3:]):
            for position in range(3):
                assert sorted(r[position] for r in block) == ["a", "b", "c"]
        assert plan.interleave(variants, seed) == rounds  # the seed decides it all (resume)
    assert len({tuple(map(tuple, plan.interleave(variants, s))) for s in range(20)}) > 1


def test_a_load_triton_never_answers_is_unavailable_not_refused(tmp_path: Path) -> None:
    """No answer to a load (connection refused: Triton restarting or gone) is not Triton refusing the
    config: the runner waits for Triton within --ready-timeout, then records the variant unavailable with
    that reason, and goes on."""
    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    node = tmp_path / "node"
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "node-1=0", "--node-work-dir", str(node),
                 "--quiet"]) == 0
    node.mkdir()
    shutil.copyfile(run / "node-1" / ".node.pyz", node / ".node.pyz")
    (port,) = free_ports(1)  # nothing listens there: every request is refused
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(node / ".node.pyz"), "--plan", str(node / "plan.json"),
                           "--variant", "baseline", "--triton", f"http://127.0.0.1:{port}",
                           "--ready-timeout", "3", "--progress", str(node / "progress.json")],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert time.time() - t0 >= 3  # it waited for Triton before giving up
    assert "waiting for it to be ready again" in proc.stderr
    vrec = records.read(node / "baseline" / "variant.json", records.VariantRecord)
    assert vrec.status == records.UNAVAILABLE
    assert vrec.error is not None and vrec.error.startswith("Triton did not answer the load")
    assert "not ready again within 3 s" in vrec.error
    said = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert any(e.get("variant") == "baseline" and e.get("status") == "unavailable" for e in said)
