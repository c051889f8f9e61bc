"""Secrets scrubbed from what goodbench stores or prints (redact.py)."""

import pytest

from goodbench.redact import REDACTED, scrub, scrub_url


@pytest.mark.parametrize(
    "text,secrets,kept",
    [
        ("invalid key sk-live-0123456789", ("sk-live-0123456789",), "invalid key "),
        ("echo: Authorization: Bearer abcdef123456", (), "echo: Authorization: Bearer "),
        ("authorization: basic dXNlcjpwYXNzd29yZA==", (), "authorization: basic "),
        ("cannot connect to http://alice:s3cret@host:8000/v1", (), "cannot connect to http://"),
    ],
)
def test_secrets_become_redacted(text, secrets, kept):
    out = scrub(text, secrets)
    assert out.startswith(kept) and REDACTED in out
    assert "0123456789" not in out and "abcdef123456" not in out and "s3cret" not in out and "dXNlcj" not in out


def test_nothing_to_find_is_left_alone():
    assert scrub("HTTP 500: the model crashed", ("sk-x",)) == "HTTP 500: the model crashed"
    assert scrub(None) is None and scrub("", ("abcd",)) == ""
    assert scrub("a key of three letters: abc", ("abc",)) == "a key of three letters: abc"  # too short to be one
    assert scrub_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert scrub_url("https://u:p@h/x") == f"https://{REDACTED}@h/x"


def test_scrub_url_drops_every_userinfo_and_query_secret():
    assert scrub_url("http://:pw@h:9400/metrics") == f"http://{REDACTED}@h:9400/metrics"
    assert scrub_url("http://u:p@ss@127.0.0.1:9400") == f"http://{REDACTED}@127.0.0.1:9400"
    assert scrub_url("http://h:9400/metrics?token=abc&x=1") == f"http://h:9400/metrics?token={REDACTED}&x=1"
    assert scrub_url("http://h/p?q=a@b") == "http://h/p?q=a@b"  # an @ after the authority is not a user
