"""Sub-commands of ``serve-system``; each module exposes ``register(subparsers)``."""
