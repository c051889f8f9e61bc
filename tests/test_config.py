"""client/config.py: what a user types as --base-url, normalised or refused with the corrected flags."""

import pytest

from goodbench.client.config import normalize_base_url
from goodbench.errors import UsageError


@pytest.mark.parametrize(
    "url, endpoint, base, want_endpoint, noted",
    [
        ("http://127.0.0.1:8000", None, "http://127.0.0.1:8000", None, False),
        ("http://127.0.0.1:8000/", None, "http://127.0.0.1:8000", None, False),
        ("http://127.0.0.1:8000/v1", None, "http://127.0.0.1:8000", None, True),  # was /v1/v1/completions
        ("http://127.0.0.1:8000/v1/", None, "http://127.0.0.1:8000", None, True),  # was /v1//v1/completions
        ("http://h:8000/v1/completions", None, "http://h:8000", "/v1/completions", True),
        ("http://h:8000/v1/chat/completions", None, "http://h:8000", "/v1/chat/completions", True),
        ("http://h:8000/v1/chat/completions", "chat", "http://h:8000", "chat", True),
        ("127.0.0.1:18000/v1", None, "http://127.0.0.1:18000", None, True),  # was NonHttpUrlClientError
        ("https://gw.example/api/v1", None, "https://gw.example/api", None, True),  # a prefix is kept
        # every API's endpoint URL, not only completions and chat (was kept whole: .../v1/responses/v1/completions)
        ("http://h:8000/v1/responses", None, "http://h:8000", "/v1/responses", True),
        ("https://api.anthropic.com/v1/messages/", None, "https://api.anthropic.com", "/v1/messages", True),
        ("http://h:8000/v1/embeddings", None, "http://h:8000", "/v1/embeddings", True),
        ("http://h:8000/v1/rerank", None, "http://h:8000", "/v1/rerank", True),
        ("http://h:8000/v1/score", "score", "http://h:8000", "score", True),
        ("http://h:8000/v1/models", None, "http://h:8000", None, True),
    ],
)
def test_base_url_normalised(url, endpoint, base, want_endpoint, noted):
    got_base, got_endpoint, notes = normalize_base_url(url, endpoint)
    assert (got_base, got_endpoint) == (base, want_endpoint)
    assert bool(notes) == noted and len(notes) <= 1  # one line, whatever was corrected
    if noted:
        assert base in notes[0]


@pytest.mark.parametrize(
    "url, endpoint, fix",
    [
        ("ftp://h:8000", None, "--base-url http://127.0.0.1:8000"),
        ("http://h:8000/v1/chat/completions", "/v1/completions", "--base-url http://h:8000 --endpoint /v1/completions"),
        ("http://h:8000/v1/messages", "chat", "--base-url http://h:8000 --endpoint /v1/chat/completions"),
    ],
)
def test_base_url_refused_with_the_corrected_command(url, endpoint, fix):
    with pytest.raises(UsageError, match=fix.replace("/", "/")):
        normalize_base_url(url, endpoint)
