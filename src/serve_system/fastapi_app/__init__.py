"""The lab's FastAPI inference endpoint, as our own code.

``POST /predict`` takes ``{"image": "<base64>"}`` and answers ``{"prediction": label,
"probability": p}``; ``GET /health`` says whether the model is loaded (the container's HEALTHCHECK
uses it); Swagger UI is at ``/docs``. The runtime (ONNX Runtime or PyTorch), the model file and the
input limits come from ``SERVE_FASTAPI_*`` environment variables (see :mod:`.settings`).

Run it with ``python -m serve_system.fastapi_app`` or
``uvicorn --factory serve_system.fastapi_app.app:create_app``.
"""
