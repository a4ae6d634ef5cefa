"""Fixtures of the Chameleon tests (the HTTP-level fake, credentials, a loopback "sshd")."""

from chi_harness import chi_env, fake, sshd

__all__ = ["chi_env", "fake", "sshd"]
