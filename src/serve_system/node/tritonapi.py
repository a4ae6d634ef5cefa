"""Triton's HTTP API as the node-side runner uses it: a tiny JSON client (:class:`Http`, also the FastAPI
endpoint's), and :class:`Triton`: load a variant's config (asked again while Triton restarts; its own
reason for a refusal), wait READY, load afresh (new instances, new stubs), statistics, and which config
each model last got in this run (``.loaded.json`` beside the plan, across runner calls); and Triton's
log (``docker logs -t``): :func:`load_reason` finds its own reason for a refused load.

Packed into the node bundle beside :mod:`.runner` (which imports it; this module never imports the
runner) and :mod:`.records`; standard library only.
"""

from __future__ import annotations

import calendar
import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import plans

#: beside the plan: per model, the load body last loaded in this run (see :meth:`Triton.note_loaded`)
LOADED = ".loaded.json"


class Http:
    """Tiny JSON-over-HTTP client (urllib), with the status and body of failures kept."""

    def __init__(self, base: str, timeout: float = 30.0):
        self.base = base.rstrip("/")
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, ValueError) as exc:
            return -1, {"error": f"{type(exc).__name__}: {exc}"}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8", "replace")) if raw else {}
    except ValueError:
        return {"text": raw.decode("utf-8", "replace")[:2000]}


class Triton(Http):
    """Triton's API for one runner call: ``host`` names it in messages, ``home`` is the run's node folder
    (beside the plan), ``ready_timeout`` bounds every load and READY wait."""

    def __init__(self, base: str, home: Path, host: str, ready_timeout: float):
        super().__init__(base)
        self.home, self.host, self.ready_timeout = home, host, ready_timeout

    def wait_ready(self, model: str | None, version: str, timeout: float) -> bool:
        path = f"/v2/models/{model}/versions/{version}/ready" if model else "/v2/health/ready"
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.call("GET", path, timeout=5)[0] == 200:
                return True
            time.sleep(0.25)
        return False

    def load(self, v: plans.VariantPlan) -> tuple[bool, str | None, float, bool]:
        """Ask Triton to load the variant's config: (loaded, the error, seconds, whether Triton answered).

        A load that gets no answer at all (connection refused or reset: Triton is restarting, e.g. after a
        crash of an earlier config) is not a refusal: the runner waits for Triton to be ready again and
        asks once more, within --ready-timeout.
        """
        t0 = time.time()
        code, body = self.load_model(v.model, v.load_body, v.name)
        took = time.time() - t0
        if code == 200:
            return True, None, took, True
        error = error_text(body)
        if code == -1:
            why = (f"Triton did not answer the load ({error}), and was not ready again within "
                   f"{self.ready_timeout:.0f} s (if it stays unready, e.g. stuck in a load that never "
                   "ended, restart it on the node, e.g. docker restart triton_server, and run the same run "
                   "id again: what was measured is kept)")
            return False, why, took, False
        # Triton's own reason (e.g. a config check) is in the repository index, not the load answer
        icode, index = self.call("POST", "/v2/repository/index", {})
        if icode == 200 and isinstance(index, list):
            reason = next((m.get("reason") for m in index if m.get("name") == v.model and m.get("reason")),
                          None)
            if reason and reason not in error:
                error = f"{error} | {reason}"
        return False, f"HTTP {code}: {error}", took, True

    def load_model(self, model: str, body: Any = None, name: str | None = None) -> tuple[int, Any]:
        """POST the model's load (``body`` None: its committed config); an answer of none at all (Triton
        restarting) is asked again once Triton is ready, within --ready-timeout. ``name`` is what the
        wait's message names (the variant; the model when None)."""
        deadline = time.time() + self.ready_timeout
        waited = False
        while True:
            code, answer = self.call("POST", f"/v2/repository/models/{model}/load",
                                     {} if body is None else body, timeout=self.ready_timeout)
            if code != -1 or time.time() >= deadline:
                return code, answer
            if not waited:
                print(f"{self.host} {name or model}: Triton did not answer the load "
                      f"({error_text(answer)}); waiting for it to be ready again", file=sys.stderr)
            waited = True
            if not self.wait_ready(None, "", max(0.0, deadline - time.time())):
                return code, answer

    def last_loaded(self) -> dict[str, str]:
        """Per model, the load body this run last loaded (kept beside the plan across runner calls)."""
        try:
            data = json.loads((self.home / LOADED).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def note_loaded(self, model: str, key: str | None) -> None:
        data = self.last_loaded()
        if key is None:
            data.pop(model, None)
        else:
            data[model] = key
        tmp = self.home / (LOADED + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(self.home / LOADED)

    def stats(self, v: plans.VariantPlan) -> tuple[int, Any]:
        return self.call("GET", f"/v2/models/{v.model}/versions/{v.version}/stats")

    def reload(self, v: plans.VariantPlan) -> None:
        """Load the variant afresh (unloaded first: new instances, new stubs) and wait READY."""
        self.call("POST", f"/v2/repository/models/{v.model}/unload", {}, timeout=self.ready_timeout)
        ok = self.load(v)[0]
        self.note_loaded(v.model, body_key(v.load_body) if ok else None)
        if ok:
            self.wait_ready(v.model, v.version, self.ready_timeout)

    def recover(self, v: plans.VariantPlan) -> None:
        """After Triton went away: wait for it, load the variant again, wait READY."""
        if not self.wait_ready(None, "", self.ready_timeout):
            return
        self.load(v)
        self.wait_ready(v.model, v.version, self.ready_timeout)


def error_text(body: Any) -> str:
    return str(body.get("error") or body) if isinstance(body, dict) else str(body)


def body_key(body: Any) -> str:
    """A load body as a comparable string (the config override it carries)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def success_count(stats: Any) -> int:
    """The requests Triton's statistics count as served (0 when unreadable): a drop means it restarted."""
    try:
        return sum(int(m["inference_stats"]["success"]["count"]) for m in stats["model_stats"])
    except (KeyError, TypeError, ValueError):
        return 0


# ------------------------------------------------------------------------------------- Triton's log

def log_lines(log: str) -> list[tuple[float | None, str]]:
    """Triton's log (``docker logs -t``) as (UNIX seconds or None, text), one a non-empty line."""
    return [_stamped(ln) for ln in log.splitlines() if ln.strip()]


def load_reason(lines: list[tuple[float | None, str]], model: str, load_started: float | None,
                switch_seconds: float | None) -> str | None:
    """Triton's own reason for refusing a load, from its log (:func:`log_lines`): the last line that
    names the model, reads as an error, and (when the log has Docker's timestamps) was written while
    the load was under way (``load_started`` .. + ``switch_seconds``, 2 s either side)."""
    t0 = load_started
    t1 = None if t0 is None else t0 + (switch_seconds or 0.0)
    found = [text for t, text in lines
             if model in text and re.match(r"^E\d{4}|.*\berror\b", text, re.IGNORECASE)
             and (t is None or t0 is None or t1 is None or t0 - 2 <= t <= t1 + 2)]
    return found[-1] if found else None


def _stamped(line: str) -> tuple[float | None, str]:
    """A ``docker logs --timestamps`` line as (UNIX seconds, text); (None, line) without a timestamp."""
    stamp, _, text = line.partition(" ")
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", stamp)
    if not m:
        return None, line.strip()
    whole = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    return whole + float(f"0.{m.group(2) or 0}"), text.strip()
