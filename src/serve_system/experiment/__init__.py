"""Stage 3, the experiment: one typed request (:mod:`.planning`: hosts, settings, lease policy) plans a
run; a spec (:mod:`.spec`) becomes a plan per host (:mod:`.plan`, with Triton's configs parsed, checked
and adapted by :mod:`serve_system.triton`, perf_analyzer's command lines by :mod:`.perfargv` from typed
settings), written to its run folder (:mod:`.runfolder`) with each host's node bundle (:mod:`.roleview`),
which the node-side runner (:mod:`serve_system.node`: what runs on the node, the engine's defaults in
:mod:`serve_system.node.defaults`) measures; :mod:`.perf` parses what perf_analyzer prints.
:mod:`.tritonlocal` runs a real Triton on this machine for ``validate --with-triton`` and the tests."""
