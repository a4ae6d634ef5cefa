"""Stages 4 and 5, the results: a run's raw tree read into rows (:mod:`.tree`, :mod:`.fastapi_tree`),
Triton's statistics and metrics (:mod:`.stats`), the lab's claims checked (:mod:`.findings`, the best
variant :mod:`.best`), the report (:mod:`.report`) and side-by-side runs (:mod:`.compare`). Everything
reads records through :mod:`serve_system.node.records`."""
