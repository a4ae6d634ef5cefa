"""The stack's web page: upload a food photo, see the predicted Food-11 class and its probability.

Our own stand-in for the lab's Flask app (gourmetgram), used when its source is not given. The page
sends the photo to this server, which asks one of two backends, chosen on the page (default: the
stack's mode): Triton's ``food_classifier`` (the lab's Python-backend model, input ``INPUT_IMAGE``
as base64 BYTES, outputs ``FOOD_LABEL`` and ``PROBABILITY``) or the lab's FastAPI endpoint
(``POST /predict``). Answers from stand-in weights say so. Errors (not an image, a backend that is
down or refuses the request) come back as one sentence the page shows, never a stack trace.

It ships in the FastAPI endpoint's image (no image of its own): run it with
``python -m serve_system.webapp``; settings come from ``SERVE_WEBAPP_*`` variables (see :mod:`.settings`).
"""
