"""Images on the real vLLM (CPU build): a tiny random-weight Qwen2-VL made locally (ci/real_vllm/tiny_vlm.py,
with torchvision kept apart from the venv: setup.sh says why), served by `vllm serve`, sent a run whose
requests carry one image each of two sizes, or none. The acid test of the engine's image tokens
(engine/vision.py, read from the same config.json by engine/hfvision.py): each request's prompt tokens as vLLM's
usage reports them, less the same run's text-only requests' template overhead, are exactly the tokens
goodbench says its image becomes. The same run against `goodbench serve` of that config.json reads alike."""

import json
import os

import pytest
from realvllm import SERVED_NAME, VLM, VllmServer

import goodbench as gb
from goodbench.api.enginefiles import load_model_file

pytestmark = pytest.mark.real_vllm
SIZES = {"square": (448, 448), "wide": (336, 224)}
WORKLOAD = """
name = "vlm"
generator = "mixed"
endpoint = "chat"
num_requests = 12
seed = 5
[arrival]
rate = 4
[[class]]
name = "text"
weight = 0.34
input = 24
output = 4
[[class]]
name = "square"
weight = 0.33
input = 24
output = 4
images = 1
image_size = "448x448"
[[class]]
name = "wide"
weight = 0.33
input = 24
output = 4
images = 1
image_size = "336x224"
"""


def _image_tokens(run) -> dict:
    """Per class, what vLLM's usage counted beyond the client's own text tokens, less the text-only requests'
    (the chat template's); every request of a class must agree."""
    recs = run.records()
    assert all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:2]
    extra: dict = {}
    for r in recs:
        assert r.prompt_tokens_server, "the server reported no usage"
        extra.setdefault(r.cls, set()).add(r.prompt_tokens_server - r.prompt_tokens)
    assert all(len(v) == 1 for v in extra.values()), extra
    base = extra.pop("text").pop()
    assert set(extra) == set(SIZES), extra
    media = run.summary["media"]
    assert media["requests"] == sum(1 for r in recs if r.cls != "text") and media["images_per_request"] == 1
    return {c: v.pop() - base for c, v in extra.items()}


def test_a_vlms_image_tokens_on_real_vllm_are_the_engines_and_goodbench_serve_reads_alike(tmp_path):
    config = os.path.join(VLM, "config.json")
    vision = load_model_file(config).vision
    want = {c: vision.tokens(w, h)[0] + vision.wrap for c, (w, h) in SIZES.items()}
    assert want == {"square": 256 + 2, "wide": 96 + 2}  # Qwen2-VL: (h/28)(w/28) pads, vision_start/_end around
    (tmp_path / "vlm.toml").write_text(WORKLOAD)
    spec = gb.load_workload(str(tmp_path / "vlm.toml"))
    srv = VllmServer(str(tmp_path), 2048, ("--enable-prompt-tokens-details",), "vlm", vlm=True).start()
    try:
        target = gb.Target(base_url=srv.base_url, model=SERVED_NAME)
        live = gb.run(spec, target, result_dir=str(tmp_path))
        reuse = gb.run(_reuse_spec(tmp_path), target, result_dir=str(tmp_path))
    finally:
        srv.stop()
    got = _image_tokens(live)
    print("vLLM", got, "goodbench's", want, json.dumps(live.summary["media"]))
    assert got == want
    engine = gb.EngineConfig(model=config, fixed_step_ms=5.0)
    served = _image_tokens(gb.run(spec, engine=engine, result_dir=str(tmp_path)))
    print("goodbench serve", served)
    assert served == want
    _same_images_hit_alike(reuse, gb.simulate(_reuse_spec(tmp_path), engine, result_dir=str(tmp_path)))


REUSE = """
name = "vlm-reuse"
generator = "mixed"
endpoint = "chat"
num_requests = 10
seed = 6
[arrival]
process = "constant"
rate = 1
[[class]]
name = "ask"
input = 24
output = 4
images = 1
image_dir = "{d}"
"""


def _reuse_spec(tmp_path):
    """Ten requests, one of two 448 x 448 images each (a folder of two), their text their own, one a second."""
    from goodbench.workloads.media import synthetic_image

    d = tmp_path / "two-images"
    if not d.exists():
        d.mkdir()
        for i in range(2):
            (d / f"{i}.jpg").write_bytes(synthetic_image(448, 448, 40 + i))
    (tmp_path / "reuse.toml").write_text(REUSE.format(d=d))
    return gb.load_workload(str(tmp_path / "reuse.toml"))


def _same_images_hit_alike(live, sim) -> None:
    """vLLM hashes each image into its prompt blocks: a request whose image an earlier one carried finds the
    image's blocks cached (its text is its own). The engine keys its blocks by the images alike: per request,
    its cached tokens within two blocks of vLLM's (vLLM's also hold the chat template's tokens before the image,
    which the engine does not count), and hits on the same requests."""
    got = {r.id: r.cached_tokens for r in live.records()}
    want = {r.id: r.cached_tokens or 0 for r in sim.records()}
    print("cached tokens per request: vLLM", got, "engine", want)
    assert all(v is not None for v in got.values()), "vLLM's usage said no cached tokens"
    assert {k for k, v in got.items() if v >= 128} == {k for k, v in want.items() if v >= 128}
    assert sum(v >= 128 for v in got.values()) >= 6  # two images, ten requests: eight repeats, a few may overlap
    assert all(abs(got[k] - want[k]) <= 32 for k in got), (got, want)
