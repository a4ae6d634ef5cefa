"""Stage 1, provisioning: providers behind one protocol, the shared finish step, roster, status board.

* :mod:`.base`: the :class:`~.base.Provider` protocol, launch requests, progress, :func:`~.base.finish`
  (host keys + inventory, written once for every provider);
* :mod:`.chameleon`: bare-metal nodes through python-chi (credentials, leases, servers);
* :mod:`.local`: rehearsal nodes in podman;
* :mod:`.roster`: a class roster, per-student nodes and access sheets;
* :mod:`.board`: the status board (every node probed at once).
"""
