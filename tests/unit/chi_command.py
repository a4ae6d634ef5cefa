"""Run one provisioning command in a process of its own against the HTTP-level fake Chameleon.

``python tests/unit/chi_command.py STATE.json COMMAND ARG...`` loads the fake's state that a test
wrote (:meth:`FakeChameleon.dump`), serves it through requests-mock in this process, runs
``chi_scripts/COMMAND.py ARG...`` (:func:`serve_system.commands.provision.script_main`) and writes
the state back, however the command ended. What only a real process shows is checked this way:
what reaches the terminal's stderr (no third-party warnings), and Ctrl-C (SIGINT to the process
group, exit status 130, probes killed). The environment (``CHI_RESOURCE_API_URL``, credentials)
comes from the test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fakes package

import requests_mock
from fakes.chameleon import FakeChameleon

from serve_system import interrupt
from serve_system.commands.provision import script_main


def main(argv: list[str]) -> int:
    state, command, args = Path(argv[0]), argv[1], argv[2:]
    fake = FakeChameleon.load(state)
    with requests_mock.Mocker() as mocker:
        fake.install(mocker)
        try:
            return script_main(command, args)
        finally:
            fake.dump(state)


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    if rc == 130:  # as chi_scripts/*.py and serve-system end after Ctrl-C
        interrupt.exit_now(rc)
    sys.exit(rc)
