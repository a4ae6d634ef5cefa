"""Bad input of the experiment stage: malformed records under a run folder, the lease guard."""

from __future__ import annotations

import io
import json
import tarfile

from .corpus import BadInput

LEVEL = {"variant": "v", "level": "c1_r1", "mode": "concurrency", "load": 1.0, "repetition": 1,
         "status": "ok",
         "start": 1.0, "end": 2.0,
         "attempts": [{"argv": ["perf_analyzer"], "rc": 0, "start": 1.0, "end": 2.0}]}
VARIANT = {"name": "v", "model": "m", "version": "1", "status": "measured"}
RUN = "results/demo/r1"
SPEC = ("name: demo\nmodel: m\nbase_config_text: |\n  name: \"m\"\n  backend: \"python\"\n  max_batch_size: "
        "8\nload: {levels: [1]}\nperf: {measurement_interval_ms: 600000}\nvariants: [{name: v}]\n")


def _report(id: str, level: dict | None = None, variant: dict | str | None = None,  # type: ignore[type-arg]
            *expect: str) -> BadInput:
    files: dict[str, str | bytes] = {
        f"{RUN}/manifest.json": json.dumps({"experiment": "demo", "run_id": "r1"}),
        f"{RUN}/n1/v/variant.json": (variant if isinstance(variant, str)
                                     else json.dumps(variant or VARIANT)),
        f"{RUN}/n1/v/c1_r1/level.json": json.dumps(level or LEVEL)}
    return BadInput(id=f"runner-{id}", argv=("serve-system", "report", "{tmp}/" + RUN), files=files,
                    expect=expect)


PLAN = json.dumps({"host": "n1", "gpus": 0, "experiment": "demo", "run_id": "r1", "variants": []})


def _archive(name: str) -> bytes:
    """A host's records archive with one member called ``name`` (as a compromised node could send)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    return buf.getvalue()


def _collect(id: str, files: dict[str, str | bytes], *expect: str) -> BadInput:
    return BadInput(id=f"runner-collect-{id}",
                    argv=("serve-system", "collect", "{tmp}/results.tar.gz", "--host-dir",
                                                     "{tmp}/" + RUN + "/n1"), files=files, expect=expect)


CASES: list[BadInput] = [
    _collect("escaping-member",
             {"results.tar.gz": _archive("../../escape.json"), f"{RUN}/n1/plan.json": PLAN},
             "{tmp}/results.tar.gz: ../../escape.json: not a record of this host's plan"),
    _collect("not-an-archive", {"results.tar.gz": b"not gzip", f"{RUN}/n1/plan.json": PLAN},
             "{tmp}/results.tar.gz: not a readable archive of records"),
    _collect("no-plan", {"results.tar.gz": _archive("host.json")},
             "{tmp}/" + RUN + "/n1/plan.json: cannot read"),
    BadInput(id="runner-collect-run-escaping-member",
             argv=("serve-system", "collect", "--run-dir", "{tmp}/" + RUN),
             files={f"{RUN}/n1/.fetch/results.tar.gz": _archive("../../escape.json"),
                    f"{RUN}/n1/plan.json": PLAN},
             expect=("{tmp}/" + RUN
                     + "/n1/.fetch/results.tar.gz: ../../escape.json: not a record of this host's plan",)),
    BadInput(id="runner-report-collect-not-an-archive",
             argv=("serve-system", "report", "--collect", "--partial", "{tmp}/" + RUN),
             files={f"{RUN}/n1/.fetch/results.tar.gz": b"not gzip", f"{RUN}/n1/plan.json": PLAN},
             expect=("{tmp}/" + RUN + "/n1/.fetch/results.tar.gz: not a readable archive of records",)),
    BadInput(id="runner-collect-neither", argv=("serve-system", "collect"), files={},
             expect=("collect: give ARCHIVE --host-dir DIR, or --run-dir RUN",)),
    _report("level-no-end", {k: v for k, v in LEVEL.items() if k != "end"}, None,
            "{tmp}/" + RUN + "/n1/v/c1_r1/level.json: end: missing"),
    _report("level-load-text", {**LEVEL, "load": "eight"}, None,
            "{tmp}/" + RUN + "/n1/v/c1_r1/level.json: field 'load' must be a positive number"),
    _report("level-attempts-argv",
            {**LEVEL, "attempts": [{"argv": "perf_analyzer", "rc": 0, "start": 1, "end": 2}]},
            None, "{tmp}/" + RUN + "/n1/v/c1_r1/level.json: attempts[0].argv: expected a list"),
    _report("variant-not-json", None, "{not json", "{tmp}/" + RUN + "/n1/v/variant.json:1:2: not JSON"),
    _report("variant-no-status", None, {k: v for k, v in VARIANT.items() if k != "status"},
            "{tmp}/" + RUN + "/n1/v/variant.json: status: missing"),
    BadInput(id="runner-lease-too-short",
             argv=("serve-system", "plan", "{tmp}/spec.yml", "--run-dir", "{tmp}/results/demo/r1", "--host",
                   "n1=0", "--lease-end", "2000-01-01T00:00:00Z"),
             files={"spec.yml": SPEC},
             expect=("{tmp}/spec.yml: lease:", "after the lease ends at 2000-01-01T00:00:00Z",
                     "ignore_lease_end")),
    BadInput(id="runner-lease-not-a-time",
             argv=("serve-system", "plan", "{tmp}/spec.yml", "--run-dir", "{tmp}/results/demo/r1", "--host",
                   "n1=0", "--lease-end", "tomorrow"),
             files={"spec.yml": SPEC},
             expect=("{tmp}/spec.yml: lease: serve_lease_end 'tomorrow' is not an ISO 8601 time",)),
]
