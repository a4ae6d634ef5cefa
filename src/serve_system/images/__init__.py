"""Rehearsal images: recipes (one folder each), the builder (:mod:`.build`), the FastAPI endpoint's image
(:mod:`.fastapi`) and the set the rehearsal nodes use (:mod:`.stack`)."""
