"""Bad inputs of issue 38: a user's folder given where the tool writes, argument values out of range,
numbers out of range in a run's files, and inventories whose errors must name the file.

Every folder a command writes into is the tool's own (its file list, a run's manifest or plans): a
user's non-empty folder is refused in one line naming it and the fix, and survives untouched (the
corpus checks that nothing under the case's folder changes).
"""

from __future__ import annotations

import json

from .corpus import BadInput

USER = {"mine/notes.txt": "my notes\n", "mine/sub/thesis.tex": "\\documentclass{article}\n"}
SPEC = "{repo}/experiments/specs/dynbatch.yml"
RUN = "results/demo/r1"
ROW = {"experiment": "demo", "run_id": "r1", "host": "node-1", "variant": "baseline", "mode": "concurrency",
       "load": 8, "status": "ok", "throughput": 52.4, "p50_us": 150000, "p95_us": 160000, "p99_us": 170000,
       "errors": None}


def _inventory(host: str = "n1", **hv: object) -> str:
    hosts = {host: {"ansible_host": "10.0.0.1", **hv}}
    return json.dumps({"all": {"children": {"serve_nodes": {"hosts": hosts}}}})


def _summary(**over: object) -> dict[str, str | bytes]:
    return {f"{RUN}/summary.json": json.dumps({"rows": [{**ROW, **over}]})}


CASES: list[BadInput] = [
    # -- a user's folder where the tool writes --------------------------------------------------------
    BadInput("fastapi-context-users-folder", ("serve-system", "fastapi", "context", "{tmp}/mine"),
             ("{tmp}/mine", "not empty and not made by serve-system", "--force"), files=USER),
    BadInput("models-render-users-folder",
             ("serve-system", "models", "render", "--dest", "{tmp}/mine", "--model", "food_classifier",
              "--standin", "food_classifier", "--source", "{repo}/model_repository"),
             ("{tmp}/mine", "not empty and not made by serve-system", "--dest", "--force"), files=USER),
    BadInput("access-out-users-folder",
             ("serve-system", "access", "-i", "{tmp}/hosts.yml", "--out", "{tmp}/mine"),
             ("{tmp}/mine", "not empty and not made by serve-system", "--out", "--force"),
             files={**USER, "hosts.yml": _inventory(serve_student="alice")}),
    BadInput("plan-run-dir-users-folder",
             ("serve-system", "plan", SPEC, "--run-dir", "{tmp}/results/dynbatch/r1", "--host", "h=1",
              "--fresh"),
             ("--run-dir", "{tmp}/results/dynbatch/r1", "not a run folder made by serve-system plan",
              "new run id"),
             files={"results/dynbatch/r1/notes.txt": "mine\n", "results/dynbatch/r1/h/data.csv": "1,2\n"}),
    BadInput("plan-results-dir-users-run-folder",
             ("serve-system", "plan", SPEC, "--results-dir", "{tmp}/results", "--run-id", "r1", "--host",
              "h=1"),
             ("{tmp}/results/dynbatch/r1", "not a run folder made by serve-system plan"),
             files={"results/dynbatch/r1/notes.txt": "mine\n"}),
    BadInput("plan-host-folder-not-the-tools",
             ("serve-system", "plan", SPEC, "--run-dir", "{tmp}/results/dynbatch/r1", "--host", "h=1",
              "--fresh", "--no-manifest"),
             ("--host 'h'", "{tmp}/results/dynbatch/r1/h", "holds no plan.json", "move it away"),
             files={"results/dynbatch/r1/g/plan.json": "{}\n", "results/dynbatch/r1/h/data.csv": "1,2\n"}),
    BadInput("collect-run-dir-users-folder", ("serve-system", "collect", "--run-dir", "{tmp}/mine"),
             ("--run-dir {tmp}/mine", "not a run folder made by serve-system plan"), files=USER),
    BadInput("decide-users-folder", ("serve-system", "decide", "{tmp}/mine", "--host", "h"),
             ("RUN_DIR {tmp}/mine", "not a run folder made by serve-system plan"), files=USER),
    # -- argument values ------------------------------------------------------------------------------
    BadInput("plan-lease-end-year-1",
             ("serve-system", "plan", SPEC, "--run-dir", "{tmp}/results/dynbatch/r1", "--host", "h=1",
              "--lease-end", "0001-01-01T00:00:00+14:00"),
             ("dynbatch.yml: lease: serve_lease_end '0001-01-01T00:00:00+14:00'", "between 1970 and 9998",
              "2026-11-22T18:50:00Z")),
    BadInput("plan-lease-end-year-9999-west",
             ("serve-system", "plan", SPEC, "--run-dir", "{tmp}/results/dynbatch/r1", "--host", "h=1",
              "--lease-end", "9999-12-31T23:59:59-14:00"),
             ("serve_lease_end '9999-12-31T23:59:59-14:00'", "between 1970 and 9998")),
    BadInput("models-render-gpus-negative",
             ("serve-system", "models", "render", "--dest", "{tmp}/new", "--model", "food_classifier",
              "--gpus", "-1"),
             ("--gpus", "-1 is out of range", "0 to 64")),
    BadInput("models-render-gpus-huge",
             ("serve-system", "models", "render", "--dest", "{tmp}/new", "--model", "food_classifier",
              "--gpus", "9" * 400),
             ("--gpus", "not a whole number", "0 to 64")),
    BadInput("path-argument-newline", ("serve-system", "fastapi", "context", "{tmp}/a\nb"),
             ("argument DIR", "control character", "without it")),
    BadInput("report-run-dir-loop-of-links", ("serve-system", "report", "{tmp}/loop"),
             ("argument RUN_DIR", "a loop of links", "give a real file or folder"), links={"loop": "loop"}),
    BadInput("unknown-argument-carriage-return", ("serve-system", "compare", "{tmp}/x", "-\r"),
             ("unrecognized arguments: -\\r", "--help")),
    BadInput("compare-csv-is-a-pipe", ("serve-system", "compare", "{tmp}/" + RUN, "--csv", "{tmp}/out.csv"),
             ("{tmp}/out.csv", "is a named pipe", "regular files"), files=_summary(), fifos=("out.csv",)),
    # -- numbers in a run's files ---------------------------------------------------------------------
    BadInput("compare-summary-load-401-digits", ("serve-system", "compare", "{tmp}/" + RUN),
             ("{tmp}/" + RUN + "/summary.json", "rows[0].load", "401 digits", "serve-system report"),
             files={f"{RUN}/summary.json": '{"rows": [{"load": ' + "9" * 401 + ', "throughput": 1}]}'}),
    BadInput("compare-summary-throughput-1e300", ("serve-system", "compare", "{tmp}/" + RUN),
             ("{tmp}/" + RUN + "/summary.json", "rows[0].throughput", "out of range"),
             files={f"{RUN}/summary.json": '{"rows": [{"load": 8, "throughput": 1e300}]}'}),
    BadInput("compare-summary-load-negative", ("serve-system", "compare", "{tmp}/" + RUN),
             ("{tmp}/" + RUN + "/summary.json", "rows[0].load", "-8 is out of range", "serve-system report"),
             files=_summary(load=-8)),
    BadInput("stats-count-beyond-range", ("serve-system", "stats", "{tmp}/a.json", "{tmp}/b.json"),
             ("{tmp}/a.json", "model_stats[0].inference_count", "out of range"),
             files={"a.json": '{"model_stats": [{"name": "m", "version": "1", "inference_count": 1e40}]}',
                    "b.json": '{"model_stats": [{"name": "m", "version": "1", "inference_count": 1}]}'}),
    # -- an inventory's errors name the inventory -----------------------------------------------------
    BadInput("inventory-student-climbs",
             ("serve-system", "access", "-i", "{tmp}/hosts.yml", "--out", "{tmp}/s"),
             ("{tmp}/hosts.yml", "serve_student", "'../../../outside/x'", "cannot be a file name"),
             files={"hosts.yml": _inventory(serve_student="../../../outside/x")}),
    BadInput("inventory-student-absolute", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "serve_student", "'/home/x'", "cannot be a file name"),
             files={"hosts.yml": _inventory(serve_student="/home/x")}),
    BadInput("inventory-host-name-newline", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "not a valid inventory host name", "letters, digits"),
             files={"hosts.yml": _inventory(host="n1\n")}),
    BadInput("inventory-gpus-huge", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "gpus must be 0 to 64"),
             files={"hosts.yml": _inventory(serve_gpus=10**20)}),
    BadInput("inventory-hosts-a-list", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "must map host names"),
             files={"hosts.yml": '{"all": {"children": {"serve_nodes": {"hosts": [1, 2]}}}}'}),
    BadInput("inventory-is-a-pipe", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "is a named pipe"), fifos=("hosts.yml",)),
]
