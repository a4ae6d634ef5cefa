"""Fakes of external services, at the protocol level (never of our own code)."""
