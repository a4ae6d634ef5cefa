"""Fixtures of the Chameleon tests (the HTTP-level fake, credentials, a loopback "sshd")."""

from chi_harness import chi_env, fake, sshd
from fuzzseed import EXAMPLES, SEED

__all__ = ["chi_env", "fake", "sshd"]


def pytest_terminal_summary(terminalreporter: object) -> None:
    """The fuzz tests' seed, at the end of every run (also with -q), so a CI failure can be replayed."""
    terminalreporter.write_line(  # type: ignore[attr-defined]
        f"fuzz seed {SEED} (replay: SERVE_SYSTEM_FUZZ_SEED={SEED}), {EXAMPLES} examples per reader")
