"""A real OTLP/HTTP receiver on loopback: decodes what the exporter posts with opentelemetry-proto.

with OtlpReceiver() as rx:
    provider = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=rx.traces_url)))
    ...
    provider.force_flush()
    approval = rx.one("cosigner.approval")

Run as a program (`python -m tests.otlp --port 4318`) it is the local collector the
benchmark exports to: it decodes every request and counts the spans.
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Span:
    """One received span, with ids as lower-case hex like `traceparent` writes them."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]
    status: int
    service: str
    raw: bytes = field(repr=False, default=b"")


class OtlpReceiver:
    """Accepts `POST /v1/traces` (protobuf, optionally gzip or deflate) and keeps every span."""

    def __init__(self, port: int = 0) -> None:
        self.spans: list[Span] = []
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                ok = (
                    self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
                )
                if ok:
                    receiver.take(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.traces_url = f"{self.base_url}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def take(self, body: bytes) -> None:
        """Decode one export request and keep its spans."""
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    found.append(
                        Span(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            start=s.start_time_unix_nano,
                            end=s.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            events=[
                                (e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events
                            ],
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            status=s.status.code,
                            service=str(resource.get("service.name")),
                            raw=s.SerializeToString(),
                        )
                    )
        with self.lock:
            self.bodies.append(body)
            self.spans.extend(found)

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def named(self, name: str) -> list[Span]:
        """The spans received with this name, in arrival order."""
        with self.lock:
            return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> Span:
        """The only span with this name."""
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name}: {[s.name for s in self.spans]}"
        return found[0]

    def everything(self) -> bytes:
        """Every request body received, concatenated (to search for what must not be there)."""
        with self.lock:
            return b"".join(self.bodies)


def main() -> None:
    """Serve until interrupted, printing the span count every few seconds (for the benchmark)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    with OtlpReceiver(args.port) as rx:
        print(f"OTLP/HTTP receiver on {rx.base_url}", flush=True)
        try:
            while not threading.Event().wait(5):
                print(f"spans received: {len(rx.spans)}", flush=True)
        except KeyboardInterrupt:
            print(f"spans received: {len(rx.spans)}", flush=True)


if __name__ == "__main__":
    main()
