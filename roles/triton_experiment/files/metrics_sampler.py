#!/usr/bin/env python3
"""Sample Triton's Prometheus metrics while perf_analyzer runs (runs on the node, stdlib only).

Appends one JSON line per sample, {"t": epoch seconds, "text": the metrics page}, to --out, every
--interval seconds, until --stop-file exists or --max-seconds have passed. A failed fetch is
recorded as {"t": ..., "error": "..."} and sampling goes on.
"""

import argparse
import json
import os
import time
import urllib.request


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=3600.0)
    args = ap.parse_args()
    deadline = time.time() + args.max_seconds
    with open(args.out, "a", encoding="utf-8") as out:
        while time.time() < deadline and not os.path.exists(args.stop_file):
            t = time.time()
            try:
                with urllib.request.urlopen(args.url, timeout=5) as resp:
                    rec = {"t": t, "text": resp.read().decode("utf-8", "replace")}
            except OSError as exc:
                rec = {"t": t, "error": str(exc)}
            out.write(json.dumps(rec) + "\n")
            out.flush()
            time.sleep(max(0.0, args.interval - (time.time() - t)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
