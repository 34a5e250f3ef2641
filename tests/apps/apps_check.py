#!/usr/bin/python3
"""Real applications through transparent sockmap acceleration, verified.

apps_check.py --tools DIR [--seed N] [--max-file MB]

Runs inside the guest. bench/sockredir (in DIR) puts every TCP connection
of a cgroup into a sockhash and redirects each message to the peer's
ingress; Debian's own servers and clients then run in that cgroup:

  redis     redis-server and a redis-py client that writes values of
            random size (1 B to 512 KB) with pipelined SETs and reads them
            back with pipelined GETs in another order, each compared
  nginx     files of 1 KB to --max-file MB, fetched with curl from a server
            with sendfile on and one with sendfile off, each compared by
            sha256; then through nginx as a reverse proxy to the first
            (two accelerated hops per request)
  blocking  tests/apps/blocking.c: request/response between two processes
            on blocking sockets (64 B with TCP_NODELAY, 4 KB without,
            --rounds round trips each), and a full-duplex pair with a reader
            and a writer thread on each end; no read() or write() may fail

Each check also proves that its bytes took the sockmap path: the sk_msg
program redirected at least the payload (twice it for redis, whose values
go both ways, and for the proxy), and loopback carried almost nothing.
Prints one line per check, "apps: NAME: OK|FAIL  # details", as
scripts/selftests-summary.py reads them; exits 1 if any failed.
"""
import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CG = "/sys/fs/cgroup/apps-sockmap"
HOST = "127.0.0.1"
REDIS_PORT, NGINX_PORTS = 6390, {"sendfile": 8081, "copy": 8082, "proxy": 8083}
BLOCKING_PORT = 7101
KIB, MIB = 1024, 1024 * 1024
# Loopback bytes allowed in a redirected check: handshakes, FINs, and what a
# socket sends before both ends are in the sockhash (a server's greeting).
LO_SLACK = lambda payload: 256 * KIB + payload // 100

failed = False


def report(name, ok, details):
    global failed
    failed |= not ok
    print(f"apps: {name}: {'OK' if ok else 'FAIL'}  # {details}", flush=True)


def enter_cgroup():
    with open(CG + "/cgroup.procs", "w") as f:
        f.write("0")


def spawn(cmd, **kw):
    return subprocess.Popen(cmd, preexec_fn=enter_cgroup, **kw)


def run(cmd, timeout, **kw):
    return subprocess.run(cmd, preexec_fn=enter_cgroup, timeout=timeout, check=True, **kw)


def wait_listening(port, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


def lo_tx_bytes():
    with open("/sys/class/net/lo/statistics/tx_bytes") as f:
        return int(f.read())


class Redirector:
    def __init__(self, tools):
        self.p = subprocess.Popen([os.path.join(tools, "sockredir"), CG], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        if self.p.stdout.readline() != "ready\n":
            raise RuntimeError(f"sockredir failed to attach (exit {self.p.wait()})")

    def redirected(self):
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        s = json.loads(self.p.stdout.readline())
        return sum(s[role]["redirected"]["bytes"] for role in s)

    def close(self):
        self.p.stdin.close()
        if self.p.wait():
            raise RuntimeError(f"sockredir exited with {self.p.returncode}")


def proven(red, name, fn, hops):
    """Runs fn() (which returns (payload bytes, details)) and reports it with
    the proof that its bytes were redirected: at least hops x payload
    redirected, loopback within LO_SLACK."""
    lo0, red0 = lo_tx_bytes(), red.redirected()
    try:
        payload, details = fn()
    except Exception as e:  # a failed check is reported, the others still run
        report(name, False, f"{type(e).__name__}: {e}")
        return
    lo, redirected = lo_tx_bytes() - lo0, red.redirected() - red0
    problems = []
    if redirected < hops * payload:
        problems.append(f"redirected {redirected} B < {hops} x payload {payload} B")
    if lo > LO_SLACK(payload):
        problems.append(f"{lo} B on loopback: not (all) redirected")
    report(name, not problems, "; ".join(problems + [details]) +
           f"; redirected {redirected} B, loopback {lo} B")


# ---- blocking readers and writers ----

def blocking(tools, port, *args):
    """Returns fn() for proven(): tools/blocking MODE PORT ARGS... in the
    cgroup, (payload bytes, details) from its JSON line."""
    def fn():
        r = subprocess.run([os.path.join(tools, "blocking"), args[0], str(port), *args[1:]],
                           preexec_fn=enter_cgroup, timeout=3600, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"exit {r.returncode}: {r.stderr.strip()}")
        out = json.loads(r.stdout)
        what = f"{out['rounds']} round trips" if out["rounds"] else f"{out['bytes']} B"
        return out["bytes"], f"{what} in {out['seconds']:.1f} s"
    return fn


def blocking_checks(red, tools, rounds):
    checks = ((f"blocking request/response, 64 B, TCP_NODELAY, {rounds} rounds",
               ("rr", "64", str(rounds), "nodelay")),
              (f"blocking request/response, 4 KB, no TCP_NODELAY, {rounds} rounds",
               ("rr", "4096", str(rounds), "plain")),
              ("blocking full duplex, a reader and a writer thread each end, 2 x 64 MB",
               ("duplex", str(64 * MIB))))
    for i, (name, args) in enumerate(checks):
        proven(red, name, blocking(tools, BLOCKING_PORT + i, *args), hops=1)


# ---- redis ----

REDIS_CLIENT = r"""
import json, random, sys
import redis
seed, nkeys, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)
# Sizes log-uniform from 1 B to 512 KB, contents random.
vals = {f"k{i}": rnd.randbytes(int(2 ** rnd.uniform(0, 19))) for i in range(nkeys)}
keys = list(vals)
for i in range(0, nkeys, 16):
    p = r.pipeline(transaction=False)
    for k in keys[i:i + 16]:
        p.set(k, vals[k])
    if not all(p.execute()):
        sys.exit("a SET failed")
rnd.shuffle(keys)
bad = 0
for i in range(0, nkeys, 16):
    p = r.pipeline(transaction=False)
    for k in keys[i:i + 16]:
        p.get(k)
    for k, got in zip(keys[i:i + 16], p.execute()):
        if got != vals[k]:
            bad += 1
            print(f"{k}: got {len(got or b'')} B, expected {len(vals[k])} B", file=sys.stderr)
print(json.dumps({"keys": nkeys, "bytes": sum(map(len, vals.values())), "mismatches": bad,
                  "largest": max(map(len, vals.values()))}))
"""


def redis_client(seed, nkeys):
    out = run([sys.executable, "-c", REDIS_CLIENT, str(seed), str(nkeys), str(REDIS_PORT)],
              900, stdout=subprocess.PIPE, text=True).stdout
    r = json.loads(out)
    if r["mismatches"]:
        raise RuntimeError(f"{r['mismatches']} of {r['keys']} values read back wrong")
    return r["bytes"], (f"{r['keys']} values, {r['bytes']} B, largest {r['largest']} B, "
                        "every one read back intact")


# ---- nginx ----

NGINX_CONF = """
user root;
worker_processes 1;
daemon off;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {w}/client_body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    default_type application/octet-stream;
    server {{ listen {h}:{p[sendfile]}; root {w}/www; sendfile on; }}
    server {{ listen {h}:{p[copy]}; root {w}/www; sendfile off; }}
    server {{
        listen {h}:{p[proxy]};
        location / {{ proxy_pass http://{h}:{p[sendfile]}; proxy_buffering on; }}
    }}
}}
"""


def make_files(www, seed, max_mb):
    rnd = random.Random(seed)
    os.makedirs(www)
    files, size = {}, KIB
    while size <= max_mb * MIB:
        name = f"f{size}"
        data = rnd.randbytes(size - rnd.randrange(min(size, 1000)))  # not a round size
        with open(os.path.join(www, name), "wb") as f:
            f.write(data)
        files[name] = (len(data), hashlib.sha256(data).hexdigest())
        size *= 8 if size < MIB else 4
    return files


def fetch_all(workdir, files, port):
    def fetch():
        total, out = 0, os.path.join(workdir, "fetched")
        for name, (size, digest) in files.items():
            run(["curl", "-sS", "--fail", "--max-time", "600", "-o", out,
                 f"http://{HOST}:{port}/{name}"], 660)
            with open(out, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            if got != digest or os.path.getsize(out) != size:
                raise RuntimeError(f"{name}: {os.path.getsize(out)} B, sha256 {got[:16]}..., "
                                   f"expected {size} B, {digest[:16]}...")
            total += size
        return total, (f"{len(files)} files, {min(s for s, _ in files.values())} B to "
                       f"{max(s for s, _ in files.values())} B, sha256 equal")
    return fetch


@contextlib.contextmanager
def server(cmd, ports):
    """A server in the cgroup, listening on ports, stopped on exit."""
    p = spawn(cmd)
    try:
        for port in ports:
            wait_listening(port)
        yield p
    finally:
        p.terminate()
        p.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True, help="build output of bench/ (sockredir)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--keys", type=int, default=400, help="redis values")
    ap.add_argument("--max-file", type=int, default=64, help="largest nginx file, MB")
    ap.add_argument("--rounds", type=int, default=100000,
                    help="round trips of each blocking request/response check")
    args = ap.parse_args()
    print(f"apps: seed {args.seed}", flush=True)
    for tool in ("redis-server", "nginx", "curl"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (make deps)")
    os.makedirs(CG, exist_ok=True)
    w = tempfile.mkdtemp(prefix="apps-")
    red = Redirector(args.tools)
    try:
        name = "redis pipelined SET/GET, values verified"
        try:
            with server(["redis-server", "--port", str(REDIS_PORT), "--bind", HOST, "--save", "",
                         "--appendonly", "no", "--dir", w, "--logfile",
                         os.path.join(w, "redis.log")], [REDIS_PORT]):
                proven(red, name, lambda: redis_client(args.seed, args.keys), hops=2)
        except Exception as e:
            report(name, False, f"{type(e).__name__}: {e}")

        files = make_files(os.path.join(w, "www"), args.seed, args.max_file)
        with open(os.path.join(w, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(w=w, h=HOST, p=NGINX_PORTS))
        checks = (("nginx sendfile on, files verified", "sendfile", 1),
                  ("nginx sendfile off, files verified", "copy", 1),
                  ("nginx reverse proxy (two hops), files verified", "proxy", 2))
        try:
            with server(["nginx", "-p", w, "-e", os.path.join(w, "nginx-error.log"),
                         "-c", os.path.join(w, "nginx.conf")], NGINX_PORTS.values()):
                for name, what, hops in checks:
                    proven(red, name, fetch_all(w, files, NGINX_PORTS[what]), hops)
        except Exception as e:
            report("nginx", False, f"{type(e).__name__}: {e}")
        with open(os.path.join(w, "nginx-error.log")) as f:
            errors = [line.strip() for line in f
                      if any(level in line for level in ("[alert]", "[crit]", "[emerg]"))]
        report("nginx error log clean", not errors, errors[0] if errors else "no alert")
        blocking_checks(red, args.tools, args.rounds)
    finally:
        red.close()
        shutil.rmtree(w, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
