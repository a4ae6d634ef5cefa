"""Bad inputs of ``serve-system report`` and ``serve-system compare`` (also ``compare --class``).

Run folders are laid out as the experiment roles write them (results/<experiment>/<run-id>/...);
each case breaks one thing: the folder (missing, empty, planned but never measured, interrupted),
a record (level.json, manifest.json, summary.json) or an output path.
"""

from __future__ import annotations

import hashlib
import json

from serve_system.node import plans, records

from .corpus import BadInput

RUN = "results/demo/r1"
LEVEL = f"{RUN}/node-1/baseline/c8_r1"
PERF = ("Concurrency: 8, throughput: 52.3786 infer/sec, latency 151983 usec\n")


def _level(**over: object) -> str:
    meta = {"variant": "baseline", "level": "c8_r1", "mode": "concurrency", "load": 8, "repetition": 1,
            "status": "ok", "batch_size": 1, "start": 10.0, "end": 20.0,
            "attempts": [{"argv": ["perf_analyzer"], "rc": 0, "start": 10.0, "end": 20.0}]}
    meta.update(over)
    return json.dumps({k: v for k, v in meta.items() if v is not ...})


def _run(level_json: str | bytes | None = None, manifest: str | None = None,
         **extra: str | bytes) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        f"{RUN}/manifest.json": manifest if manifest is not None else json.dumps(
            {"experiment": "demo", "run_id": "r1", "hosts": ["node-1"]}),
        f"{RUN}/node-1/baseline/variant.json": json.dumps({"name": "baseline", "model": "food_classifier",
                                                           "version": "1",
                                                                    "status": "measured"}),
        f"{LEVEL}/perf.stdout": PERF,
    }
    if level_json is not None:
        files[f"{LEVEL}/level.json"] = level_json
    files.update(extra)
    return files


def _plan(levels: list[str], config: str = "") -> str:
    """node-1's plan.json as ``serve-system plan`` writes it: the variant ``baseline`` at ``levels``."""
    return json.dumps(records.to_json(plans.HostPlan(
        host="node-1", gpus=1, experiment="demo", run_id="r1", variants=[plans.VariantPlan(
            name="baseline", model="food_classifier", version="1", config_pbtxt=config, load_body={},
            notes=[],
            levels=[plans.LevelPlan(id=lid, mode="concurrency", load=int(lid[1:].split("_")[0]),
                                      repetition=1, argv=["perf_analyzer"], retry_argv=[]) for lid in levels],
            input_data=None, perf={})])))


def _report(case_id: str, files: dict[str, str | bytes], *expect: str,
            argv: tuple[str, ...] = ()) -> BadInput:
    return BadInput(case_id, ("serve-system", "report", *(argv or (f"{{tmp}}/{RUN}",))), expect, files)


def _summary(rows: object) -> str:
    return json.dumps(rows)


ROW = {"experiment": "demo", "run_id": "r1", "host": "node-1", "variant": "baseline", "mode": "concurrency",
       "load": 8, "status": "ok", "throughput": 52.4, "p50_us": 150000, "p95_us": 160000, "p99_us": 170000,
       "errors": None}
REPORTED = {f"{RUN}/summary.json": _summary({"rows": [ROW]})}


def _compare(case_id: str, files: dict[str, str | bytes], args: tuple[str, ...], *expect: str) -> BadInput:
    return BadInput(case_id, ("serve-system", "compare", *args), expect, files)


CASES: list[BadInput] = [
    # -- report: the run folder --------------------------------------------------------------------
    _report("report-run-folder-missing", {}, "{tmp}/results/none/r1", "no such run folder",
            "results/<experiment>/<run-id>", argv=("{tmp}/results/none/r1",)),
    _report("report-run-folder-is-a-file", {"results/demo/r1": "not a folder\n"}, "{tmp}/results/demo/r1",
            "no such run folder"),
    _report("report-empty-run-folder", {f"{RUN}/notes.txt": "nothing here yet\n"}, "{tmp}/results/demo/r1",
            "empty run folder", "no manifest.json", "experiment playbook"),
    _report("report-planned-never-measured",
            {f"{RUN}/manifest.json": json.dumps({"experiment": "demo", "run_id": "r1", "hosts": ["node-1"]}),
             f"{RUN}/node-1/plan.json": _plan(["c1_r1", "c8_r1"]),
             f"{RUN}/node-1/baseline/config.pbtxt": 'name: "food_classifier"\n'},
            "{tmp}/results/demo/r1", "nothing measured yet", "node-1/baseline/c1_r1",
            "ansible-playbook experiments"),
    _report("report-interrupted-planned-level-missing",
            _run(_level(), **{f"{RUN}/node-1/plan.json": _plan(["c8_r1", "c16_r1"]),
                              f"{RUN}/node-1/host.json": json.dumps(
                                  {"host": "node-1", "end": "2026-11-22T05:00:00Z"})}),
            "interrupted run", "node-1/baseline/c16_r1", "-e run_id=r1", "--partial"),
    _report("report-plan-not-a-host-plan",
            _run(_level(), **{f"{RUN}/node-1/plan.json": json.dumps({"host": "node-1", "variants": []})}),
            f"{{tmp}}/{RUN}/node-1/plan.json", "gpus: missing", "plan the run again"),
    _report("report-interrupted-host-never-finished",
            _run(_level(), **{f"{RUN}/node-1/plan.json": _plan(["c8_r1"])}),
            "interrupted run", "node-1/host.json (the host never finished)", "--partial"),
    _report("report-interrupted-level-started",
            _run(_level(), **{f"{RUN}/node-1/baseline/c16_r1/perf.stdout": "Concurrency: 16\n"}),
            "interrupted run", "node-1/baseline/c16_r1 (started, no level.json)", "--partial"),
    _report("report-interrupted-host-of-manifest-absent",
            _run(_level(),
                 manifest=json.dumps({"experiment": "demo", "run_id": "r1", "hosts": ["node-1", "node-2"]})),
            "interrupted run", "node-2/ (a host of manifest.json without results)", "--partial"),
    # a folder of runs (results/<experiment>) is no run: its run ids are no hosts
    _report("report-folder-of-runs", _run(_level()), "{tmp}/results/demo holds runs, not one run: give one, "
            "e.g. {tmp}/results/demo/r1", argv=("{tmp}/results/demo",)),
    # a level measured under another configuration than its host's plan (planned again after it, never
    # set aside): a report never mixes two configurations, --partial or not
    _report("report-mixed-configurations",
            _run(_level(provenance={"config_sha256": hashlib.sha256(b"max_batch_size: 4\n").hexdigest()}),
                 **{f"{RUN}/node-1/plan.json": _plan(["c8_r1"], config="max_batch_size: 8\n"),
                    f"{RUN}/node-1/host.json": json.dumps({"host": "node-1",
                                                           "end": "2026-11-22T05:00:00Z"})}),
            "1 level(s) measured under another plan than their host's plan.json",
            "node-1/baseline/c8_r1 (configuration changed)", "a report never mixes two configurations",
            "plan the run again", "-e run_id=r1", argv=(f"{{tmp}}/{RUN}", "--partial")),
    # -- report: level.json ------------------------------------------------------------------------
    _report("report-level-load-not-a-number", _run(_level(load="eight")),
            f"{{tmp}}/{LEVEL}/level.json", "field 'load'", "positive number", "'eight'",
            "re-run the experiment"),
    _report("report-level-load-numeric-string", _run(_level(load="8")),
            f"{{tmp}}/{LEVEL}/level.json", "field 'load'", "'8'"),
    _report("report-level-load-missing", _run(_level(load=...)), f"{{tmp}}/{LEVEL}/level.json",
            "field 'load'", "None"),
    _report("report-level-load-negative", _run(_level(load=-8)), f"{{tmp}}/{LEVEL}/level.json",
            "field 'load'", "-8"),
    _report("report-level-load-zero", _run(_level(load=0)), f"{{tmp}}/{LEVEL}/level.json", "field 'load'"),
    _report("report-level-load-boolean", _run(_level(load=True)), f"{{tmp}}/{LEVEL}/level.json",
            "field 'load'", "True"),
    _report("report-level-load-nan", _run(_level().replace('"load": 8', '"load": NaN')),
            f"{{tmp}}/{LEVEL}/level.json", "NaN is not a number JSON allows", "re-run the experiment"),
    _report("report-level-not-json", _run('{"mode": "concurrency", "load": 8'),
            f"{{tmp}}/{LEVEL}/level.json:1:", "not JSON", "delete the level folder"),
    _report("report-level-binary", _run(b"\xff\xfe\x00\x01level\x00"), f"{{tmp}}/{LEVEL}/level.json",
            "not UTF-8 text", "delete the level folder"),
    _report("report-level-is-a-list", _run("[8, 16]"), f"{{tmp}}/{LEVEL}/level.json",
            "expected a JSON object", "list"),
    # -- report: manifest.json ---------------------------------------------------------------------
    _report("report-manifest-not-json", _run(_level(), manifest="{experiment: demo"),
            f"{{tmp}}/{RUN}/manifest.json", "not JSON", "restore it"),
    _report("report-manifest-is-a-list", _run(_level(), manifest="[]"), f"{{tmp}}/{RUN}/manifest.json",
            "expected an object for Manifest", "restore it"),
    _report("report-smallest-effect-out-of-range",
            _run(_level(), manifest=json.dumps({"experiment": "demo", "spec": {"smallest_effect": 5}})),
            f"{{tmp}}/{RUN}/manifest.json", "field 'spec.smallest_effect' must be a share between 0 and 1",
            "found 5", "plan the run again"),
    _report("report-objectives-not-a-list", _run(_level(), manifest=json.dumps({"objectives": "throughput"})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives", "not a list", "re-plan"),
    _report("report-objective-unknown-metric",
            _run(_level(),
                 manifest=json.dumps({"objectives": [{"name": "x", "metric": "speed", "goal": "max"}]})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives[0].metric", "'speed'", "'throughput'"),
    _report("report-objective-bad-goal",
            _run(_level(),
                 manifest=json.dumps({"objectives": [{"metric": "throughput", "goal": "biggest"}]})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives[0].goal", "'biggest'", "use 'max' or 'min'"),
    _report("report-objective-at-load-text",
            _run(_level(),
                 manifest=json.dumps({"objectives": [{"metric": "throughput", "at_load": "eight"}]})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives[0].at_load", "'eight'"),
    _report("report-objective-bad-constraint",
            _run(_level(), manifest=json.dumps({"objectives": [{"metric": "throughput",
                                                                "constraints": {"p95_us": {"below": 5}}}]})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives[0].constraints"),
    _report("report-objective-at-load-negative",
            _run(_level(), manifest=json.dumps({"objectives": [{"metric": "throughput", "at_load": -8}]})),
            f"{{tmp}}/{RUN}/manifest.json", "objectives[0].at_load"),
    # -- compare ------------------------------------------------------------------------------------
    _compare("compare-out-folder-missing", REPORTED, (f"{{tmp}}/{RUN}", "--out", "{tmp}/nowhere/cmp.md"),
             "--out {tmp}/nowhere/cmp.md", "folder {tmp}/nowhere does not exist", "create it first"),
    _compare("compare-csv-onto-a-folder", REPORTED, (f"{{tmp}}/{RUN}", "--csv", "{tmp}/results"),
             "--csv {tmp}/results", "is a folder", "give a file name"),
    _compare("compare-out-onto-a-folder", REPORTED, (f"{{tmp}}/{RUN}", "--out", "{tmp}"),
             "--out {tmp}", "is a folder"),
    _compare("compare-out-and-csv-same-file", REPORTED,
             (f"{{tmp}}/{RUN}", "--out", "{tmp}/c.txt", "--csv", "{tmp}/c.txt"), "--out and --csv",
             "two different files"),
    _compare("compare-out-onto-the-runs-summary", REPORTED,
             (f"{{tmp}}/{RUN}", "--out", f"{{tmp}}/{RUN}/summary.json"),
             f"--out {{tmp}}/{RUN}/summary.json", "own report file", "elsewhere"),
    _compare("compare-run-folder-missing", {}, ("{tmp}/results/none/r1",), "{tmp}/results/none/r1",
             "no such run folder"),
    _compare("compare-not-reported-yet", {f"{RUN}/manifest.json": "{}"}, (f"{{tmp}}/{RUN}",),
             f"{{tmp}}/{RUN}/summary.json", "no summary", "serve-system report"),
    _compare("compare-summary-not-json", {f"{RUN}/summary.json": "[{"}, (f"{{tmp}}/{RUN}",),
             f"{{tmp}}/{RUN}/summary.json:1:", "not JSON", "re-run `serve-system report"),
    _compare("compare-summary-binary", {f"{RUN}/summary.json": b"\x89PNG\r\n\x1a\n\x00"}, (f"{{tmp}}/{RUN}",),
             f"{{tmp}}/{RUN}/summary.json", "not UTF-8 text", "re-run `serve-system report"),
    _compare("compare-summary-rows-not-a-list", {f"{RUN}/summary.json": _summary({"rows": 5})},
             (f"{{tmp}}/{RUN}",), f"{{tmp}}/{RUN}/summary.json", "field 'rows'", "list of rows"),
    _compare("compare-summary-row-not-an-object", {f"{RUN}/summary.json": _summary({"rows": [ROW, "x"]})},
             (f"{{tmp}}/{RUN}",), f"{{tmp}}/{RUN}/summary.json", "rows[1] must be an object"),
    _compare("compare-summary-load-text",
             {f"{RUN}/summary.json": _summary({"rows": [{**ROW, "load": "sixteen"}]})},
             (f"{{tmp}}/{RUN}",), f"{{tmp}}/{RUN}/summary.json", "rows[0].load", "must be a number",
             "'sixteen'"),
    _compare("compare-summary-throughput-text",
             {f"{RUN}/summary.json": _summary([{**ROW, "throughput": "fast"}])},
             (f"{{tmp}}/{RUN}",), f"{{tmp}}/{RUN}/summary.json", "rows[0].throughput"),
    _compare("compare-load-zero", REPORTED, (f"{{tmp}}/{RUN}", "--load", "0"), "--load 0", "positive number"),
    _compare("compare-load-negative", REPORTED, (f"{{tmp}}/{RUN}", "--load=-16"), "--load -16",
             "positive number"),
    _compare("compare-load-nan", REPORTED, (f"{{tmp}}/{RUN}", "--load", "nan"), "--load nan",
             "positive number"),
    # -- compare --class (raw run folders; each host of each run is a node) -------------------------
    _compare("compare-class-not-a-run", {**_run(_level()), "notes/todo.txt": "later\n"},
             ("--class", f"{{tmp}}/{RUN}", "{tmp}/notes"), "{tmp}/notes: not a run folder",
             "results/<experiment>/<run-id>"),
    _compare("compare-class-folder-of-runs", _run(_level()), ("--class", "{tmp}/results/demo"),
             "{tmp}/results/demo: not a run folder but a folder of runs", f"e.g. {{tmp}}/{RUN}"),
    _compare("compare-class-one-node", _run(_level()), ("--class", f"{{tmp}}/{RUN}"),
             f"one node (node-1 of {{tmp}}/{RUN})", "two nodes or more", "more run folders"),
    _compare("compare-class-experiments-mixed",
             {**_run(_level()), **{k.replace(RUN, "results/other/r2"): v for k, v in _run(
                 _level(), manifest=json.dumps({"experiment": "other", "run_id": "r2"})).items()}},
             ("--class", f"{{tmp}}/{RUN}", "{tmp}/results/other/r2"),
             "{tmp}/results/other/r2: a run of experiment 'other'", f"{{tmp}}/{RUN} is of 'demo'",
             "one experiment at a time"),
    _compare("compare-class-out-inside-a-run", _run(_level()),
             ("--class", f"{{tmp}}/{RUN}", "--out", f"{{tmp}}/{RUN}/class"), f"--out {{tmp}}/{RUN}/class",
             "lies inside run folder", "elsewhere"),
    _compare("compare-class-out-not-empty", {**_run(_level()), "cls/old.md": "an earlier report\n"},
             ("--class", f"{{tmp}}/{RUN}", "--out", "{tmp}/cls"), "--out {tmp}/cls", "not empty", "--force"),
    _compare("compare-class-with-csv", _run(_level()), ("--class", f"{{tmp}}/{RUN}", "--csv", "{tmp}/c.csv"),
             "--csv {tmp}/c.csv", "class.csv in the --out folder"),
]
