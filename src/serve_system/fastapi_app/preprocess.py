"""Decode and preprocess an image exactly like the lab's torchvision pipeline, without torchvision.

The lab uses ``Resize((224, 224))`` (bilinear on a PIL image), ``CenterCrop(224)``, ``ToTensor()``
and ``Normalize(ImageNet mean, std)``. On PIL images torchvision's Resize is PIL's bilinear resize,
so the same steps in PIL + numpy give the same tensor, and the ONNX image needs no torch.
"""

from __future__ import annotations

import base64
import binascii
import io

import numpy as np
from PIL import Image, UnidentifiedImageError

SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class BadImage(ValueError):
    """Input the endpoint refuses; ``status`` is the HTTP status to answer with (400 or 413)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def decode_base64(text: str, max_bytes: int) -> bytes:
    """The bytes of a base64 string (a ``data:...;base64,`` prefix and line breaks are allowed)."""
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    compact = "".join(text.split())
    if not compact:
        raise BadImage("image is empty: put a base64-encoded JPEG or PNG in the 'image' field")
    if len(compact) // 4 * 3 > max_bytes + 2:
        raise BadImage(f"image is about {len(compact) // 4 * 3} bytes after decoding; "
                       f"the limit is {max_bytes} bytes (SERVE_FASTAPI_MAX_IMAGE_BYTES)", status=413)
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadImage(f"image is not valid base64 ({exc}): encode the file bytes with base64") from None
    if not data:
        raise BadImage("image is empty after base64 decoding: send the bytes of a JPEG or PNG file")
    if len(data) > max_bytes:
        raise BadImage(f"image is {len(data)} bytes after decoding; the limit is {max_bytes} bytes "
                       "(SERVE_FASTAPI_MAX_IMAGE_BYTES)", status=413)
    return data


def open_image(data: bytes, max_pixels: int) -> Image.Image:
    """A decoded RGB image; refuses files that are not images and images over ``max_pixels``."""
    try:
        img = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise BadImage(f"image is not a picture PIL can read ({len(data)} bytes, starting {data[:8]!r}): "
                       "send a JPEG or PNG file") from None
    except Exception as exc:  # noqa: BLE001 - PIL raises many kinds on corrupt headers
        raise BadImage(f"image data is corrupt or truncated: {exc}") from None
    w, h = img.size
    if w * h > max_pixels:
        raise BadImage(f"image is {w}x{h} = {w * h} pixels; the limit is {max_pixels} "
                       "(SERVE_FASTAPI_MAX_IMAGE_PIXELS)", status=413)
    if w == 0 or h == 0:
        raise BadImage(f"image has no pixels ({w}x{h})")
    try:
        return img.convert("RGB")
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt data surfaces here, when decoding
        raise BadImage(f"image data is corrupt or truncated: {exc}") from None


def to_tensor(img: Image.Image) -> np.ndarray:
    """[1, 3, 224, 224] float32: resize to 224x224 (bilinear), centre crop 224, scale to [0,1], normalise."""
    resized = img.resize((SIZE, SIZE), Image.Resampling.BILINEAR)
    w, h = resized.size
    left, top = (w - SIZE) // 2, (h - SIZE) // 2
    cropped = resized.crop((left, top, left + SIZE, top + SIZE))
    arr = np.asarray(cropped, dtype=np.float32) / 255.0
    arr = (arr - MEAN) / STD
    return np.ascontiguousarray(arr.transpose(2, 0, 1)[None, ...], dtype=np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (so a probability never rounds above 1)."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
