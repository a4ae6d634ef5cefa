"""Stage 3, the experiment: one typed request (:mod:`.planning`: hosts, settings, lease policy) plans a
run, the engine's defaults all in :mod:`.defaults`; a spec (:mod:`.spec`) becomes a plan per host
(:mod:`.plan`, with Triton's configs parsed, checked and adapted by :mod:`serve_system.triton`,
perf_analyzer's command lines by :mod:`.perfargv`, from typed settings), written to its run folder
(:mod:`.runfolder`), which the node-side runner (:mod:`.runner`, standard library only, shipped with
:mod:`.records`, its records' archive :mod:`.archive` and the FastAPI client :mod:`.fastapi_bench`)
measures; :mod:`.perf` parses what perf_analyzer prints. :mod:`.tritonlocal` runs a real Triton on this
machine for ``validate --with-triton`` and the tests."""
