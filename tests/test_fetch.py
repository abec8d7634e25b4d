"""mtlbench.fetch: locating, downloading (atomic, checksummed) and verifying dataset files.

The network is never used: downloads go through ``file://`` URLs or a monkeypatched opener.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from mtlbench import fetch
from mtlbench.errors import DatasetUnavailableError
from mtlbench.fetch import DataFile, DataSource

PAYLOAD = b"mtlbench test payload\n" * 1000


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _source(url: str | None, data: bytes = PAYLOAD, size: int | None = None) -> DataSource:
    toy = DataFile("sub/toy.bin", _sha(data), url, size=size, aliases=("upstream.bin",))
    return DataSource("toy", (toy,),
                      homepage="https://example.org/toy", terms="test only")


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture
def remote(tmp_path):
    src = tmp_path / "remote" / "toy.bin"
    src.parent.mkdir()
    src.write_bytes(PAYLOAD)
    return src


def test_download_from_file_url_into_cache(tmp_path, remote):
    cache = tmp_path / "cache"
    source = _source(remote.as_uri(), size=len(PAYLOAD))
    assert fetch.availability(source, cache_dir=cache) == "downloadable"
    paths = fetch.locate(source, cache_dir=cache)
    p = paths["sub/toy.bin"]
    assert p == cache / "toy" / "sub" / "toy.bin"
    assert p.read_bytes() == PAYLOAD
    assert fetch.availability(source, cache_dir=cache) == "cached"
    assert _leftovers(cache) == [p]  # no temporary file left


def test_data_dir_wins_and_aliases_are_accepted(tmp_path):
    ddir = tmp_path / "data"
    (ddir / "toy").mkdir(parents=True)
    (ddir / "toy" / "upstream.bin").write_bytes(PAYLOAD)
    source = _source(None)
    assert fetch.availability(source, data_dir=ddir, cache_dir=tmp_path / "c") == "in data-dir"
    found = fetch.locate(source, data_dir=ddir, cache_dir=tmp_path / "c")
    assert found["sub/toy.bin"] == ddir / "toy" / "upstream.bin"


def test_env_data_dir(tmp_path, monkeypatch):
    ddir = tmp_path / "data"
    (ddir / "sub").mkdir(parents=True)
    (ddir / "sub" / "toy.bin").write_bytes(PAYLOAD)
    monkeypatch.setenv("MTLBENCH_DATA_DIR", str(ddir))
    found = fetch.locate(_source(None), cache_dir=tmp_path / "c")
    assert found["sub/toy.bin"] == ddir / "sub" / "toy.bin"


def test_checksum_mismatch_on_download_leaves_nothing(tmp_path, remote):
    cache = tmp_path / "cache"
    source = _source(remote.as_uri(), data=b"something else")
    with pytest.raises(DatasetUnavailableError) as ei:
        fetch.locate(source, cache_dir=cache)
    msg = str(ei.value)
    assert "checksum mismatch" in msg and _sha(b"something else") in msg and _sha(PAYLOAD) in msg
    assert "sub/toy.bin" in msg and str(cache / "toy" / "sub" / "toy.bin") in msg
    assert "https://example.org/toy" in msg
    assert _leftovers(cache) == []


class _Truncated:
    """A response that announces more bytes than it delivers (a dropped connection)."""

    def __init__(self, data: bytes, announced: int):
        self._buf = io.BytesIO(data)
        self.headers = {"Content-Length": str(announced)}

    def read(self, n=-1):
        return self._buf.read(n)

    def close(self):
        pass


def test_truncated_download_is_reported_and_removed(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(fetch, "urlopen",
                        lambda url, timeout=None: _Truncated(PAYLOAD[:100], len(PAYLOAD)))
    with pytest.raises(DatasetUnavailableError, match="truncated"):
        fetch.locate(_source("https://example.org/toy.bin"), cache_dir=cache)
    assert _leftovers(cache) == []


def test_truncated_without_content_length_fails_checksum(tmp_path, monkeypatch):
    class NoLength(_Truncated):
        def __init__(self, data):
            super().__init__(data, 0)
            self.headers = {}

    monkeypatch.setattr(fetch, "urlopen", lambda url, timeout=None: NoLength(PAYLOAD[:100]))
    with pytest.raises(DatasetUnavailableError, match="checksum mismatch"):
        fetch.locate(_source("https://example.org/toy.bin"), cache_dir=tmp_path / "cache")
    assert _leftovers(tmp_path / "cache") == []


def test_error_mid_stream_removes_partial_file(tmp_path, monkeypatch):
    class Broken(_Truncated):
        def read(self, n=-1):
            if self._buf.tell() > 0:
                raise ConnectionResetError("connection reset by peer")
            return self._buf.read(10)

    monkeypatch.setattr(fetch, "urlopen", lambda url, timeout=None: Broken(PAYLOAD, len(PAYLOAD)))
    with pytest.raises(DatasetUnavailableError, match="connection reset"):
        fetch.locate(_source("https://example.org/toy.bin"), cache_dir=tmp_path / "cache")
    assert _leftovers(tmp_path / "cache") == []


def test_network_unreachable_gives_full_message(tmp_path, monkeypatch):
    import urllib.error

    def refuse(url, timeout=None):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(fetch, "urlopen", refuse)
    with pytest.raises(DatasetUnavailableError) as ei:
        fetch.locate(_source("https://example.org/toy.bin"), data_dir=tmp_path / "d",
                     cache_dir=tmp_path / "c")
    msg = str(ei.value)
    for part in ("required files are missing", "sub/toy.bin", str(tmp_path / "d"), "sha256",
                 _sha(PAYLOAD), "https://example.org/toy.bin", "network is unreachable",
                 "--data-dir"):
        assert part in msg, part


def test_missing_without_url_says_where_looked(tmp_path):
    with pytest.raises(DatasetUnavailableError) as ei:
        fetch.locate(_source(None), cache_dir=tmp_path / "c")
    msg = str(ei.value)
    assert "no data folder given" in msg and str(tmp_path / "c" / "toy" / "sub" / "toy.bin") in msg
    assert fetch.availability(_source(None), cache_dir=tmp_path / "c") == "needs local files"


def test_corrupt_file_in_data_dir_is_reported_not_replaced(tmp_path, remote):
    ddir = tmp_path / "data" / "sub"
    ddir.mkdir(parents=True)
    (ddir / "toy.bin").write_bytes(PAYLOAD[:50])
    with pytest.raises(DatasetUnavailableError) as ei:
        fetch.locate(_source(remote.as_uri(), size=len(PAYLOAD)), data_dir=tmp_path / "data",
                     cache_dir=tmp_path / "c")
    msg = str(ei.value)
    assert "truncated" in msg and _sha(PAYLOAD) in msg and _sha(PAYLOAD[:50]) in msg
    assert (ddir / "toy.bin").read_bytes() == PAYLOAD[:50]  # the user's file is never touched


def test_corrupt_cached_file_is_replaced_by_a_fresh_download(tmp_path, remote):
    cache = tmp_path / "cache"
    bad = cache / "toy" / "sub" / "toy.bin"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"garbage")
    p = fetch.locate(_source(remote.as_uri()), cache_dir=cache)["sub/toy.bin"]
    assert p.read_bytes() == PAYLOAD


def test_corrupt_cached_file_without_url_is_reported(tmp_path):
    cache = tmp_path / "cache"
    bad = cache / "toy" / "sub" / "toy.bin"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"garbage")
    with pytest.raises(DatasetUnavailableError, match="checksum mismatch"):
        fetch.locate(_source(None), cache_dir=cache)


def test_existing_good_file_survives_a_failed_redownload(tmp_path, remote):
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"old content")
    with pytest.raises(DatasetUnavailableError):
        fetch.download(remote.as_uri(), dest, sha256=_sha(b"nope"), dataset="toy")
    assert dest.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin", "remote"]


def test_sha256sum_matches_hashlib(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(PAYLOAD)
    assert fetch.sha256sum(p) == _sha(PAYLOAD)
    p.write_bytes(PAYLOAD + b"x")  # new size -> memo key changes
    assert fetch.sha256sum(p) == _sha(PAYLOAD + b"x")


def test_describe_files_lists_checksums_and_sources():
    text = fetch.describe_files(_source("https://example.org/toy.bin"))
    assert "sub/toy.bin" in text and "upstream.bin" in text and _sha(PAYLOAD) in text
    assert "https://example.org/toy.bin" in text and "terms: test only" in text
