"""Images and audio in requests: a class's `images` (count per request), `image_size` (the side in pixels,
or WIDTHxHEIGHT), `image_dir` (files to send instead of synthetic ones) and `audio_s` (seconds of audio per
request), drawn per request and sent as the API's content parts (chat: `image_url` data URLs and
`input_audio`; Responses: `input_image`; Messages: base64 `image` blocks). Synthetic images are unique per
request (a seeded gradient with noise, JPEG), so a server's multimodal caches see no repeats; audio is
seeded noise as 16 kHz mono WAV. Everything is built before the clock starts, and the bytes are bounded."""

from __future__ import annotations

import base64
import io
import os
import struct
from dataclasses import dataclass

import numpy as np

from ..engine.vision import image_key
from ..errors import UsageError
from .lengths import sample_lengths
from .spec import LengthDist, MediaSpec

MAX_SIDE = 8192  # pixels
MAX_REQUEST_BYTES = 64 << 20  # media in one request (before base64)
MAX_RUN_BYTES = 2 << 30  # media built for a whole run
AUDIO_RATE = 16_000
IMAGE_TYPES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp")


@dataclass(frozen=True)
class MediaItem:
    kind: str  # image | audio
    mime: str
    data: bytes
    width: int = 0
    height: int = 0
    ms: int = 0


def parse_media(c: dict, key: str, length) -> MediaSpec | None:
    """A [[class]] table's media keys (None when it has none); `length` parses a count/size distribution
    (parse._length). UsageError / the parser's InputError naming the key."""
    if not any(k in c for k in ("images", "image_size", "image_dir", "audio_s")):
        return None
    images = length(c.get("images", 1 if "image_dir" in c or "image_size" in c else 0), f"{key}.images")
    size = c.get("image_size", 512)
    if isinstance(size, str) and "x" in size.lower():
        try:
            w, h = (int(x) for x in size.lower().split("x"))
        except ValueError:
            raise UsageError(f"{key}.image_size: {size!r} is not WIDTHxHEIGHT") from None
        width, height = LengthDist(value=w), LengthDist(value=h)
    else:
        width, height = length(size, f"{key}.image_size"), None
    for d in (width, height):
        if d is not None and max(d.value, d.max if d.dist == "uniform" else 0) > MAX_SIDE:
            raise UsageError(f"{key}.image_size: at most {MAX_SIDE} pixels a side")
    image_dir = c.get("image_dir")
    if image_dir is not None and not (isinstance(image_dir, str) and os.path.isdir(image_dir)):
        raise UsageError(f"{key}.image_dir: {image_dir!r} is not a folder")
    audio = c.get("audio_s")
    audio_ms = None
    if audio is not None:
        if isinstance(audio, bool) or not isinstance(audio, (int, float)) or not 0 < audio <= 600:
            raise UsageError(f"{key}.audio_s: seconds of audio per request, in (0, 600]")
        audio_ms = LengthDist(value=int(round(audio * 1000)))
    return MediaSpec(images, width, height, image_dir, audio_ms)


def synthetic_image(w: int, h: int, seed: int) -> bytes:
    """A w x h JPEG, unique to the seed: a colour gradient with coarse noise (compresses as photos do)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 255, 3)
    slope = rng.uniform(-0.5, 0.5, (3, 2))
    x, y = np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32)[:, None]
    coarse = rng.normal(0, 40, (-(-h // 16), -(-w // 16), 3)).astype(np.float32)  # 16-pixel cells, the last cut
    img = coarse.repeat(16, axis=0).repeat(16, axis=1)[:h, :w]  # (1080 = 67.5 x 16); float32: 5x faster at 1080p
    for i in range(3):
        img[..., i] += np.float32(base[i]) + np.float32(slope[i, 0]) * x + np.float32(slope[i, 1]) * y
    out = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=85)
    return out.getvalue()


def wav(ms: int, seed: int) -> bytes:
    """ms of seeded noise as 16 kHz mono 16-bit PCM WAV."""
    n = AUDIO_RATE * ms // 1000
    pcm = (np.random.default_rng(seed).normal(0, 3000, n).clip(-32768, 32767).astype("<i2")).tobytes()
    head = (
        b"RIFF"
        + struct.pack("<I", 36 + len(pcm))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, AUDIO_RATE, AUDIO_RATE * 2, 2, 16)
    )
    return head + b"data" + struct.pack("<I", len(pcm)) + pcm


def _files(folder: str) -> list[str]:
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith(IMAGE_TYPES))
    if not names:
        raise UsageError(f"image_dir {folder}: no image files ({', '.join(IMAGE_TYPES)})")
    return [os.path.join(folder, f) for f in names]


def _file_item(path: str) -> MediaItem:
    from PIL import Image

    with open(path, "rb") as f:
        data = f.read()
    with Image.open(io.BytesIO(data)) as im:
        w, h, fmt = im.width, im.height, (im.format or "jpeg").lower()
    return MediaItem("image", f"image/{fmt}", data, w, h)


def draw(m: MediaSpec, n: int, seed: int) -> list[tuple[MediaItem, ...]]:
    """Each of n requests' media, reproducible for the seed (UsageError past the byte bounds)."""
    rng = np.random.default_rng(seed)
    counts = sample_lengths(m.images, n, rng) if m.sends_images else np.zeros(n, int)
    files = _files(m.image_dir) if m.image_dir else None
    out, total = [], 0
    for i in range(n):
        items = []
        for j in range(int(counts[i])):
            if files:
                items.append(_file_item(files[int(rng.integers(len(files)))]))
                continue
            w = int(sample_lengths(m.width, 1, rng)[0])
            h = w if m.height is None else int(sample_lengths(m.height, 1, rng)[0])
            items.append(MediaItem("image", "image/jpeg", synthetic_image(w, h, seed * 1_000_003 + i * 997 + j), w, h))
        if m.audio_ms is not None:
            ms = int(sample_lengths(m.audio_ms, 1, rng)[0])
            items.append(MediaItem("audio", "audio/wav", wav(ms, seed * 7_919 + i), ms=ms))
        size = sum(len(x.data) for x in items)
        if size > MAX_REQUEST_BYTES:
            raise UsageError(f"a request's media is {size / 2**20:.0f} MiB: at most {MAX_REQUEST_BYTES >> 20} MiB each")
        total += size
        if total > MAX_RUN_BYTES:
            raise UsageError(f"the run's media passes {MAX_RUN_BYTES >> 30} GiB: fewer requests, images or pixels")
        out.append(tuple(items))
    return out


def _b64(x: MediaItem) -> str:
    return base64.b64encode(x.data).decode("ascii")


def content(api: str, text: str, items: tuple[MediaItem, ...]) -> list[dict]:
    """A user message's content parts in the API's shape: the media first, then the text."""
    parts = []
    for x in items:
        if x.kind == "audio":
            if api != "chat":
                raise UsageError(f"audio needs the chat API (OpenAI's input_audio); the workload speaks {api}")
            parts.append({"type": "input_audio", "input_audio": {"data": _b64(x), "format": "wav"}})
        elif api == "chat":
            parts.append({"type": "image_url", "image_url": {"url": f"data:{x.mime};base64,{_b64(x)}"}})
        elif api == "responses":
            parts.append({"type": "input_image", "image_url": f"data:{x.mime};base64,{_b64(x)}"})
        else:
            parts.append({"type": "image", "source": {"type": "base64", "media_type": x.mime, "data": _b64(x)}})
    text_part = {"type": "input_text" if api == "responses" else "text", "text": text}
    return parts + [text_part]


def stats(items: tuple[MediaItem, ...]) -> dict:
    """What a record keeps of a request's media: images, their pixels, the bytes, the audio's ms."""
    imgs = [x for x in items if x.kind == "image"]
    return {
        "sizes": tuple((x.width, x.height) for x in imgs),  # the engine's (not record fields)
        "ids": tuple(image_key(x.data) for x in imgs),
        "images": len(imgs),
        "image_pixels": sum(x.width * x.height for x in imgs),
        "media_bytes": sum(len(x.data) for x in items),
        "audio_ms": sum(x.ms for x in items if x.kind == "audio"),
    }
