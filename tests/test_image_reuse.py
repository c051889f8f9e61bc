"""The same image sent again: vLLM hashes each image's content into its prompt blocks (so the same image before
the same text is a prefix-cache hit) and keeps encoder outputs by that hash (engine/encodercache.py). The
engine does both, simulated and served; unique images share nothing, as before."""

import pytest

import goodbench as gb
from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine
from goodbench.engine.encodercache import EncoderCache
from goodbench.engine.kvcache import Seq
from goodbench.workloads import media as mediamod
from goodbench.workloads.parse import parse_workload

VLM = "qwen2.5-vl-7b"


def _seq(i, key, text_hashes=(1, 2, 3)):
    s = Seq(i, 48, 2, hashes=text_hashes)
    s.images, s.image_ids = ((448, 448),), (key,)
    return s


def test_the_same_image_before_the_same_text_shares_its_blocks_a_different_one_nothing():
    eng = Engine(EngineConfig(model=VLM, enable_prefix_caching=True))
    a, b, c = _seq(0, "cat"), _seq(1, "cat"), _seq(2, "dog")
    for s in (a, b, c):
        eng._vision(s)
    n_img = 256 + 2  # 448 x 448 on Qwen2.5-VL: 16 x 16 merged patches, and its two markers
    assert a.prompt_len == 48 + n_img and a.hashes == b.hashes
    assert len(a.hashes) == n_img // 16 + 3 and not set(a.hashes) & set(c.hashes)
    d = _seq(3, "cat", text_hashes=(7, 8, 9))  # the same image, other text: its image blocks only
    eng._vision(d)
    assert d.hashes[: n_img // 16] == a.hashes[: n_img // 16] and d.hashes[n_img // 16 :] != a.hashes[n_img // 16 :]
    unknown = Seq(4, 48, 2, hashes=(1, 2, 3))
    unknown.images = ((448, 448),)  # no content key: it can match nothing
    eng._vision(unknown)
    assert unknown.hashes == ()


def test_the_encoder_skips_images_the_prefix_or_encoder_cache_holds():
    cache = EncoderCache(capacity=600)
    parts = (("cat", 256, 0.01, 258), ("dog", 256, 0.01, 516))
    first = cache.plan(parts, n_cached=0)
    assert first[:2] == (512, 0.02) and first[4] == 0
    cache.keep(first)
    assert cache.plan(parts, n_cached=0)[:2] == (0, 0.0)  # both outputs held
    assert cache.plan((("owl", 256, 0.01, 258),), n_cached=272)[:2] == (0, 0.0)  # its tokens all cached
    cache.keep(cache.plan((("owl", 256, 0.01, 258),), n_cached=0))  # 3 x 256 > 600: the oldest, cat, goes
    assert list(cache.held) == ["dog", "owl"] and cache.plan(parts, n_cached=0)[:2] == (256, 0.01)


def _image_dir(tmp_path, n):
    d = tmp_path / "images"
    d.mkdir()
    for i in range(n):
        (d / f"{i}.jpg").write_bytes(mediamod.synthetic_image(448, 448, 100 + i))
    return d


WORKLOAD = """name = "repeat-images"
generator = "mixed"
endpoint = "chat"
num_requests = 24
seed = 3
[arrival]
rate = 2
[[class]]
name = "ask"
input = 30
output = 8
images = 1
image_dir = "{d}"
"""


def test_a_folder_of_few_images_is_reused_simulated_and_served(tmp_path):
    spec = parse_workload(WORKLOAD.format(d=_image_dir(tmp_path, 2)), "w.toml")
    cfg = EngineConfig(model=VLM, enable_prefix_caching=True, fixed_step_ms=5.0)
    sim = gb.simulate(spec, cfg, result_dir=str(tmp_path))
    st = sim.summary["simulation"]
    assert st["images"] == 24 and st["images_not_encoded"] >= 20  # two images: encoded once each, then held
    recs = sorted(sim.records(), key=lambda r: r.sent_at)
    assert recs[-1].cached_tokens >= 256  # the image's blocks (its text is its own)
    # a unique image per request: nothing to reuse, as before
    unique = gb.simulate(
        parse_workload(WORKLOAD.replace('image_dir = "{d}"', 'image_size = "448x448"'), "u.toml"),
        cfg,
        result_dir=str(tmp_path),
    )
    assert unique.summary["simulation"]["images_not_encoded"] == 0
    assert all(not r.cached_tokens for r in unique.records())
    # goodbench serve keys the images it is sent alike: its prefix-cache counters see the reuse
    live = gb.run(spec, engine=cfg, result_dir=str(tmp_path))
    assert live.summary["prefix_cache"]["hit_rate"] == pytest.approx(sim.summary["prefix_cache"]["hit_rate"], abs=0.05)
