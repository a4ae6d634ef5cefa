"""serve-system-chi: the "system optimizations for serving" lab as one reproducible pipeline."""

__version__ = "0.1.0"
