"""The images in a request's messages, as the served engine needs them: each one's width and height, read
from its data URL's header (the pixels are not decoded). OpenAI chat's `image_url` parts, Responses'
`input_image` and Anthropic's base64 `image` blocks; audio parts are refused (the engine prices no audio
encoder), as are images by http URL (the engine fetches nothing: send data URLs)."""

from __future__ import annotations

import base64
import binascii
import io

from ..vision import image_key
from .openai_api import BadRequest

MAX_IMAGES = 256  # a request's images


def _size(data: bytes) -> tuple[int, int, str]:
    """An image's width, height and content key (engine/vision.image_key: the same image, the same key)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            return int(im.width), int(im.height), image_key(data)
    except (UnidentifiedImageError, OSError, ValueError):
        raise BadRequest("an image could not be read (JPEG, PNG, WebP, GIF or BMP)", "messages") from None


def _b64(s: str) -> bytes:
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("an image's base64 data is not valid", "messages") from None


def _url_image(url) -> tuple[int, int, str]:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise BadRequest(
            "images must be data URLs (data:image/...;base64,...): goodbench serve fetches nothing", "messages"
        )
    return _size(_b64(url.split(";base64,", 1)[1]))


def _part(p) -> tuple[int, int, str] | None:
    """One content part's image size and key (None: not an image)."""
    if not isinstance(p, dict):
        return None
    kind = p.get("type")
    if kind in ("input_audio", "audio_url"):
        raise BadRequest("audio is not served: the reference engine prices no audio encoder", "messages")
    if kind == "image_url":
        u = p.get("image_url")
        return _url_image(u.get("url") if isinstance(u, dict) else u)
    if kind == "input_image":
        return _url_image(p.get("image_url"))
    if kind == "image":
        src = p.get("source") or {}
        if src.get("type") != "base64":
            raise BadRequest("images must be base64 sources: goodbench serve fetches nothing", "messages")
        return _size(_b64(src.get("data") or ""))
    return None


def images(messages) -> tuple[tuple[tuple[int, int], ...], tuple[str, ...]]:
    """(width, height) of every image in the messages, in order, and their content keys."""
    out = []
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        for p in content if isinstance(content, list) else ():
            size = _part(p)
            if size is not None:
                out.append(size)
                if len(out) > MAX_IMAGES:
                    raise BadRequest(f"at most {MAX_IMAGES} images a request", "messages")
    return tuple((w, h) for w, h, _ in out), tuple(k for _, _, k in out)


def extras(body: dict, adapters: tuple) -> tuple[str | None, tuple, tuple]:
    """What a request asks of the engine beyond its text: the LoRA adapter it names as its model (None: the
    base model), its images' sizes and their content keys."""
    model = body.get("model")
    msgs = body.get("messages") if "messages" in body else body.get("input")
    return (model if model in adapters else None), *images(msgs)


def refusal(e: Exception, max_model_len: int, seq) -> str:
    """The 400's message for a request the engine refused: a text model given images, or one too long."""
    from ..core import NoVision

    if isinstance(e, NoVision):
        return str(e)
    return f"This model's maximum context length is {max_model_len} tokens: {e}"


def image_tokens(model, sizes: tuple) -> int:
    """The prompt tokens these images become on this model (engine/vision.Vision.tokens; 0 on a text model,
    which refuses them when the request reaches the engine)."""
    v = model.vision
    return 0 if v is None else sum(v.prompt_tokens(w, h) for w, h in sizes)


async def preprocess(queue, clock, work) -> float:
    """Wait for this request's images to be decoded (a free decoding thread) and for their turn on the front
    end's one processor and its preprocessing (frontend.MediaQueue, work a frontend.MediaWork); returns the
    seconds waited."""
    import asyncio

    start = clock()
    await asyncio.sleep(max(0.0, queue.decoded(start, work) - start))
    now = clock()
    await asyncio.sleep(max(0.0, queue.done(now, work) - now))
    return clock() - start
