"""``serve-system compare --class``: a class's runs in one comparison.

The class is made of recorded run trees (tests/unit/report_trees.py: the lab notebook's
perf_analyzer outputs): every node runs the lab's sweep, three repetitions; each node's outputs are
the notebook's sped up by the node's speed (a class of healthy nodes differs by a few per cent; the
made-up speeds are this test's). The injected outlier, c11-13, runs at 0.35 of the others' speed (a
node with a faulty GPU).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from report_trees import NB, SPREAD, lab_run, manifest, scaled

from serve_system.cli import main
from serve_system.errors import ServeSystemError
from serve_system.results import classcmp, classnodes, classstats, classwrite
from serve_system.results.claim import BatchingEvidence

HEALTHY = {"c11-01": 1.0, "c11-02": 0.98, "c11-03": 1.02, "c11-04": 1.01}
FAULTY = {"c11-13": 0.35}
QUEUE, DYNB, INST, POIS, ONNX, BEST = ("queue_delay", "dynamic_batching", "instances", "poisson",
                                      "onnx_backend", "best_variant")


def _node_tree(tmp: Path, host: str, speed: float) -> Path:
    """One node's recorded run (host folder named ``node-1``), at ``speed``."""
    return lab_run(tmp / "src" / host / "lab" / "r1", repetitions=3,
                   spread=tuple(s * speed for s in SPREAD[:3]))


def class_run(tmp: Path, speeds: dict[str, float], run_id: str = "class1") -> Path:
    """One run folder holding every node as a host (as one playbook run over the roster writes it)."""
    run = tmp / "results" / "lab" / run_id
    for host, speed in speeds.items():
        src = _node_tree(tmp / run_id, host, speed)
        if not run.exists():
            run.mkdir(parents=True)
            shutil.copy(src / "manifest.json", run / "manifest.json")
        shutil.move(src / "node-1", run / host)
    return run


def student_runs(tmp: Path, speeds: dict[str, float]) -> list[Path]:
    """One run folder per student, each with the one host ``node-1`` (run ids: the students')."""
    runs = []
    for student, speed in speeds.items():
        src = _node_tree(tmp / student, student, speed)
        run = tmp / "results" / "lab" / student
        run.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(src, run)
        manifest(run, "lab", [{"name": "most_throughput_at_8", "metric": "throughput", "goal": "max",
                               "at_load": 8}])
        runs.append(run)
    return runs


def _notebook_throughput(name: str) -> float:
    m = re.search(r"throughput: ([0-9.]+)", (NB / name).read_text())
    assert m is not None
    return float(m.group(1))


def test_the_faulty_node_is_named_once_with_its_numbers(tmp_path: Path,
                                                        capsys) -> None:  # type: ignore[no-untyped-def]
    run = class_run(tmp_path, {**HEALTHY, **FAULTY})
    out = tmp_path / "class-report"
    assert main(["compare", "--class", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = classcmp.compare_class([run])
    assert [s.node for s in result.suspects] == ["c11-13"]
    assert {o.node for o in result.outliers} == {"c11-13"}
    # every variant, and in each cell both metrics the notebook printed
    assert result.suspects[0].outlying_variants == ["baseline", "dynbatch", "gpus01_2x2", "gpus01_4x2",
                                                          "onnx"]
    assert len(result.outliers) == 14
    # the numbers: the notebook's baseline at concurrency 1 (51.549/s) at each node's speed; the class
    # median is the 1.00 node's, the quartiles the 0.98 and 1.01 nodes'
    t = _notebook_throughput("notebook_01.txt")
    want = (f"c11-13: {t * 0.35:.1f}/s vs class median {t:.1f}/s "
            f"[IQR {t * 0.98:.1f}–{t * 1.01:.1f}]")
    assert want == "c11-13: 18.0/s vs class median 51.5/s [IQR 50.5–52.1]"
    md = (out / "class.md").read_text()
    assert "- **c11-13**: outlier in 5 of 5 variants" in md and want in md
    assert md.count("**c11-13**") == 1  # named once, as a suspect
    assert "Only the suspect nodes' values, listed above." in md
    assert ("suspect node c11-13: outlier in 5 of 5 variants, e.g. baseline concurrency 1 throughput: "
            f"{want}") in printed
    row = "| baseline | concurrency 1 | throughput (/s) | 5 | 51.5 | 50.5–52.1 | 18.0 - 52.6 |"
    assert row in md and md.split(row)[1].split("\n")[0].endswith("| c11-13 |")
    with (out / "class.csv").open(newline="") as fh:
        cells = list(csv.DictReader(fh))
    assert len(cells) == 14 and {c["outliers"] for c in cells} == {"c11-13"}
    first = next(c for c in cells
                 if (c["variant"], c["load"], c["metric"]) == ("baseline", "1", "throughput"))
    assert (first["n"], float(first["median"])) == ("5", pytest.approx(t, abs=0.01))
    doc = json.loads((out / "class.json").read_text())
    assert doc["suspects"][0]["node"] == "c11-13" and doc["left_out"] == ["c11-13"]
    pngs = sorted(p.name for p in (out / "plots").iterdir())
    assert pngs == sorted(f"box_{m}_concurrency_{c}.png" for m in ("throughput", "latency_avg_us")
                          for c in (1, 8, 16))
    assert all(f"](plots/{p})" in md for p in pngs)


def test_a_healthy_class_names_no_outlier(tmp_path: Path) -> None:
    run = class_run(tmp_path, HEALTHY)
    result = classcmp.compare_class([run])
    assert result.outliers == [] and result.suspects == [] and result.left_out == []
    thr = next(c for c in result.cells if (c.variant, c.load, c.metric) == ("dynbatch", 8.0, "throughput"))
    assert thr.n == 4 and thr.cv == pytest.approx(0.0171, abs=0.001)  # speeds 0.98 .. 1.02
    assert thr.min == pytest.approx(_notebook_throughput("notebook_05.txt") * 0.98, abs=0.01)
    out = tmp_path / "o"
    classwrite.write(result, out)
    md = (out / "class.md").read_text()
    assert ("## Suspect nodes\n\nA node that is an outlier (in any metric) in more than half of the variants "
            "it measured.\n\nNone.") in md
    assert "Needs three nodes or more.\n\nNone." in md


def test_an_outlier_in_one_variant_is_named_but_not_suspect(tmp_path: Path) -> None:
    """c11-04's dynbatch level at concurrency 8 ran at 0.6 of its speed (say, a neighbour's job):
    named there, with its numbers, and nowhere else."""
    run = class_run(tmp_path, HEALTHY)
    for r, s in enumerate(SPREAD[:3], start=1):
        (run / "c11-04" / "dynbatch" / f"c8_r{r}" / "perf.stdout").write_text(
            scaled((NB / "notebook_05.txt").read_text(), 1.01 * s * 0.6))
    result = classcmp.compare_class([run])
    assert result.suspects == []
    assert {(o.node, o.variant, o.load, o.metric) for o in result.outliers} == {
        ("c11-04", "dynbatch", 8.0, "throughput"), ("c11-04", "dynbatch", 8.0, "latency_avg_us")}
    out = tmp_path / "o"
    classwrite.write(result, out)
    t = _notebook_throughput("notebook_05.txt")
    assert (f"- `dynbatch` at concurrency 8, throughput: c11-04: {t * 0.606:.1f}/s vs class median "
            f"{t * 0.99:.1f}/s") in (out / "class.md").read_text()


def test_findings_pooled_with_each_node_a_repetition(tmp_path: Path) -> None:
    run = class_run(tmp_path, {**HEALTHY, **FAULTY})
    result = classcmp.compare_class([run])
    verdicts = {f.key: f.verdict for f in result.findings}
    assert verdicts == {QUEUE: "held", DYNB: "held", INST: "did not hold", POIS: "not measurable here",
                        ONNX: "held", BEST: "held"}
    # pooled over the four healthy nodes: n counts nodes
    assert result.pooled_nodes == list(HEALTHY) and result.left_out == ["c11-13"]
    dyn = next(f for f in result.findings if f.key == DYNB)
    ev = dyn.evidence[0]
    assert isinstance(ev, BatchingEvidence) and ev.throughput_effect is not None
    assert "n = 4 per side" in dyn.detail and ev.throughput_effect.n == (4, 4)
    # each node's own run (three repetitions) decides the same; the faulty node's ratios hold too
    assert result.node_verdicts[DYNB] == dict.fromkeys([*HEALTHY, *FAULTY], "held")
    assert set(result.node_verdicts[INST].values()) == {"did not hold"}
    out = tmp_path / "o"
    classwrite.write(result, out)
    md = (out / "class.md").read_text()
    assert ("- **Dynamic batching raises the average batch and throughput at the same load**: **held** "
            "(pooled over 4 nodes). 5 of 5 nodes saw it hold on their own.") in md
    assert "0 of 5 nodes saw it hold on their own, did not hold: 5." in md
    assert "Left out of the pool: c11-13 (suspect nodes, above)" in md


def test_pooling_the_faulty_node_widens_the_intervals(tmp_path: Path) -> None:
    """Why suspects are left out: with c11-13 as a sixth repetition the same class's dynamic batching
    claim is undecided (its 0.35 speed swamps the +50 %)."""
    run = class_run(tmp_path, {**HEALTHY, **FAULTY})
    nodes, man = classnodes.read_nodes([run])
    pooled, _ = classcmp.pooled_findings(nodes, man)
    assert next(f for f in pooled if f.key == DYNB).verdict == "inconclusive"


def test_one_run_folder_per_student(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every student's own run, each on a host named node-1: nodes are named <run-id>/<host>; the
    report goes to results/class/<experiment> by default."""
    runs = student_runs(tmp_path, {"alice": 1.0, "bob": 0.99, "carol": 1.02, "dave": 0.34})
    assert main(["compare", "--class", *map(str, runs)]) == 0
    out = tmp_path / "results" / "class" / "lab"
    assert "5 nodes" not in capsys.readouterr().out
    doc = json.loads((out / "class.json").read_text())
    assert [n["node"] for n in doc["nodes"]] == ["alice/node-1", "bob/node-1", "carol/node-1", "dave/node-1"]
    assert [s["node"] for s in doc["suspects"]] == ["dave/node-1"]
    # and a run with several hosts beside single-host runs
    more = class_run(tmp_path, {"c11-01": 1.0, "c11-02": 1.01}, run_id="lab2")
    nodes, _ = classnodes.read_nodes([*runs, more])
    assert [n.label for n in nodes][-2:] == ["c11-01", "c11-02"] and len(nodes) == 6


def test_outlier_rule() -> None:
    # identical nodes but one: the MAD is zero, the odd one is named (beyond the smallest effect)
    assert classstats.outliers({"a": 100.0, "b": 100.0, "c": 100.0, "d": 80.0}, 0.05) == {"d": float("-inf")}
    # within the smallest effect of interest: not named, however small the spread
    assert classstats.outliers({"a": 100.0, "b": 100.0, "c": 100.0, "d": 97.0}, 0.05) == {}
    # two nodes: nothing to tell which one is odd
    assert classstats.outliers({"a": 100.0, "b": 40.0}, 0.05) == {}
    # three: the lab's example; and the same with the odd one healthy
    got = classstats.outliers({"c11-01": 118.0, "c11-02": 110.0, "c11-13": 41.0, "c11-04": 124.0}, 0.05)
    assert list(got) == ["c11-13"] and got["c11-13"] < -3.5
    assert classstats.outliers({"c11-01": 118.0, "c11-02": 110.0, "c11-13": 121.0, "c11-04": 124.0},
                               0.05) == {}
    s = classstats.cell_stats({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 100.0})
    assert (s.median, s.q1, s.q3, s.min, s.max, s.mad) == (3.0, 2.0, 4.0, 1.0, 100.0, 1.0)


# -- bad input: one line, non-zero, nothing written ------------------------------------------


def _refused(capsys, argv: list[str], *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_bad_input_is_refused_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = class_run(tmp_path, {"c11-01": 1.0, "c11-02": 1.0})
    out = tmp_path / "out"
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(capsys, ["compare", "--class", str(run), str(empty), "--out", str(out)],
             f"{empty}: not a run folder", "results/<experiment>/<run-id>")
    _refused(capsys, ["compare", "--class", str(run.parent), "--out", str(out)],
             f"{run.parent}: not a run folder but a folder of runs", f"e.g. {run}")
    _refused(capsys, ["compare", "--class", str(tmp_path / "nope"), "--out", str(out)], "no such run folder")
    other = tmp_path / "results" / "dynbatch" / "r9"
    shutil.copytree(run, other)
    doc = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**doc, "experiment": "dynbatch"}))
    _refused(capsys, ["compare", "--class", str(run), str(other), "--out", str(out)],
             f"{other}: a run of experiment 'dynbatch', but {run} is of 'lab'",
             "compare the runs of one experiment")
    single = tmp_path / "results" / "lab" / "solo"
    shutil.copytree(run, single)
    shutil.rmtree(single / "c11-02")
    _refused(capsys, ["compare", "--class", str(single), "--out", str(out)],
             "one node (c11-01 of", "needs two nodes or more")
    _refused(capsys, ["compare", "--class", str(run), str(run), "--out", str(out)], "given twice")
    _refused(capsys, ["compare", "--class", str(run), "--out", str(run / "class")],
             "lies inside run folder", "a run keeps its own report")
    _refused(capsys, ["compare", "--class", str(run), "--csv", str(tmp_path / "x.csv")],
             "with --class the CSV is class.csv")
    _refused(capsys, ["compare", str(run), "--force"], "--force: only with --class")
    assert not out.exists() and not (run / "class").exists() and not (tmp_path / "x.csv").exists()
    assert not (tmp_path / "results" / "class").exists()
    # an existing report: refused without --force, replaced with it
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    _refused(capsys, ["compare", "--class", str(run), "--out", str(out)], "not empty", "--force")
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert main(["compare", "--class", str(run), "--out", str(out), "--force"]) == 0
    assert (out / "class.md").is_file() and (out / "keep.txt").read_text() == "mine"


def test_load_filter(tmp_path: Path) -> None:
    run = class_run(tmp_path, HEALTHY)
    result = classcmp.compare_class([run], loads=[8])
    assert {c.load for c in result.cells} == {8.0}
    # the claims still see every load: the queue delay compares concurrency 1 with 16
    assert next(f for f in result.findings if f.key == QUEUE).verdict == "held"
    classwrite.write(result, tmp_path / "o")
    assert "keep only load 8 (--load)" in (tmp_path / "o" / "class.md").read_text()
    with pytest.raises(ServeSystemError, match="--load 3: no node measured this load"):
        classcmp.compare_class([run], loads=[3])


def test_a_variant_set_up_differently_is_said(tmp_path: Path) -> None:
    run = class_run(tmp_path, HEALTHY)
    cfg = run / "c11-03" / "dynbatch" / "config.pbtxt"
    text = cfg.read_text()
    assert "max_queue_delay_microseconds: 100" in text
    cfg.write_text(text.replace("max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 500"))
    result = classcmp.compare_class([run])
    want = ("`dynbatch` was set up differently on c11-03 than on c11-01; the pooled findings use "
            "c11-01's set-up")
    assert result.setup_notes == [want]
    classwrite.write(result, tmp_path / "o")
    assert "- Note: `dynbatch` was set up differently on c11-03" in (tmp_path / "o" / "class.md").read_text()
