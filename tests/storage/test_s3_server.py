import fsspec


def test_server_answers_and_keeps_objects(s3_server):
    fs = fsspec.filesystem("s3", **s3_server.storage_options)
    url = s3_server.url("probe")
    fs.pipe_file(f"{url}/a.txt", b"hello")
    assert fs.cat_file(f"{url}/a.txt") == b"hello"
    assert s3_server.endpoint_url.startswith("http://127.0.0.1:")
