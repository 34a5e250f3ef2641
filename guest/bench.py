#!/usr/bin/env python3
"""One benchmark repetition, inside a scripts/vm-run.sh guest.

  bench.py --mode quick|full|icount --tools DIR --bench BENCH --meta META.json --out OUT.json

Runs every workload once per size on the booted kernel and writes one JSON
document to OUT.json: META.json (what the host knows: variant, repetition,
commit, config) plus what the guest sees (kernel, HZ, tool versions) and one
record per measurement. Sender/client on vCPU 0, receiver/server on vCPU 1.

Workloads: iperf3 (a stream), our pingpong stream into a blocking reader
that keeps up (every byte checked), sockperf ping-pong and our pingpong
(request/response), the selftests' bench, and two real servers:
redis-benchmark against redis-server (SET and GET, pipelined and not) and
wrk against nginx serving a small page (requests/s, latency percentiles).

Systems: "sockmap" runs in a cgroup with tools/sockredir attached (every
message redirected to the peer's ingress), "tcp" ("nobpf"; "tcp-nodelay":
TCP_NODELAY) in one without BPF, "uds" over Unix sockets; in the sockhash,
redirecting nothing: "pass" (sk_msg program passes), "nomsg" (no program on
their data), "skb" (an sk_skb stream verdict passes every skb).

Each measurement proves its path: loopback counters and the BPF counters of
redirected and passed bytes are read around it and checked against the bytes
the workload reports having moved. Any failed check, error or missing number
ends the run with a non-zero status.
"""
import argparse
import contextlib
import gzip
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The real-application check's nginx configuration (tests/apps).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "apps"))
from apps_check import NGINX_CONF, NGINX_PORTS  # noqa: E402

KIB = 1024
IPERF_SIZES = [64, 128, 256, 512, 1 * KIB, 4 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB,
               256 * KIB]
LATENCY_SIZES = [64, 128, 256, 512, 1 * KIB, 4 * KIB, 16 * KIB, 32 * KIB, 63 * KIB]
STREAM_SIZES = [64, 256, 1 * KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB]
# Sockets that do not redirect: sockperf ping-pong, counted.
NONREDIR_SIZES = [64, 4 * KIB]
# redis-benchmark: requests per run, by pipeline depth (-P), for about as
# many seconds as the other workloads take on the bench kernels.
REDIS_REQUESTS = {1: 10000, 16: 100000}
PLANS = {
    # seconds per measurement and sizes, per mode
    "quick": dict(iperf_sizes=[64], latency_sizes=[64], iperf_s=3, latency_s=3,
                  stream_sizes=[64], stream_s=3, nonredir_sizes=[64],
                  bench_s=3, flows=200, flows_s=3, syscalls=0,
                  redis_sizes=[64], redis_scale=0.2, redis_clients=4, wrk_s=3),
    # Sockets that do not redirect are measured counted only: the timed
    # boots cannot see what they are about, a fraction of a percent.
    "full": dict(iperf_sizes=IPERF_SIZES, latency_sizes=LATENCY_SIZES, iperf_s=5, latency_s=5,
                 stream_sizes=STREAM_SIZES, stream_s=3, nonredir_sizes=[],
                 bench_s=5, flows=20000, flows_s=5, syscalls=0,
                 redis_sizes=[64, 4 * KIB], redis_scale=1, redis_clients=4, wrk_s=5),
    # Under scripts/vm-run.sh --icount, where a second of guest time is 10^9
    # instructions of either vCPU: the full sizes, one second each, and no
    # bench run (nothing there that the rest does not show); but the
    # instructions of each send() and recv() (pingpong solo), and of a
    # transaction of sockets that do not redirect (nonredir, many flows),
    # which only make sense counted; the many flows for five seconds, a few
    # transactions of each of their 20,000 connections. redis-benchmark with one client: with
    # several, how their requests interleave differs from boot to boot even
    # counted.
    "icount": dict(iperf_sizes=IPERF_SIZES, latency_sizes=LATENCY_SIZES, iperf_s=1,
                   stream_sizes=STREAM_SIZES, stream_s=1, nonredir_sizes=NONREDIR_SIZES,
                   latency_s=1, bench_s=0, flows=20000, flows_s=5, syscalls=20000,
                   redis_sizes=[64], redis_scale=1, redis_clients=1, wrk_s=1),
}
# Each workload, and the plan entries that leave it out (bench.sh --only).
WORKLOADS = {
    "iperf3": dict(iperf_sizes=[]), "stream": dict(stream_sizes=[]),
    "sockperf": dict(latency_sizes=[]), "redis": dict(redis_sizes=[]), "wrk": dict(wrk_s=0),
    "syscall": dict(syscalls=0), "bench": dict(bench_s=0), "manyflow": dict(flows=0),
    "nonredir": dict(nonredir_sizes=[]),
}
WRK_CONNECTIONS, WRK_PAGE = 4, 1 * KIB
SENDER_CPU, RECEIVER_CPU = "0", "1"
CGROOT = "/sys/fs/cgroup"
CG_SOCKMAP, CG_PLAIN = CGROOT + "/bench-sockmap", CGROOT + "/bench-plain"
HOST = "127.0.0.1"
# Loopback bytes allowed during a redirected measurement: handshakes, FINs
# (7 packets, about 330 bytes a flow), a message sent before the sockhash.
LO_SLACK = lambda payload, flows=1: 64 * KIB + payload // 100 + 512 * flows

T0 = time.monotonic()
_ports = iter(range(20000, 30000))


def next_port():
    """A fresh port for each server: nothing left over from the last one."""
    return next(_ports)


class BenchError(Exception):
    pass


class SendRefused(BenchError):
    """The kernel failed a write of the workload (iperf3 saw an errno): the
    unpatched kernel's own behaviour, recorded for it (see main())."""


class Stalled(SendRefused):
    """A writer made no progress for a minute: recorded as a refused
    measurement for vanilla and the anchor, a failure for the series."""


class DataLost(BenchError):
    """The reader of a stream got fewer bytes than were written, or wrong
    ones: recorded for vanilla and the anchor with the rest of the
    measurement (REC), a failure for the series (see main())."""

    def __init__(self, msg, rec):
        super().__init__(msg)
        self.rec = rec


def progress(msg):
    print(f"bench [{time.monotonic() - T0:6.0f}s] {msg}", flush=True)


def in_cgroup(cg):
    def enter():
        with open(cg + "/cgroup.procs", "w") as f:
            f.write("0")
    return enter


def pinned(cpu, *cmd):
    return ["taskset", "-c", cpu, *cmd]


def spawn(cmd, cg, **kw):
    return subprocess.Popen(cmd, preexec_fn=in_cgroup(cg), text=True, **kw)


def reap(p, timeout):
    """Waits for p; returns (exit code, rusage)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return p.returncode, ru
        if time.monotonic() > deadline:
            kill(p)
            raise BenchError(f"{p.args} did not finish within {timeout}s")
        time.sleep(0.05)


def finish(p, name, timeout, out=""):
    """Reaps p and fails unless it exited with 0; returns its rusage."""
    rc, ru = reap(p, timeout)
    if rc:
        raise BenchError(f"{name} exited with {rc}" + (f": {out[-2000:]}" if out else ""))
    return ru


def kill(p):
    """Kills and reaps p unless it was reaped already."""
    if p.returncode is None:
        p.kill()
        with contextlib.suppress(ChildProcessError):  # reaped already (by subprocess)
            os.wait4(p.pid, 0)
        p.returncode = -9


def wait_listening(port, timeout=30):
    """Waits until something listens on HOST:port (TCP)."""
    want = f":{port:04X}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open("/proc/net/tcp") as f:
            if any(fl[1].endswith(want) and fl[3] == "0A"  # LISTEN
                   for fl in (line.split() for line in f.readlines()[1:])):
                return
        time.sleep(0.05)
    raise BenchError(f"nothing listens on port {port} after {timeout}s")


def lo_counters():
    base = "/sys/class/net/lo/statistics/"
    return {k: int(open(base + k).read()) for k in ("tx_bytes", "tx_packets")}


class Redirector:
    """tools/sockredir attached to CG_SOCKMAP; stats() reads its counters.
    SHAPE, one of its options ("pass", "no-msg", "skb"), says what runs on
    the data of the sockets in its sockhash; by default every message is
    redirected to the peer's ingress."""

    def __init__(self, tools, shape=None):
        cmd = [tools + "/sockredir"] + ([f"--{shape}"] if shape else []) + [CG_SOCKMAP]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        if self.p.stdout.readline() != "ready\n":
            raise BenchError(f"{cmd} failed to attach (exit {self.p.wait()})")

    def ask(self, command):
        self.p.stdin.write(command + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise BenchError("sockredir died")
        return json.loads(line)

    def stats(self):
        """Bytes redirected and passed, and the sockets put into the sockhash."""
        s = self.ask("stats")
        out = {o: sum(s[r][o]["bytes"] for r in s) for o in ("redirected", "passed")}
        out["sockets"] = self.ask("sockets")["inserted"]
        return out

    def close(self):
        self.p.stdin.close()
        if self.p.wait() != 0:
            raise BenchError(f"sockredir exited with {self.p.returncode}")


def checked(system, workload, redirector, rec):
    """Runs workload() (which returns a record with payload_bytes), with the
    loopback and BPF counters around it, and checks that the bytes went the
    way the system says; returns the record with the evidence in "proof"."""
    lo0 = lo_counters()
    bpf0 = redirector.stats() if redirector else None
    lost = None
    try:
        rec.update(workload())
    except DataLost as e:
        rec.update(e.rec)
        lost = e
    lo1 = lo_counters()
    bpf1 = redirector.stats() if redirector else None
    payload = rec["payload_bytes"]
    proof = {"lo_tx_bytes": lo1["tx_bytes"] - lo0["tx_bytes"],
             "lo_tx_packets": lo1["tx_packets"] - lo0["tx_packets"]}
    if bpf0:
        proof.update({f"bpf_{k}_bytes": bpf1[k] - bpf0[k] for k in ("redirected", "passed")})
        proof["bpf_sockets"] = bpf1["sockets"] - bpf0["sockets"]
    rec["proof"] = proof
    problems = []
    if payload <= 0:
        problems.append("no payload moved")
    if rec.get("flows", 1) > rec.get("transactions", rec.get("flows", 1)):
        problems.append("fewer transactions than flows: not every flow ran")
    if system == "sockmap":
        if proof["bpf_redirected_bytes"] < payload:
            problems.append("fewer bytes redirected than the workload moved")
        if proof["lo_tx_bytes"] > LO_SLACK(payload, rec.get("flows", 1)):
            problems.append("traffic on lo: not (all) redirected")
    elif system in ("tcp", "tcp-nodelay", "nobpf"):
        if proof["lo_tx_bytes"] < payload:
            problems.append("less traffic on lo than payload: not plain TCP")
        if bpf0 and proof["bpf_redirected_bytes"] + proof["bpf_passed_bytes"]:
            problems.append("BPF saw traffic of the BPF-free cgroup")
    elif system in ("pass", "skb", "nomsg"):
        # In the sockhash, nothing redirected: the sk_msg program (pass) or
        # the sk_skb verdict (skb) passed every byte, or with no program on
        # their data (nomsg) nothing counted any, and the sockets did enter
        # the sockhash (both ends of every flow); lo carried it all.
        if system == "pass" and (proof["bpf_passed_bytes"] < payload
                                 or proof["bpf_redirected_bytes"]):
            problems.append("sk_msg program did not pass every byte")
        if system == "skb" and (proof["bpf_passed_bytes"] < payload
                                or proof["bpf_redirected_bytes"]):
            problems.append("sk_skb verdict did not pass every byte")
        if system == "nomsg":
            if proof["bpf_redirected_bytes"] + proof["bpf_passed_bytes"]:
                problems.append("BPF counted bytes with no program on the sockets' data")
            if proof["bpf_sockets"] < 2 * rec.get("flows", 1):
                problems.append("fewer sockets entered the sockhash than the flows have ends")
        if proof["lo_tx_bytes"] < payload:
            problems.append("less traffic on lo than payload")
    elif system in ("uds", "bench-sockmap"):
        if proof["lo_tx_bytes"] > LO_SLACK(payload):
            problems.append("traffic on lo")
    if problems:
        raise BenchError(f"{rec['workload']} {system} size {rec.get('size')}: "
                         f"{'; '.join(problems)}: payload {payload}, proof {proof}")
    if lost:
        raise DataLost(str(lost), rec)
    return rec


def iperf3(size, seconds, cg):
    port = next_port()
    srv = spawn(pinned(RECEIVER_CPU, "iperf3", "-s", "-1", "-B", HOST, "-p", str(port)), cg,
                stdout=subprocess.DEVNULL)
    try:
        wait_listening(port)
        cli = spawn(pinned(SENDER_CPU, "iperf3", "-c", HOST, "-p", str(port), "-l", str(size),
                           "-t", str(seconds), "-J"), cg, stdout=subprocess.PIPE)
        out = cli.stdout.read()
        cli_ru = finish(cli, "iperf3 client", 60, out)
        srv_ru = finish(srv, "iperf3 server", 60)
    finally:
        kill(srv)
    doc = json.loads(out)
    if "error" in doc or "sum_received" not in doc.get("end", {}):
        err = doc.get("error", "no sum_received")
        raise (SendRefused if err.startswith("unable to write") else BenchError)(
            f"iperf3 -l {size} failed: {err}")
    end, got = doc["end"], doc["end"]["sum_received"]
    mb = got["bytes"] / 1e6
    cpu = (cli_ru.ru_utime + cli_ru.ru_stime + srv_ru.ru_utime + srv_ru.ru_stime)
    return {
        "gbit_s": got["bits_per_second"] / 1e9,
        "seconds": got["seconds"],
        "payload_bytes": got["bytes"],
        "sent_bytes": end["sum_sent"]["bytes"],
        "receiver_wakeups": srv_ru.ru_nvcsw,
        "receiver_involuntary_switches": srv_ru.ru_nivcsw,
        "wakeups_per_mb": srv_ru.ru_nvcsw / mb if mb else None,
        "cpu_s_per_gb": cpu / (mb / 1e3) if mb else None,
        "cpu_s": {"sender_user": cli_ru.ru_utime, "sender_sys": cli_ru.ru_stime,
                  "receiver_user": srv_ru.ru_utime, "receiver_sys": srv_ru.ru_stime},
    }


def cpu_times():
    """{cpu: (busy, total)} in jiffies from /proc/stat: user, nice, system,
    idle, iowait, irq, softirq and steal; busy is all but idle and iowait."""
    times = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            t = [int(x) for x in f[1:9]]
            times[f[0][3:]] = (sum(t) - t[3] - t[4], sum(t))
    return times


def busy(t0, t1, cpu):
    """The share of the time between two cpu_times() that CPU was busy."""
    (b0, a0), (b1, a1) = t0[cpu], t1[cpu]
    return (b1 - b0) / (a1 - a0)


def stream(tools, size, seconds, cg, addr=None, nodelay=False):
    """pingpong stream into pingpong sink: SIZE-byte blocking writes, read
    with blocking 64 KiB reads as fast as they come, every byte checked;
    over TCP (TCP_NODELAY if NODELAY), or a Unix socket if ADDR is a path."""
    addr = addr or f"{HOST}:{next_port()}"
    srv = spawn(pinned(RECEIVER_CPU, tools + "/pingpong", "sink", addr), cg,
                stdout=subprocess.PIPE)
    cli = None
    try:
        if srv.stdout.readline() != "listening\n":
            raise BenchError("pingpong sink did not start")
        t0 = cpu_times()
        cli = spawn(pinned(SENDER_CPU, tools + "/pingpong", "stream", addr, str(size),
                           str(seconds), *(["nodelay"] if nodelay else [])), cg,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wout, werr = cli.communicate(timeout=seconds + 60)
            t1 = cpu_times()
        except subprocess.TimeoutExpired:
            kill(cli)
            raise Stalled(f"stream -l {size}: the writer had not finished {seconds + 60}s "
                          f"into its {seconds}s")
        if cli.returncode:
            # Vanilla fails a write with ENOMEM when the receiver is out of
            # receive memory, as with iperf3.
            raise (SendRefused if "pingpong: write:" in werr else BenchError)(
                f"pingpong stream -l {size} exited with {cli.returncode}: {werr.strip()}")
        try:
            rout, _ = srv.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise Stalled(f"stream -l {size}: the reader saw no EOF 60s after the writer "
                          "closed")
        rc = srv.returncode  # 1: a wrong byte, which bad_at tells
    finally:
        kill(srv)
        if cli:
            kill(cli)
    w, r = json.loads(wout), json.loads(rout)
    if rc not in (0, 1) or (rc == 1) != (r["bad_at"] >= 0):
        raise BenchError(f"pingpong sink exited with {rc}: {rout}")
    mb = r["bytes"] / 1e6
    rec = {
        "gbit_s": r["bytes"] * 8 / r["seconds"] / 1e9,
        "seconds": r["seconds"],
        "payload_bytes": r["bytes"],
        "receiver_wakeups": r["wakeups"],
        "wakeups_per_mb": r["wakeups"] / mb,
        "sender_wakeups_per_mb": w["wakeups"] / mb,
        "reads_per_mb": r["reads"] / mb,
        "cpu_s_per_gb": (w["cpu_s"] + r["cpu_s"]) / (mb / 1e3),
        # How busy each end's CPU was, whoever ran on it (kernel threads
        # too): the one near 1 is the side that sets the pace.
        "sender_cpu_busy": busy(t0, t1, SENDER_CPU),
        "receiver_cpu_busy": busy(t0, t1, RECEIVER_CPU),
    }
    if r["bytes"] != w["bytes"] or r["bad_at"] >= 0:
        raise DataLost(f"{w['bytes']} bytes written, {r['bytes']} read"
                       + (f", wrong from byte {r['bad_at']}" if r["bad_at"] >= 0 else ""), rec)
    return rec


def sockperf(size, seconds, cg):
    port = next_port()
    srv = spawn(pinned(RECEIVER_CPU, "sockperf", "server", "--tcp", "--no-rdtsc", "-i", HOST,
                       "-p", str(port)), cg, stdout=subprocess.DEVNULL)
    try:
        wait_listening(port)
        cli = spawn(pinned(SENDER_CPU, "sockperf", "ping-pong", "--tcp", "--no-rdtsc",
                           "-i", HOST, "-p", str(port), "-m", str(size), "-t", str(seconds)),
                    cg, stdout=subprocess.PIPE)
        out = re.sub(r"\x1b\[[0-9;]*m", "", cli.stdout.read())
        finish(cli, "sockperf client", seconds + 60, out)
    finally:
        srv.send_signal(signal.SIGINT)
        reap(srv, 30)

    def num(pattern):
        m = re.search(pattern, out)
        if not m:
            raise BenchError(f"sockperf output lacks /{pattern}/:\n{out}")
        return float(m.group(1))
    total = int(num(r"\[Total Run\].*ReceivedMessages=(\d+)"))
    return {
        "latency_us": num(r"avg-latency=([\d.]+)"),
        "latency_stddev_us": num(r"avg-latency=[\d.]+ \(std-dev=([\d.]+)"),
        "p50_us": num(r"percentile 50\.000 =\s*([\d.]+)"),
        "p99_us": num(r"percentile 99\.000 =\s*([\d.]+)"),
        "max_us": num(r"<MAX> observation =\s*([\d.]+)"),
        "seconds": num(r"\[Valid Duration\] RunTime=([\d.]+)"),
        "messages": int(num(r"\[Valid Duration\].*ReceivedMessages=(\d+)")),
        # Both directions, warm-up included: what went through the sockets.
        "payload_bytes": 2 * size * total,
    }


def slab_bytes():
    """The kernel's slab memory (/proc/meminfo Slab, in kB), in bytes."""
    return 1024 * int(re.search(r"^Slab:\s+(\d+)", open("/proc/meminfo").read(), re.M)[1])


def pingpong(tools, addr, size, seconds, cg, flows=1):
    """pingpong client and server: FLOWS connections, a SIZE-byte request
    outstanding on each; with several, the slab an idle flow holds."""
    slab0 = slab_bytes() if flows > 1 else 0
    srv = spawn(pinned(RECEIVER_CPU, tools + "/pingpong", "server", addr, str(flows)), cg,
                stdout=subprocess.PIPE)
    try:
        if srv.stdout.readline() != "listening\n":
            raise BenchError("pingpong server did not start")
        cli = spawn(pinned(SENDER_CPU, tools + "/pingpong", "client", addr, str(size),
                           str(seconds), str(flows)), cg, stdout=subprocess.PIPE)
        if flows > 1:
            if cli.stdout.readline() != "connected\n" or srv.stdout.readline() != "accepted\n":
                raise BenchError(f"pingpong: not all of {flows} flows connected")
            slab = (slab_bytes() - slab0) / flows
        out = cli.stdout.read()
        finish(cli, "pingpong client", seconds + 120)
        finish(srv, "pingpong server", 60)
    finally:
        kill(srv)
    r = json.loads(out)
    rec = {"tps": r["tps"], "seconds": r["seconds"], "transactions": r["transactions"],
           "payload_bytes": r["bytes"]}
    if flows > 1:
        rec["slab_per_flow"] = slab
    if "latency_us" in r:
        lat = r["latency_us"]
        rec.update(latency_us=lat["mean"], p50_us=lat["p50"], p99_us=lat["p99"],
                   max_us=lat["max"])
    return rec


def solo(tools, size, count, cg):
    """pingpong solo: the mean time of a send() and of a recv() with nobody
    waiting (under --icount, their instructions)."""
    p = spawn(pinned(SENDER_CPU, tools + "/pingpong", "solo", f"{HOST}:{next_port()}",
                     str(size), str(count)), cg, stdout=subprocess.PIPE)
    out = p.stdout.read()
    finish(p, "pingpong solo", 600, out)
    r = json.loads(out)
    return {"count": r["count"], "send_ns": r["send_ns"], "recv_ns": r["recv_ns"],
            "payload_bytes": r["bytes"]}


def redis(size, pipeline, requests, clients, cg):
    """redis-benchmark, SET then GET of one key, from CLIENTS connections."""
    port = next_port()
    work = tempfile.mkdtemp(prefix="bench-redis-")
    srv = spawn(pinned(RECEIVER_CPU, "redis-server", "--port", str(port), "--bind", HOST,
                       "--save", "", "--appendonly", "no", "--dir", work,
                       "--logfile", work + "/redis.log"), cg)
    try:
        wait_listening(port)
        cli = spawn(pinned(SENDER_CPU, "redis-benchmark", "-h", HOST, "-p", str(port),
                           "-c", str(clients), "-n", str(requests), "-d", str(size),
                           "-P", str(pipeline), "-t", "set,get", "--csv"), cg,
                    stdout=subprocess.PIPE)
        out = cli.stdout.read()
        finish(cli, "redis-benchmark", 900, out)
    finally:
        srv.terminate()
        reap(srv, 60)
        shutil.rmtree(work, ignore_errors=True)
    rows = {}
    for line in out.splitlines()[1:]:
        f = [x.strip('"') for x in line.split(",")]
        if len(f) == 8:
            rows[f[0]] = [float(x) for x in f[1:]]
    if set(rows) != {"SET", "GET"} or not all(r[0] for r in rows.values()):
        raise BenchError(f"redis-benchmark printed no SET and GET rates:\n{out}")
    rec = {"pipeline": pipeline, "clients": clients, "requests": 2 * requests,
           # Each value crosses once each way (SET to the server, GET back).
           "payload_bytes": 2 * requests * size}
    for test, (rps, avg, _, p50, _, p99, mx) in rows.items():
        t = test.lower()
        rec.update({f"{t}_rps": rps, f"{t}_latency_ms": avg, f"{t}_p50_ms": p50,
                    f"{t}_p99_ms": p99, f"{t}_max_ms": mx})
    return rec


WRK_UNITS = {"us": 1e-3, "ms": 1, "s": 1e3, "B": 1, "KB": KIB, "MB": KIB ** 2, "GB": KIB ** 3}


def wrk(seconds, cg):
    """wrk against nginx (sendfile on) serving a WRK_PAGE-byte file."""
    work = tempfile.mkdtemp(prefix="bench-nginx-")
    os.makedirs(work + "/www")
    with open(work + "/www/page", "wb") as f:
        f.write(os.urandom(WRK_PAGE))
    with open(work + "/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(w=work, h=HOST, p=NGINX_PORTS))
    port = NGINX_PORTS["sendfile"]
    srv = spawn(pinned(RECEIVER_CPU, "nginx", "-p", work, "-e", work + "/nginx-error.log",
                       "-c", work + "/nginx.conf"), cg)
    try:
        wait_listening(port)
        cli = spawn(pinned(SENDER_CPU, "wrk", "-t1", f"-c{WRK_CONNECTIONS}", f"-d{seconds}s",
                           "--latency", f"http://{HOST}:{port}/page"), cg,
                    stdout=subprocess.PIPE)
        out = cli.stdout.read()
        finish(cli, "wrk", seconds + 120, out)
    finally:
        srv.terminate()
        reap(srv, 60)
        shutil.rmtree(work, ignore_errors=True)

    def num(pattern):
        m = re.search(pattern, out)
        if not m:
            raise BenchError(f"wrk output lacks /{pattern}/:\n{out}")
        return float(m.group(1)) * WRK_UNITS.get(m.group(2), 1) if m.lastindex > 1 \
            else float(m.group(1))
    requests = int(num(r"(\d+) requests in"))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    if not requests or errors:
        raise BenchError(f"wrk: {errors.group(0) if errors else 'no requests'}:\n{out}")
    return {"rps": num(r"Requests/sec:\s+([\d.]+)"), "requests": requests,
            "latency_ms": num(r"Latency\s+([\d.]+)(us|ms|s)\b"),
            "p50_ms": num(r"50%\s+([\d.]+)(us|ms|s)\b"),
            "p90_ms": num(r"90%\s+([\d.]+)(us|ms|s)\b"),
            "p99_ms": num(r"99%\s+([\d.]+)(us|ms|s)\b"),
            "seconds": num(r"requests in ([\d.]+)s"),
            "connections": WRK_CONNECTIONS,
            "payload_bytes": int(num(r"requests in [\d.]+\w+, ([\d.]+)(B|KB|MB|GB) read"))}


def bench_sockmap(bench, seconds, cg):
    """The selftests' bench: one producer, sendfile() of 128 KiB chunks, a
    sk_msg program redirecting to the consumer's ingress."""
    # Consumer 0 reads, consumer 1 idles in this mode: the reader runs on
    # vCPU 0, the producer (sender) on vCPU 1.
    cmd = [bench, "sockmap", "--tx-verdict-ingress", "-c", "2", "-p", "1",
           "--cons-affinity", "0,1", "--prod-affinity", "1", "-d", str(seconds), "-w", "1"]
    p = spawn(cmd, cg, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
              cwd=os.path.dirname(bench))
    out = p.stdout.read()
    rc, _ = reap(p, seconds + 120)
    if rc:
        raise BenchError(f"bench exited with {rc}:\n{out[-3000:]}")
    rates = [float(x) for x in re.findall(r"Rcv Speed\s+([\d.]+) MB/s", out)]
    if not rates:
        raise BenchError(f"bench printed no Rcv Speed:\n{out[-3000:]}")
    m = re.search(r"Summary: total trans\s+([\d.]+) MB", out)
    if not m or not float(m.group(1)) or not any(rates):
        raise BenchError(f"bench moved nothing:\n{out[-3000:]}")
    return {"rcv_mb_s": sum(rates) / len(rates), "rcv_mb_s_per_iteration": rates,
            "payload_bytes": int(float(m.group(1)) * 1e6), "output_tail": out[-1500:]}


def guest_info():
    with gzip.open("/proc/config.gz", "rt") as f:
        config = f.read()
    m = re.search(r"^CONFIG_HZ=(\d+)$", config, re.M)
    hz = int(m.group(1)) if m else None

    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            return None
    # /proc/cpuinfo's fields (every vCPU's are the same).
    cpu = {k.strip(): v.strip() for k, sep, v in
           (line.partition(":") for line in open("/proc/cpuinfo")) if sep}
    pkgs = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "iperf3",
                           "sockperf", "redis-server", "nginx-light", "wrk", "libbpf1", "bpftool", "clang-22", "qemu-system-x86",
                           "python3"], capture_output=True, text=True).stdout
    return {
        "kernel_release": platform.release(),
        "kernel_version": open("/proc/version").read().strip(),
        "hz": hz,
        "cpus": os.cpu_count(),
        "cpu_model": cpu.get("model name"),
        "copy_flags": sorted({"erms", "fsrm"} & set(cpu.get("flags", "").split())),
        "clocksource": open("/sys/devices/system/clocksource/clocksource0/"
                            "current_clocksource").read().strip(),
        "emulation": "QEMU TCG (no KVM): absolute numbers are not bare metal; compare ratios",
        "sender_cpu": SENDER_CPU, "receiver_cpu": RECEIVER_CPU,
        "tools": dict(line.split(" ", 1) for line in pkgs.splitlines() if " " in line),
        "iperf3": first_line(["iperf3", "--version"]),
        "sockperf": first_line(["sockperf", "--version"]),
    }


def each_system(tools, shapes, fn):
    """fn(system, cgroup, redirector) for each (system, shape) of SHAPES:
    "nobpf" in the cgroup without BPF, the others with tools/sockredir
    attached to theirs, SHAPE its option (None: every message redirected)."""
    for system, shape in shapes:
        red = None if system == "nobpf" else Redirector(tools, shape)
        try:
            fn(system, CG_SOCKMAP if red else CG_PLAIN, red)
        finally:
            if red:
                red.close()


def manyflow(tools, plan, measure):
    """Many flows: no BPF loaded at all, then sockmap on every flow with
    nothing redirected, then every flow redirected (accelerated)."""
    each_system(tools, (("nobpf", None), ("pass", "pass"), ("sockmap", None)),
                lambda system, cg, red: measure(
                    "manyflow", system, 64,
                    lambda: pingpong(tools, f"{HOST}:{next_port()}", 64, plan["flows_s"], cg,
                                     plan["flows"]), red, flows=plan["flows"]))


def profiled(fn, name, windows):
    """fn between two marks for bench/insnprof.c, which scripts/bench.sh
    --profile loads into the instruction-counted boots: getppid(), which
    nothing else in the guest calls while a measurement runs. The plugin
    writes the instructions since the previous mark at each one, so of
    the last 2N windows of its output (the guest's start-up may add some
    before), window 2i + 1 is the measurement named windows[i]."""
    def run():
        windows.append(name)
        os.getppid()
        try:
            return fn()
        finally:
            os.getppid()
    return run


def nonredir(tools, plan, measure):
    """Sockets that do not redirect, sockperf ping-pong as the counted
    latency table has it: plain TCP without BPF, then sockets in the
    sockhash with no program on their data, with the sk_msg program passing
    every message, with an sk_skb verdict alone passing every skb."""
    def sizes(system, cg, red):
        for size in plan["nonredir_sizes"]:
            measure("nonredir", system, size, lambda: sockperf(size, plan["latency_s"], cg), red)
    each_system(tools, (("nobpf", None), ("nomsg", "no-msg"), ("pass", "pass"), ("skb", "skb")),
                sizes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=PLANS, required=True)
    ap.add_argument("--tools", required=True, help="build output of bench/")
    ap.add_argument("--bench", required=True, help="the selftests' bench binary")
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", help="comma-separated workloads to run, of "
                    + ", ".join(WORKLOADS) + " (default: all)")
    ap.add_argument("--profile", action="store_true", help="mark each measurement's "
                    "start and end for bench/insnprof.c (see profiled())")
    args = ap.parse_args()
    plan = dict(PLANS[args.mode])
    if args.only:
        only = args.only.split(",")
        if not set(only) <= set(WORKLOADS):
            ap.error(f"--only wants some of {', '.join(WORKLOADS)}, not {args.only}")
        # The plan says what ran: the workloads left out have no sizes, or none.
        plan.update(only=only, **{k: v for w, keys in WORKLOADS.items() if w not in only
                                  for k, v in keys.items()})
    doc = json.load(open(args.meta))
    label = f"{doc['variant']} rep {doc['rep']}/{doc['reps']}"
    doc.update(guest=guest_info(), plan=plan, records=[])
    for cg in (CG_SOCKMAP, CG_PLAIN):
        os.makedirs(cg, exist_ok=True)
    progress(f"{label}: kernel {doc['guest']['kernel_release']}, HZ={doc['guest']['hz']}, "
             f"{doc['guest']['cpus']} vCPUs")

    def measure(workload, system, size, fn, redirector=None, **extra):
        progress(f"{label}: {workload} {system} size {size}")
        rec = {"workload": workload, "system": system, "size": size, **extra}
        if args.profile:
            fn = profiled(fn, f"{workload.replace(' ', '')}-{system}-{size}",
                          doc.setdefault("profile_windows", []))
        try:
            doc["records"].append(checked(system, fn, redirector, rec))
        except SendRefused as e:
            # Vanilla fails a redirected sendmsg() with ENOMEM when its
            # receiver is out of receive memory (the series makes it wait).
            # That is a result for vanilla and for the earlier posting (the
            # anchor), kept and reported; for the series, a failure.
            if doc["variant"] not in ("vanilla", "anchor"):
                raise
            progress(f"{label}: {workload} {system} size {size}: the kernel refused "
                     f"a write, recorded: {e}")
            rec["refused"] = str(e)
            doc["records"].append(rec)
        except DataLost as e:
            # The anchor drops what waits on its backlog when the sender
            # closes: its own bug, recorded with the measurement.
            if doc["variant"] not in ("vanilla", "anchor"):
                raise
            progress(f"{label}: {workload} {system} size {size}: data lost, recorded: {e}")
            doc["records"].append(dict(e.rec, data_lost=str(e)))

    red = Redirector(args.tools)
    try:
        for size in plan["iperf_sizes"]:
            for system, cg in (("sockmap", CG_SOCKMAP), ("tcp", CG_PLAIN)):
                measure("iperf3", system, size,
                        lambda: iperf3(size, plan["iperf_s"], cg), red)
        # The stream without Nagle too (sockmap never holds a write for an
        # ACK); the ping-pong with one tool on all three (sockperf has no UDS).
        for size in plan["stream_sizes"]:
            for system, cg, kw in (("sockmap", CG_SOCKMAP, {}), ("tcp", CG_PLAIN, {}),
                                   ("uds", CG_PLAIN, {"addr": "/tmp/bench-uds-stream.sock"}),
                                   ("tcp-nodelay", CG_PLAIN, {"nodelay": True})):
                measure("stream", system, size,
                        lambda: stream(args.tools, size, plan["stream_s"], cg, **kw), red)
        for size in plan["latency_sizes"]:
            for system, cg in (("sockmap", CG_SOCKMAP), ("tcp", CG_PLAIN)):
                measure("sockperf", system, size,
                        lambda: sockperf(size, plan["latency_s"], cg), red)
            for system, cg, addr in (("sockmap", CG_SOCKMAP, None), ("tcp", CG_PLAIN, None),
                                     ("uds", CG_PLAIN, "/tmp/bench-uds.sock")):
                measure("pingpong", system, size,
                        lambda: pingpong(args.tools, addr or f"{HOST}:{next_port()}", size,
                                         plan["latency_s"], cg), red)
        for size in plan["redis_sizes"]:
            for pipeline, requests in REDIS_REQUESTS.items():
                n = int(requests * plan["redis_scale"])
                for system, cg in (("sockmap", CG_SOCKMAP), ("tcp", CG_PLAIN)):
                    measure(f"redis -P{pipeline}", system, size,
                            lambda: redis(size, pipeline, n, plan["redis_clients"], cg), red)
        if plan["wrk_s"]:
            for system, cg in (("sockmap", CG_SOCKMAP), ("tcp", CG_PLAIN)):
                measure("wrk", system, WRK_PAGE, lambda: wrk(plan["wrk_s"], cg), red)
        if plan["syscalls"]:
            for system, cg in (("sockmap", CG_SOCKMAP), ("tcp", CG_PLAIN)):
                measure("syscall", system, 64,
                        lambda: solo(args.tools, 64, plan["syscalls"], cg), red)
        if plan["bench_s"]:
            measure("bench", "bench-sockmap", 128 * KIB,
                    lambda: bench_sockmap(args.bench, plan["bench_s"], CG_PLAIN), red)
    finally:
        red.close()
    if plan["flows"]:
        manyflow(args.tools, plan, measure)
    if plan["nonredir_sizes"]:
        nonredir(args.tools, plan, measure)

    doc["elapsed_s"] = time.monotonic() - T0
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.rename(args.out + ".tmp", args.out)
    progress(f"{label}: {len(doc['records'])} measurements, all checked, in "
             f"{doc['elapsed_s']:.0f}s: {args.out}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        progress(f"FAIL: {e}")
        sys.exit(1)
