"""What runs on the node, standard library only: the node-side runner (:mod:`.runner`) with the processes
it drives (:mod:`.nodeproc`), Triton's HTTP API as it uses it (:mod:`.tritonapi`), the records it writes
(:mod:`.records`), the lines it speaks (:mod:`.events`), its records' archive (:mod:`.archive`), the
host-side wait for each level (:mod:`.follow`) and the FastAPI client (:mod:`.fastapi_bench`). The
controller imports the records, events and archive from here too."""
