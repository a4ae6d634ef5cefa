"""The node's entry: ``python3 .node.pyz ARGS`` on the node (:mod:`.bundle`) and ``python -m
serve_system.node ARGS`` here run this one module: ``--follow`` is a runner call's host-side wait
(:mod:`.follow`, on the node itself), anything else the runner (:mod:`.runner`, in the client container)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--follow" in args:  # the host's python3: only what the wait needs is imported
        from . import follow
        return follow.main(args)
    from . import runner
    return runner.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
