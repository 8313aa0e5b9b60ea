#!/usr/bin/python3
"""Pond's client API from Python (docs/clients.md): describe a cluster, put a key, get it back,
one interactive transaction that increments a counter, and a pipeline of many reads and puts.

    /usr/bin/python3 examples/python/pond_client.py --stubs build/release/python \
        --certs-dir /tmp/pond1/certs --connect 127.0.0.1:7400 --table kv

Over TLS with the cluster's certificates (`pond up` makes them in DIR/certs, `pond certs` by
hand): the CA in ca.crt and the client certificate client.USER.crt with its key; or, against a
server started with --insecure, in plaintext with --insecure.

It talks to `pond serve` (any server of the client API) through stubs generated from
proto/pond/v1/pond.proto: the build makes them in BUILD_DIR/python (CMake target
pond_python_stubs); by hand,

    protoc -I proto --python_out=OUT --grpc_python_out=OUT \
        --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin proto/pond/v1/pond.proto

Debian's python3-grpcio and python3-protobuf are all it needs, hence /usr/bin/python3. The table
must have values of at least 8 bytes (`pond serve --table kv:16:1024`). Exits 1, with one line
on stderr, if anything is answered other than expected.
"""

import argparse
import queue
import struct
import sys


def fail(why):
    print(f"pond_client.py: {why}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stubs", required=True, help="directory holding pond/v1/pond_pb2*.py")
    ap.add_argument("--connect", required=True, help="the server, HOST:PORT")
    ap.add_argument("--table", default="kv", help="a table to write keys 42 and 43 of")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--certs-dir", help="TLS: ca.crt and client.USER.crt/.key (pond certs)")
    how.add_argument("--insecure", action="store_true", help="plaintext, for --insecure servers")
    ap.add_argument("--user", default="root", help="the client certificate to show")
    ap.add_argument("--token-file", help="a bearer token (pond token) in place of the certificate")
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc  # noqa: E402 (the stubs import it too)
    from pond.v1 import pond_pb2 as pb  # noqa: E402
    from pond.v1 import pond_pb2_grpc as rpc  # noqa: E402

    if args.insecure:
        channel = grpc.insecure_channel(args.connect)
    else:
        def read(name):
            try:
                with open(f"{args.certs_dir}/{name}", "rb") as f:
                    return f.read()
            except OSError as e:
                fail(f"{args.certs_dir}/{name}: {e.strerror}")
        if args.token_file:
            # The token stands for the certificate: TLS with the CA alone, the token on each call.
            with open(args.token_file) as f:
                token = f.read().strip()
            creds = grpc.composite_channel_credentials(
                grpc.ssl_channel_credentials(root_certificates=read("ca.crt")),
                grpc.access_token_call_credentials(token))
        else:
            creds = grpc.ssl_channel_credentials(
                root_certificates=read("ca.crt"),
                private_key=read(f"client.{args.user}.key"),
                certificate_chain=read(f"client.{args.user}.crt"))
        channel = grpc.secure_channel(args.connect, creds)
    stub = rpc.PondStub(channel)
    try:
        d = stub.Describe(pb.DescribeRequest(), timeout=10)
    except grpc.RpcError as e:
        fail(f"cannot reach {args.connect}: {e.code().name}: {e.details()}")
    print(f"cluster {d.cluster}, CNs at {', '.join(d.cn_addresses)}")
    for t in d.tables:
        print(f"table {t.name}: {t.value_bytes}-byte values, capacity {t.capacity}")
    print(f"{len(d.procedures)} procedure(s): {', '.join(p.name for p in d.procedures)}")
    table = next((t for t in d.tables if t.name == args.table), None)
    if table is None or table.value_bytes < 8:
        fail(f"the server has no table {args.table} with values of 8 bytes or more")
    size = table.value_bytes

    # One-shot: a put, then a read-only get of the same key.
    value = b"py!".ljust(size, b"\0")
    r = stub.Execute(pb.ExecuteRequest(writes=[pb.Write(kind=pb.Write.PUT, table=args.table,
                                                        key=42, value=value)]), timeout=10)
    if r.answer.outcome != pb.COMMITTED:
        fail(f"put: {pb.Outcome.Name(r.answer.outcome)}: {r.answer.message}")
    print("put 42: COMMITTED")
    r = stub.Execute(pb.ExecuteRequest(read_only=True, reads=[pb.Key(table=args.table, key=42)]),
                     timeout=10)
    if r.answer.outcome != pb.COMMITTED or r.values[0].value != value:
        fail(f"get 42: {pb.Outcome.Name(r.answer.outcome)}: {r.answer.message}")
    print(f"get 42: {r.values[0].value.rstrip(bytes(1)).decode()}")

    # Interactive: one stream is one transaction; each step is answered before the next is sent.
    steps = queue.Queue()
    answers = stub.Interactive(iter(steps.get, None), timeout=10)

    def step(**kw):
        steps.put(pb.InteractiveRequest(**kw))
        return next(answers)

    step(begin=pb.Begin(read_only=False))
    step(add=pb.Add(read_write=[pb.Key(table=args.table, key=43)]))
    e = step(execute=pb.ExecuteStep())
    if e.answer.outcome != pb.OPEN:
        fail(f"execute: {pb.Outcome.Name(e.answer.outcome)}: {e.answer.message}")
    v = e.values[0]
    counter = struct.unpack_from("<q", v.value)[0] if v.found else 0
    new = struct.pack("<q", counter + 1).ljust(size, b"\0")
    # A key that does not exist yet is inserted: it was read absent, so add it as an insert.
    if v.found:
        w = step(write=pb.WriteStep(puts=[pb.KeyValue(table=args.table, key=43, value=new)]))
    else:
        w = step(add=pb.Add(inserts=[pb.KeyValue(table=args.table, key=43, value=new)]))
        if w.answer.outcome == pb.OPEN:
            w = step(execute=pb.ExecuteStep())
    if w.answer.outcome != pb.OPEN:
        fail(f"write: {pb.Outcome.Name(w.answer.outcome)}: {w.answer.message}")
    c = step(commit=pb.CommitStep())
    steps.put(None)
    if c.answer.outcome != pb.COMMITTED:
        fail(f"commit: {pb.Outcome.Name(c.answer.outcome)}: {c.answer.message}")
    print(f"interactive: COMMITTED, counter 43 is {counter + 1}")

    # Pipelined: many one-shot requests on one stream, several to a message, answered as they
    # finish (in any order) and matched by id. Puts of keys 100..199, then gets of them. New keys
    # put at once may abort on each other (lock conflicts on their buckets): what aborted is sent
    # again, as a client of any transactional store does.
    n = 100
    batch = max(1, d.pipeline_batch_max)

    def pipeline(requests):
        """Sends `requests` on one stream; each one's answer body by id."""
        answered = {}
        messages = [pb.PipelineRequest(requests=requests[i:i + batch])
                    for i in range(0, len(requests), batch)]
        for m in stub.Pipeline(iter(messages), timeout=10):
            for r in m.responses:
                if r.id in answered:
                    fail(f"pipeline: request {r.id} answered twice")
                answered[r.id] = r.execute
        return answered

    def until_committed(requests):
        answered = {}
        for _ in range(20):
            answered.update(pipeline(requests))
            requests = [q for q in requests if answered[q.id].answer.outcome == pb.ABORTED]
            if not requests:
                break
        return answered

    puts = until_committed([pb.PipelinedRequest(id=k, execute=pb.ExecuteRequest(writes=[pb.Write(
        kind=pb.Write.PUT, table=args.table, key=k, value=struct.pack("<q", k).ljust(size, b"\0"))]))
        for k in range(100, 100 + n)])
    gets = until_committed([pb.PipelinedRequest(id=k, execute=pb.ExecuteRequest(
        read_only=True, reads=[pb.Key(table=args.table, key=k)])) for k in range(100, 100 + n)])
    for k in range(100, 100 + n):
        put, get = puts.get(k), gets.get(k)
        if put is None or put.answer.outcome != pb.COMMITTED:
            fail(f"pipelined put {k}: {put and pb.Outcome.Name(put.answer.outcome)}: "
                 f"{put and put.answer.message}")
        if get is None or get.answer.outcome != pb.COMMITTED or \
                struct.unpack_from("<q", get.values[0].value)[0] != k:
            fail(f"pipelined get {k}: {get and pb.Outcome.Name(get.answer.outcome)}")
    print(f"pipeline: {n} puts and {n} gets COMMITTED, each read back as written")


if __name__ == "__main__":
    main()
