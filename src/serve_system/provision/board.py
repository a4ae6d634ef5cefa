"""The status board: every node probed in parallel, one row per node.

One provider listing per call (:meth:`Provider.fleet`: for Chameleon one server, one port and one
floating-IP listing), then one SSH session per node, all at once, running a small Python probe on
the node (Triton and Jupyter listen on the node's loopback only). The probe reports Docker, Triton's
readiness and its READY models, whether Jupyter answers, and the running experiment's progress
from ``/opt/serve-system/work/progress.json`` (:class:`serve_system.node.records.Progress`).

A node is healthy when its machine runs, SSH logs in, Docker answers and Triton is ready.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import interrupt, safeio
from ..textsafe import markup
from .base import Fleet, Machine
from .nodes import Node

PROGRESS_FILE = "/opt/serve-system/work/progress.json"

#: runs on the node as root (python3 is on every node: Ansible needs it); prints one JSON object
PROBE = r"""
import json, subprocess, urllib.error, urllib.request
def http(url, data=None):
    try:
        req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=3) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except Exception:
        return None, b""
out = {}
try:
    p = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                       timeout=10)
    out["docker"] = p.stdout.strip() if p.returncode == 0 else ""
except Exception:
    out["docker"] = ""
out["triton_ready"] = http("http://127.0.0.1:8000/v2/health/ready")[0] == 200
st, body = http("http://127.0.0.1:8000/v2/repository/index", b"{}")
try:
    out["models"] = (sorted(m["name"] for m in json.loads(body) if m.get("state") == "READY")
                     if st == 200 else [])
except Exception:
    out["models"] = []
out["jupyter"] = http("http://127.0.0.1:8888/api")[0] is not None
try:
    with open("PROGRESS_FILE") as fh:
        out["progress"] = json.load(fh)
except Exception:
    out["progress"] = None
print(json.dumps(out))
""".replace("PROGRESS_FILE", PROGRESS_FILE)


@dataclass
class NodeHealth:
    """One row of the board."""

    name: str
    machine: str
    address: str | None
    ssh: bool = False
    docker: str = ""
    triton_ready: bool = False
    models: list[str] = field(default_factory=list)
    jupyter: bool = False
    progress: dict[str, Any] | None = None
    lease_minutes_left: int | None = None
    problem: str = ""
    #: the Chameleon site of a class over several sites ("" on a one-lease board)
    site: str = ""

    @property
    def healthy(self) -> bool:
        return self.ssh and bool(self.docker) and self.triton_ready and not self.problem

    def as_dict(self) -> dict[str, Any]:
        d = {**asdict(self), "healthy": self.healthy}
        if not self.site:
            del d["site"]
        return d


#: the longest line a probe may print as its answer (a node that prints more is refused, never parsed)
MAX_ANSWER = 4 * 2**20


def ssh_python(node: Node, address: str, port: int, known_hosts: Path, script: str, *, timeout: int,
               wait: float, args: Sequence[str] = ()) -> dict[str, Any] | str:
    """Run ``script`` with python3 as root on the node (``sudo -n python3 - ARGS``, the script on stdin;
    python3 is on every node: Ansible needs it), in one SSH session with the inventory's user and key and
    the pinned host keys (``timeout``: to connect; ``wait``: for the whole run). The JSON object the script
    prints on its last line (read as hostile data: :func:`serve_system.safeio.loads_json`), or a one-line
    reason it could not be had."""
    remote = " ".join(shlex.quote(a) for a in ("sudo", "-n", "python3", "-", *args))
    cmd = [
        "ssh", "-i", node.key_path, "-p", str(port), "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
        "-o", f"ConnectTimeout={timeout}", f"{node.user}@{address}", remote,
    ]
    try:  # its own process group, killed on Ctrl-C: a probe is never waited for
        proc = interrupt.run_child(cmd, input=script, timeout=wait)
    except subprocess.TimeoutExpired:
        return f"SSH probe timed out after {wait:g} s"
    except OSError as exc:
        return f"cannot run ssh ({exc.strerror})"
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        return "SSH: " + (lines[-1].strip()[:300] if lines else f"exit {proc.returncode}")
    lines = proc.stdout.strip().splitlines()
    if not lines or len(lines[-1]) > MAX_ANSWER:
        return "probe printed no JSON"
    try:
        data = safeio.loads_json(lines[-1], f"{node.name}'s probe")
    except safeio.UnsafeFile:
        return "probe printed no JSON"
    return data if isinstance(data, dict) else "probe printed no JSON object"


def _ssh_probe(node: Node, machine: Machine, known_hosts: Path, timeout: int) -> dict[str, Any] | str:
    """The probe's JSON, or a one-line reason SSH failed."""
    return ssh_python(node, str(machine.address), machine.port, known_hosts, PROBE, timeout=timeout,
                      wait=timeout + 20)


def probe(fleet: Fleet, nodes: Sequence[Node], known_hosts: Path, *, timeout: int = 10) -> list[NodeHealth]:
    """Probe every machine of ``fleet`` at once; ``nodes`` (the inventory) give user and key."""
    by_name = {n.name: n for n in nodes}
    minutes = fleet.lease.get("minutes_left") if fleet.lease else None

    def one(m: Machine) -> NodeHealth:
        row = NodeHealth(m.name, m.state, m.address,
                         lease_minutes_left=int(minutes) if isinstance(minutes, int) else None)
        node = by_name.get(m.name)
        if not m.running:
            row.problem = f"machine {m.state}" + (f": {m.fault}" if m.fault else "")
        elif not m.address:
            row.problem = "no address (no floating IP)"
        elif node is None:
            row.problem = "not in the inventory: run launch"
        else:
            got = _ssh_probe(node, m, known_hosts, timeout)
            if isinstance(got, str):
                row.problem = got
            else:
                row.ssh = True
                row.docker = str(got.get("docker") or "")
                row.triton_ready = bool(got.get("triton_ready"))
                row.models = [str(x) for x in got.get("models") or []]
                row.jupyter = bool(got.get("jupyter"))
                prog = got.get("progress")
                row.progress = prog if isinstance(prog, dict) else None
        return row

    return interrupt.parallel(one, fleet.machines, max_workers=64)


def progress_text(p: dict[str, Any] | None) -> str:
    if not p:
        return "-"
    return (f"{p.get('experiment', '?')} {p.get('state', '?')} {p.get('levels_done', '?')}/"
            f"{p.get('levels_total', '?')} ({p.get('variant', '?')} {p.get('level', '?')})")


def table(rows: Sequence[NodeHealth], title: str) -> Any:
    from rich.table import Table

    t = Table(title=markup(title))
    sites = any(r.site for r in rows)
    if sites:
        t.add_column("site")
    for col in ("node", "machine", "address", "SSH", "Docker", "Triton", "models", "Jupyter", "experiment",
                "lease min", "health"):
        t.add_column(col)
    for r in rows:
        cells: tuple[str, ...] = (
                 r.name, r.machine, r.address or "-", "up" if r.ssh else "down", r.docker or "-",
                 "ready" if r.triton_ready else "-", ",".join(r.models) or "-", "up" if r.jupyter else "-",
                 progress_text(r.progress),
                 "-" if r.lease_minutes_left is None else str(r.lease_minutes_left))
        # every cell holds data a node or the inventory gave: shown as text, never as rich markup
        if sites:
            cells = (r.site or "-", *cells)
        t.add_row(*(markup(c) for c in cells),
                  "[green]healthy[/]" if r.healthy else f"[red]unhealthy[/] {markup(r.problem)}")
    return t
