"""Experiment specs: the typed model (:mod:`.models`), the file reader (:mod:`.reader`), the messages
users read (:mod:`.messages`) and sweep expansion (:mod:`.sweeps`)."""
