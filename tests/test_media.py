"""Images and audio (issue 45, part 1): multimodal traffic as each API's content parts, the media in
records and the summary, a vision-language model's image tokens and encoder in the engine, served and
simulated alike, and the preprocessing fit."""

from __future__ import annotations

import base64
import json

import pytest

import goodbench as gb
from goodbench.engine import visionfit
from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine, RequestTooLong
from goodbench.engine.costmodel import CostModel
from goodbench.engine.kvcache import Seq
from goodbench.engine.models import get_model
from goodbench.engine.serve.server import EngineServer, ServeOptions
from goodbench.engine.vision import PREP_IMAGE_S, PREP_PIXEL_S
from goodbench.errors import InputError, UsageError
from goodbench.records import RequestRecord
from goodbench.workloads import media as mediamod
from goodbench.workloads.parse import parse_workload

WORKLOAD = """
name = "mm"
endpoint = "chat"
num_requests = 12
[arrival]
rate = 20
[[class]]
name = "one"
weight = 0.5
input = 32
output = 4
images = 1
image_size = 448
[[class]]
name = "three"
weight = 0.5
input = 32
output = 4
images = 3
image_size = "640x480"
"""


def test_a_media_class_is_parsed_and_bad_keys_are_refused():
    spec = parse_workload(WORKLOAD, "mm.toml")
    assert spec.classes[1].media.images.value == 3 and spec.classes[1].media.height.value == 480
    with pytest.raises(InputError, match="WIDTHxHEIGHT"):
        parse_workload(WORKLOAD.replace('"640x480"', '"640x480x3"'), "mm.toml")
    with pytest.raises(InputError, match="at most 8192"):
        parse_workload(WORKLOAD.replace("image_size = 448", "image_size = 9000"), "mm.toml")
    with pytest.raises(InputError, match="audio_s"):
        parse_workload(WORKLOAD.replace("images = 1", "audio_s = -1"), "mm.toml")
    text_only = parse_workload(WORKLOAD.split("[[class]]")[0] + '[[class]]\nname = "t"\n', "t.toml")
    assert "media" not in text_only.to_dict()["classes"][0]  # hashes of media-free workloads kept


def test_every_request_gets_its_own_images_in_its_apis_parts(tok):
    from goodbench.workloads.plan import build_plan

    spec = parse_workload(WORKLOAD, "mm.toml")
    reqs = build_plan(spec, tok).requests
    parts = [p for r in reqs for p in r.prompt[0]["content"] if p["type"] == "image_url"]
    assert len({p["image_url"]["url"] for p in parts}) == len(parts) == sum(r.media["images"] for r in reqs)
    assert parts[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    items = mediamod.draw(spec.classes[0].media, 1, 0)[0]
    assert mediamod.content("responses", "hi", items)[0]["type"] == "input_image"
    assert mediamod.content("messages", "hi", items)[0]["source"]["type"] == "base64"
    with pytest.raises(UsageError, match="endpoint-type chat"):
        build_plan(parse_workload(WORKLOAD.replace('endpoint = "chat"', 'endpoint = "completions"'), "c.toml"), tok)


def test_media_bytes_are_bounded_before_the_clock(monkeypatch):
    monkeypatch.setattr(mediamod, "MAX_REQUEST_BYTES", 1000)
    with pytest.raises(UsageError, match="at most"):
        mediamod.draw(parse_workload(WORKLOAD, "mm.toml").classes[0].media, 2, 0)


@pytest.mark.parametrize("w,h", [(1920, 1080), (1280, 720), (100, 7), (5, 5)])
def test_a_synthetic_image_of_any_size_is_a_jpeg_of_that_size(w, h):
    import io

    from PIL import Image

    # 1080 is not a multiple of the noise's 16-pixel cells: a 1080p class once failed to draw
    img = Image.open(io.BytesIO(mediamod.synthetic_image(w, h, 3)))
    assert img.format == "JPEG" and img.size == (w, h)


def test_records_keep_media_through_json_and_columns():
    from goodbench.columnar import RecordArrays

    media = {"images": 2, "image_pixels": 2 * 448 * 448, "media_bytes": 51234, "audio_ms": 0}
    recs = [
        RequestRecord("a", "c", 0.0, 0.0, 0.1, 0.2, chunk_times=(0.1, 0.2), chunk_tokens=(1, 1), **media),
        RequestRecord("b", "c", 0.0, 0.0, 0.1, 0.2, chunk_times=(0.1, 0.2), chunk_tokens=(1, 1)),
    ]
    back = [RequestRecord.from_dict(json.loads(r.to_json())) for r in recs]
    assert back[0].image_pixels == media["image_pixels"] and "images" not in json.loads(recs[1].to_json())
    cols = RecordArrays.from_records(recs).to_records()
    assert (cols[0].images, cols[0].media_bytes, cols[1].images) == (2, 51234, None)


# ---------------------------------------------------------------- the engine
def test_image_tokens_as_the_processors_count_them():
    qwen = get_model("qwen2.5-vl-7b").vision
    assert qwen.tokens(1920, 1080) == (2691, 10764)  # vLLM issue #41267: 2,718 prompt tokens with its text
    assert qwen.tokens(10, 10)[0] == 4 and qwen.tokens(20000, 20000)[0] <= 16384  # min and max pixels
    assert get_model("qwen3-vl-8b").vision.tokens(1280, 720)[0] == 880  # sgl-bench measured 882 with its markers
    assert get_model("llava-1.5-7b").vision.tokens(1920, 1080) == (576, 576)


def test_images_become_prompt_tokens_and_encoder_time_within_the_encoder_budget():
    eng = Engine(EngineConfig(model="qwen2.5-vl-7b", max_num_batched_tokens=4096))
    a, b = Seq(0, 100, 2), Seq(1, 100, 2)
    a.images, b.images = ((1920, 1080),), ((1920, 1080),)
    eng.add(a)
    eng.add(b)
    assert a.prompt_len == 100 + 2691 + 2 and a.hashes == ()  # and <|vision_start|>, <|vision_end|>
    first = eng.step()
    assert [s.id for s in first.batch.seqs] == [0]  # 2 x 2,691 image tokens > the 4,096 encoder budget
    # the tower's seconds only: the preprocessing is the front end's, before the engine (frontend.MediaQueue)
    assert 0 < first.batch.encoder_s < PREP_IMAGE_S + PREP_PIXEL_S * 1920 * 1080
    with pytest.raises(RequestTooLong, match="takes no images"):
        text = Seq(2, 10, 2)
        text.images = ((64, 64),)
        Engine(EngineConfig()).add(text)


def test_images_are_decoded_side_by_side_then_processed_one_request_at_a_time_before_the_engine():
    from goodbench.engine.frontend import DECODE_SHARE, FrontEnd, MediaWork
    from goodbench.engine.virtual.arrivals import OpenArrivals

    fe = FrontEnd(0.002, image_s=0.01, pixel_s=1e-9)
    work = fe.media(((1000, 1000), (10, 10)))
    assert work.total == pytest.approx(0.02 + 1e-3 + 1e-7)  # a lone request pays both stages: the fit's sum
    assert work.decode_s == pytest.approx(DECODE_SHARE * (1e-3 + 1e-7))  # the per-image term is the processor's
    arr = OpenArrivals([0.0, 0.0, 0.0, 0.5, 0.5], fe, [10] * 5)
    # request 0 (front end 2 ms) decodes 5 ms, processes 10 (done 0.017); request 2 decodes 20 ms meanwhile on
    # another thread and reaches the free processor at 0.022 (done 0.032)
    arr.media = [MediaWork(0.005, 0.01), None, MediaWork(0.02, 0.01), MediaWork(0.0, 0.01), MediaWork(0.001, 0.03)]
    got = [arr.pop(9.0) for _ in range(5)]
    want = [(0.002, 1), (0.017, 0), (0.032, 2), (0.512, 3), (0.542, 4)]  # 4 decoded at 0.503, behind 3 until 0.512
    assert got == [pytest.approx(x) for x in want]
    assert arr.pop(9.0) is None and arr.sent == [0.0, 0.0, 0.0, 0.5, 0.5]
    slow = OpenArrivals([0.0, 0.0], fe, [10] * 2)  # the processor is first come first served: 1 waits for 0
    slow.media = [MediaWork(0.0, 0.05), MediaWork(0.0, 0.05)]
    assert [slow.pop(9.0) for _ in range(2)] == [pytest.approx((0.052, 0)), pytest.approx((0.102, 1))]


def test_a_fleets_api_servers_preprocess_side_by_side_and_a_rendering_router_pays_the_front_end_twice():
    from goodbench.engine.frontend import DECODE_THREADS, FrontEnd, MediaQueue, MediaWork
    from goodbench.engine.router import front_end_for

    q = MediaQueue(2)  # two replicas' API servers: the third request waits for the first free one
    works = [MediaWork(0.0, p) for p in (0.3, 0.1, 0.1)]
    assert [q.done(0.0, w) for w in works] == [0.3, 0.1, pytest.approx(0.2)]
    decodes = [q.decoded(0.0, MediaWork(0.1, 0.0)) for _ in range(2 * DECODE_THREADS + 1)]
    assert decodes == [0.1] * (2 * DECODE_THREADS) + [pytest.approx(0.2)]  # each server's threads, side by side
    fe = FrontEnd(0.002, token_s=1e-6, image_s=0.01)
    assert front_end_for("cache_aware", True, fe) == FrontEnd(0.004, token_s=2e-6, image_s=0.01)
    assert front_end_for("cache_aware", False, fe) is fe and front_end_for("round_robin", True, fe) is fe


def test_served_images_wait_their_turn_on_one_preprocessor():
    import asyncio
    import time

    from goodbench.engine.frontend import MediaQueue, MediaWork
    from goodbench.engine.serve.media import preprocess

    async def two():
        q, t0 = MediaQueue(), time.monotonic()
        work = MediaWork(0.05, 0.05)  # both decode at once, then process one after the other
        waits = await asyncio.gather(*(preprocess(q, time.monotonic, work) for _ in range(2)))
        return sorted(waits), time.monotonic() - t0

    (a, b), took = asyncio.run(two())
    assert a == pytest.approx(0.1, abs=0.03) and b == pytest.approx(0.15, abs=0.03) and took >= 0.15


def test_simulate_refuses_images_on_a_text_model_and_audio_before_the_clock(tmp_path):
    spec = parse_workload(WORKLOAD, "mm.toml")
    with pytest.raises(UsageError, match="takes none"):
        gb.simulate(spec, EngineConfig(), result_dir=str(tmp_path))
    with pytest.raises(UsageError, match="audio"):
        gb.simulate(parse_workload(WORKLOAD + "audio_s = 1.0\n", "a.toml"), EngineConfig(model="qwen2.5-vl-7b"))
    run = gb.simulate(spec, EngineConfig(model="qwen2.5-vl-7b"), result_dir=str(tmp_path))
    m = run.summary["media"]
    assert m["requests"] == 12 and set(m["ttft_ms_by_images"]) == {"1", "3"}
    assert m["prompt_tokens_mean"] > 300  # the server's count: 448 x 448 is 256 tokens
    u = run.summary["engine_uncertainty"]
    assert (
        "held-out lone-request VLM TTFTs" in u["basis"] and "vlm_loaded.py" in u["basis"] and u["step_time_pct"] >= 17
    )


def test_the_preprocessing_terms_are_the_fit_to_their_source():
    a, b = visionfit.fit()
    assert a == pytest.approx(PREP_IMAGE_S, rel=0.01) and b == pytest.approx(PREP_PIXEL_S, rel=0.01)


def test_a_vision_config_json_reads_as_the_built_in_shape():
    from goodbench.engine.hfconfig import model_from_hf

    text = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28}
    text |= {"num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 128000}
    tower = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "patch_size": 14}
    tower |= {"spatial_merge_size": 2, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}
    d = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], **text, "vision_config": tower}
    m, built = model_from_hf(d, "x/config.json"), get_model("qwen2.5-vl-7b")
    assert m.vision.tokens(1280, 720) == built.vision.tokens(1280, 720) and m.vision.window == built.vision.window
    assert (m.vision.hidden, m.vision.ffn, m.vision.gated) == (1280, 3420, True)
    qwen2 = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "num_heads": 16, "patch_size": 14}
    d2 = {**d, "architectures": ["Qwen2VLForConditionalGeneration"], "vision_config": qwen2}
    assert (model_from_hf(d2, "x/config.json").vision.hidden, model_from_hf(d2, "x/config.json").vision.ffn) == (
        1280,
        5120,
    )
    with pytest.raises(InputError, match="vision_config"):
        model_from_hf({k: v for k, v in d.items() if k != "vision_config"}, "x/config.json")


# ---------------------------------------------------------------- the served engine
def test_serve_counts_an_images_tokens_and_refuses_what_it_cannot_price(tok):
    from conftest import drive

    cfg = EngineConfig(model="qwen2.5-vl-7b", max_model_len=1024).resolved()
    srv = EngineServer(cfg, ServeOptions(), tok, CostModel.for_config(cfg, fixed_step_ms=2.0))
    jpeg = base64.b64encode(mediamod.synthetic_image(448, 448, 1)).decode()
    image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{jpeg}"}}

    async def fn(s, srv):
        out = []
        for extra in (image, {"type": "image_url", "image_url": {"url": "http://example.com/x.jpg"}},
                      {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}):  # fmt: skip
            msgs = [{"role": "user", "content": [extra, {"type": "text", "text": "what is this"}]}]
            body = (
                {"model": srv.model_name, "messages": msgs, "max_tokens": 2}
                if extra is not image
                else {"model": srv.model_name, "messages": msgs}
            )  # no max_tokens: the default leaves room for the image
            async with s.post("/v1/chat/completions", json=body) as r:
                out.append((r.status, await r.json()))
        return out

    ok, url, audio = drive(srv, fn)
    assert ok[0] == 200 and ok[1]["usage"]["prompt_tokens"] > 256  # 448 x 448: 256 image tokens, then the text
    assert ok[1]["usage"]["prompt_tokens"] + ok[1]["usage"]["completion_tokens"] == 1024  # to max_model_len
    assert url[0] == 400 and "data URLs" in url[1]["message"]
    assert audio[0] == 400 and "audio" in audio[1]["message"]
