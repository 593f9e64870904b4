"""Data files: found in the data directory, or downloaded and checked (against a loopback server)."""
import hashlib
import http.server
import socket
import threading

import pytest

from lotlib.models import data
from lotlib.models.data import DataError, DataFile, data_path

PAYLOAD = b"Walden; or, Life in the Woods\n"


@pytest.fixture
def server(tmp_path):
    """A static HTTP server on 127.0.0.1 serving PAYLOAD as /walden.txt; stops after the test."""
    (tmp_path / "walden.txt").write_bytes(PAYLOAD)
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/walden.txt"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def empty_data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv("LOTLIB_DATA_DIR", str(folder))
    return folder


def _expect(monkeypatch, sha: str) -> None:
    spec = data.DATA_FILES["walden.txt"]
    monkeypatch.setitem(data.DATA_FILES, "walden.txt", DataFile(spec.name, spec.url, sha))


def test_download_good_file(server, empty_data_dir, monkeypatch):
    _expect(monkeypatch, hashlib.sha256(PAYLOAD).hexdigest())
    path = data_path("walden.txt", url=server)
    assert path == empty_data_dir / "walden.txt" and path.read_bytes() == PAYLOAD
    assert data_path("walden.txt", url="http://127.0.0.1:9/unused") == path  # now found locally


def test_download_bad_checksum_writes_nothing(server, empty_data_dir, monkeypatch):
    _expect(monkeypatch, "0" * 64)
    with pytest.raises(DataError, match="expected 0000.*nothing was written"):
        data_path("walden.txt", url=server)
    assert not (empty_data_dir / "walden.txt").exists()
    assert not empty_data_dir.exists() or not any(empty_data_dir.iterdir())  # no temp file left


def test_server_down_names_file_variable_and_checksum(empty_data_dir):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DataError) as err:
        data_path("walden.txt", url=f"http://127.0.0.1:{port}/walden.txt", timeout=5)
    message = str(err.value)
    assert "walden.txt" in message and "LOTLIB_DATA_DIR" in message
    assert data.DATA_FILES["walden.txt"].sha256 in message


def test_local_file_with_wrong_content_is_refused(empty_data_dir):
    empty_data_dir.mkdir()
    (empty_data_dir / "walden.txt").write_text("not walden")
    with pytest.raises(DataError, match="expected 311dbf8c"):
        data_path("walden.txt")


def test_shared_files_match_their_checksums():
    for name in data.DATA_FILES:
        assert data_path(name).exists()
