"""Media-store fixtures: a local S3-compatible server (moto in standalone server mode) on
127.0.0.1, started once per test session, with one bucket per test."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

_CREDENTIALS = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "region_name": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """URL of a moto S3 server running as its own process on 127.0.0.1 (skipped, with the
    reason, when moto's server or boto3 is not installed: ``pip install -e '.[dev]'``)."""
    for module in ("boto3", "moto.server", "flask"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"no local S3 server: {module} is not installed (pip install -e '.[dev]')")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("the local S3 server (moto) did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> tuple[str, dict[str, str]]:
    """A fresh bucket on the local S3 server: ``(bucket, boto3 client arguments)``."""
    import boto3

    kwargs = {"endpoint_url": s3_endpoint, **_CREDENTIALS}
    bucket = "media-" + uuid.uuid4().hex[:12]
    boto3.client("s3", **kwargs).create_bucket(Bucket=bucket)
    return bucket, kwargs
