#!/usr/bin/env python3
"""A stand-in for vLLM's NIXL toy proxy, for tests/test_conform_sf.c: a third-party source-first
gateway that is not pdref's. Written from the behaviour docs/upstream.md records (V1.1, V1.6,
V1.7, V1.24), Python standard library only:

  pdt_sfproxy.py --port P [--host H] --prefiller-hosts H... --prefiller-ports P...
                 --decoder-hosts H... --decoder-ports P...

POST /v1/completions and /v1/chat/completions. Per client request: a fresh uuid4 as
X-Request-Id on both legs (none of the client's headers); prefill first, on the next prefiller
in round robin, with the client's body plus kv_transfer_params {do_remote_decode: true, ...
null remote fields}, stream false, max_tokens 1 (max_completion_tokens 1 when sent),
stream_options, min_tokens and min_completion_tokens removed; its answer read whole. A
non-2xx, a broken connection or a body that is not JSON: a bare 500. Then the 200 head
(application/json, even for a stream), and decode on the next decoder in round robin with the
client's body plus prefill's kv_transfer_params when they are truthy; decode's bytes are
relayed as they come. A decode that fails (a non-2xx, a cut body) cuts the client's body: no
error event, no retry. No timeout, no abort; a client gone while prefill runs is noticed only
when decode would start (decode is then not sent); SIGTERM stops it.

With --style llmd it stands in for llm-d's routing sidecar instead (V1.2, V1.27): it fronts the
one decode on 127.0.0.1:--vllm-port and takes the prefill from the first entry of the
x-prefiller-host-port header; prefill's body caps every token limit of the route at 1 and
keeps min_tokens; both legs carry the client's X-Request-Id and then the sidecar's own uuid;
a prefill status in 400-451 goes back as it is, any other failure falls back to decode alone
with the client's body; decode gets prefill's kv_transfer_params (null when absent); decode's
status and body pass through (a refused connection: 503 JSON, another error before its head:
502 JSON, after it: a cut body)."""
import argparse
import http.client
import http.server
import itertools
import json
import os
import select
import signal
import socket
import sys
import threading
import uuid

ROUTES = {"/v1/completions", "/v1/chat/completions"}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--prefiller-hosts", nargs="+", default=["localhost"])
    ap.add_argument("--prefiller-ports", nargs="+", type=int, default=[8100])
    ap.add_argument("--decoder-hosts", nargs="+", default=["localhost"])
    ap.add_argument("--decoder-ports", nargs="+", type=int, default=[8200])
    ap.add_argument("--style", choices=["toy", "llmd"], default="toy")
    ap.add_argument("--vllm-port", type=int, nargs="+", default=[8001])  # the first (Go's flag)
    a = ap.parse_args()
    if len(a.prefiller_hosts) != len(a.prefiller_ports) or \
            len(a.decoder_hosts) != len(a.decoder_ports):
        ap.error("each host list needs a port list of the same length")
    return a


class RoundRobin:
    def __init__(self, hosts, ports):
        self.cycle = itertools.cycle(list(zip(hosts, ports)))
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            return next(self.cycle)


def prefill_body(body):
    p = dict(body)
    p["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False,
                               "remote_engine_id": None, "remote_block_ids": None,
                               "remote_host": None, "remote_port": None}
    p["stream"] = False
    p["max_tokens"] = 1
    if "max_completion_tokens" in p:
        p["max_completion_tokens"] = 1
    for k in ("stream_options", "min_tokens", "min_completion_tokens"):
        p.pop(k, None)
    return p


def leg_headers(request_id):
    return {"Content-Type": "application/json", "X-Request-Id": request_id,
            "Authorization": "Bearer %s" % os.environ.get("OPENAI_API_KEY")}


def post(target, path, body, request_id, ids=None, client=None):
    """One leg: the connection and its response (head read). ids: X-Request-Id values to
    send in that order instead of request_id alone (llm-d adds its own to the client's).
    client: the client's socket, watched while the leg has not answered; the client gone
    closes the leg (a cancelled request context) and raises ConnectionAbortedError."""
    conn = http.client.HTTPConnection(target[0], target[1])
    data = json.dumps(body).encode()
    conn.putrequest("POST", path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(data)))
    for v in ids if ids else [request_id]:
        conn.putheader("X-Request-Id", v)
    conn.endheaders(data)
    while client is not None:
        r, _, _ = select.select([conn.sock, client], [], [], 1.0)
        if conn.sock in r:
            break
        if client in r and client_gone(client):
            conn.close()
            raise ConnectionAbortedError("client gone")
    return conn, conn.getresponse()


def llmd_prefill_body(body, route):
    p = dict(body)
    p["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False,
                               "remote_engine_id": None, "remote_block_ids": None,
                               "remote_host": None, "remote_port": None}
    p["stream"] = False
    p.pop("stream_options", None)
    limits = ["max_tokens", "max_completion_tokens"] if "chat" in route else ["max_tokens"]
    for k in limits:
        p[k] = 1
    return p


def client_gone(sock):
    """The client closed its side (readable with nothing to read)."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        return bool(r) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def make_handler(prefillers, decoders, style, vllm_port):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, ctype, data):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/healthcheck":
                self.answer(200, "application/json", b'{"status":"ok"}')
            else:
                self.answer(404, "application/json", b'{"detail":"Not Found"}')

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path not in ROUTES:
                self.answer(404, "application/json", b'{"detail":"Not Found"}')
                return
            if style == "llmd":
                self.llmd(raw)
                return
            endpoint = self.path
            request_id = str(uuid.uuid4())
            try:
                body = json.loads(raw)
                conn, resp = post(prefillers.next(), endpoint, prefill_body(body), request_id)
                data = resp.read()
                conn.close()
                if resp.status < 200 or resp.status >= 300:
                    raise RuntimeError("prefill answered %d" % resp.status)
                params = json.loads(data).get("kv_transfer_params", {})
            except Exception:  # the framework's answer to an exception escaping the handler
                self.answer(500, "text/plain; charset=utf-8", b"Internal Server Error")
                return
            if params:
                body["kv_transfer_params"] = params
            target = decoders.next()
            if client_gone(self.connection):
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.relay_decode(target, endpoint, body, request_id)

        def llmd(self, raw):
            hosts = [h.strip() for h in self.headers.get("x-prefiller-host-port", "").split(",")]
            body = json.loads(raw)
            ids = [v for v in self.headers.get_all("X-Request-Id") or []] + [str(uuid.uuid4())]
            decode_body = dict(body)
            if hosts and hosts[0]:
                host, port = hosts[0].rsplit(":", 1)
                try:
                    conn, resp = post((host, int(port)), self.path,
                                      llmd_prefill_body(body, self.path), None, ids,
                                      self.connection)
                    data = resp.read()
                    conn.close()
                    status = resp.status
                except ConnectionAbortedError:
                    self.close_connection = True
                    return
                except OSError:
                    status, data = 502, b""
                if 400 <= status <= 451:
                    self.answer(status, "application/json", data)
                    return
                if 200 <= status < 300:
                    decode_body["kv_transfer_params"] = json.loads(data).get("kv_transfer_params")
            if client_gone(self.connection):
                self.close_connection = True
                return
            self.proxy_decode(decode_body, ids)

        def proxy_decode(self, body, ids):
            conn = None
            try:
                conn, resp = post(("127.0.0.1", vllm_port), self.path, body, None, ids)
            except ConnectionRefusedError:
                self.answer(503, "application/json", b'{"error":"decoder unavailable"}')
                return
            except OSError:
                self.answer(502, "application/json", b'{"error":"decoder proxy error"}')
                return
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.getheader("Content-Type", "application/json"))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.relay(conn, resp)

        def relay(self, conn, resp):
            """Decode's bytes as they come; a broken read cuts the client's body."""
            try:
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except Exception:
                self.cut()
            finally:
                conn.close()

        def cut(self):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def relay_decode(self, target, endpoint, body, request_id):
            """The toy proxy's generator: raise_for_status after the 200 head cuts the body."""
            conn = None
            try:
                conn, resp = post(target, endpoint, body, request_id)
                if resp.status < 200 or resp.status >= 300:
                    raise RuntimeError("decode answered %d" % resp.status)
            except Exception:
                if conn:
                    conn.close()
                self.cut()
                return
            self.relay(conn, resp)

    return Handler


def main():
    a = parse_args()
    prefillers = RoundRobin(a.prefiller_hosts, a.prefiller_ports)
    decoders = RoundRobin(a.decoder_hosts, a.decoder_ports)
    srv = http.server.ThreadingHTTPServer((a.host, a.port),
                                          make_handler(prefillers, decoders, a.style, a.vllm_port[0]))
    srv.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv.serve_forever()


if __name__ == "__main__":
    main()
