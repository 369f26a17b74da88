"""A real S3 API server on loopback for the remote tests: moto's server mode, started here.

``S3Server`` wraps moto's WSGI application in ``Traffic``, a middleware of ours that counts
the requests (so a test can assert that a sync downloaded no object) and can spoil the
transfer of one object: serve it short (a truncated file) or drop the connection halfway (a
server that stops mid-transfer). The server checks credentials (moto's IAM, with a user made
here), so wrong ones are refused as a real bucket refuses them.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADMIN_POLICY = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}'
)


@dataclass
class Traffic:
    """WSGI middleware: counts requests and spoils the GETs of chosen object keys."""

    app: Any
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, query
    short: set[str] = field(default_factory=set)  # keys served with half their bytes
    dropped: set[str] = field(default_factory=set)  # keys whose connection drops halfway
    busy_s: float = 0.0  # time moto took to answer, summed (the server's share of a wait)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        with self.lock:
            self.requests.append((method, path, environ.get("QUERY_STRING", "")))
        key = path.lstrip("/")
        if method == "GET" and (key in self.short or key in self.dropped):
            return self._spoiled(environ, start_response, drop=key in self.dropped)
        start = time.perf_counter()
        body = list(self.app(environ, start_response))
        with self.lock:
            self.busy_s += time.perf_counter() - start
        return body

    def _spoiled(self, environ: dict[str, Any], start_response: Any, drop: bool) -> Iterator[bytes]:
        captured: dict[str, Any] = {}

        def keep(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured.update(status=status, headers=headers)
            return lambda data: None

        body = b"".join(self.app(environ, keep))
        half = body[: len(body) // 2]
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        length = len(body) if drop else len(half)  # dropped: promise it all, send half
        start_response(captured["status"], [*headers, ("Content-Length", str(length))])
        yield half
        if drop:
            raise ConnectionAbortedError("the test's server stops mid-transfer")

    def object_gets(self) -> int:
        """GETs of objects (a listing is a GET of the bucket, with a query)."""
        with self.lock:
            return sum(
                method == "GET" and "/" in path.strip("/") for method, path, _ in self.requests
            )

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.busy_s = 0.0
        self.short.clear()
        self.dropped.clear()


class S3Server:
    """moto's S3 on a free loopback port, through ``Traffic``; credentials checked."""

    def __init__(self) -> None:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self.traffic = Traffic(DomainDispatcherApplication(create_backend_app))
        traffic = self.traffic

        class Server(ThreadedMotoServer):
            def _server_entry(self) -> None:
                self._server = make_server(
                    "127.0.0.1", 0, traffic, True, request_handler=MotoRequestHandler
                )
                self._server_ready_event.set()
                self._server.serve_forever()

        self.server = Server(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.key, self.secret = self._iam_user()
        self._client: Any = None

    def _iam_user(self) -> tuple[str, str]:
        """An IAM user allowed everything; from then on moto checks every request's keys."""
        from moto import settings

        keys = self.new_user("bootstrap", "bootstrap", allowed=True)
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        return keys

    def new_user(self, key: str, secret: str, *, allowed: bool) -> tuple[str, str]:
        """An IAM user's access key and secret, created with ``key``'s rights; ``allowed``:
        may do everything, else nothing (a denied access)."""
        import boto3

        iam = boto3.Session(aws_access_key_id=key, aws_secret_access_key=secret).client(
            "iam", endpoint_url=self.endpoint, region_name="us-east-1"
        )
        user = f"tracker-test-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=user)
        if allowed:
            iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=ADMIN_POLICY)
        access = iam.create_access_key(UserName=user)["AccessKey"]
        return access["AccessKeyId"], access["SecretAccessKey"]

    def environment(self) -> dict[str, str]:
        """What a process needs to reach the server: the standard AWS variables only."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self) -> Any:
        """The server's S3 client, made once: a new boto3 session loads the service's model
        again (a quarter of a second), and a client is safe to share."""
        if self._client is None:
            import boto3

            session = boto3.Session(aws_access_key_id=self.key, aws_secret_access_key=self.secret)
            self._client = session.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
        return self._client

    def new_bucket(self) -> str:
        name = f"jobs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, directory: Path, bucket: str, prefix: str) -> None:
        """Every file below ``directory`` under ``prefix`` in ``bucket``."""
        client = self.client()
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(directory).as_posix()}".lstrip("/")
                client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    def stop(self) -> None:
        self.server.stop()
