#!/usr/bin/env python3
"""Broker benchmark harness behind docs/benchmarks.md.

Each run: a fresh data dir, a fresh broker (the given gregor binary, with --pprof-addr
127.0.0.1:6060), the `gregor bench` client(s), then the broker is stopped. It prints one JSON
line per run: the client's figures plus the CPU seconds of the broker (from /proc/<pid>/stat),
of the clients (rusage) and of everything else on the machine during the run ("other_cpu":
other work sharing the cores; such runs are flagged "noisy").

usage:
  scripts/bench-broker.py produce BIN LABEL SIZE RECORDS PARTITIONS RUNS [--consume] [--tls CERTDIR] [--profile SECS OUTDIR]
  scripts/bench-broker.py tail BIN LABEL PARTITIONS RATE RECORDS RUNS [--profile SECS OUTDIR]

produce: `gregor bench produce` (acks=all) of RECORDS records of SIZE bytes to a new topic of
PARTITIONS partitions; with --consume, then `gregor bench consume` of them from the page cache.
tail: a consumer tails a new topic of PARTITIONS partitions while a producer writes RATE
records/s of 100 bytes to it (end-to-end latency, broker CPU per record).
--tls CERTDIR runs the clients over TLS: the broker gets an SSL listener on 127.0.0.1:9093 with
the PEM key store CERTDIR/broker.pem, and the clients connect there with --command-config
CERTDIR/ssl.properties (security.protocol=SSL and the CA as PEM trust store); the figures add
the broker's CPU seconds per GiB moved ("broker_s_per_GiB", "cons_broker_s_per_GiB").
--profile takes a SECS-second CPU profile and an allocs profile of the broker into OUTDIR.
The data dir is $GREGOR_BENCH_DIR (default /tmp/gregor-bench); it is deleted at each start.
"""
import json, os, shutil, socket, subprocess, sys, time, urllib.request, threading

DATA = os.environ.get("GREGOR_BENCH_DIR", "/tmp/gregor-bench")
HZ = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ


def machine_busy():
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f))
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / HZ


def start_broker(binary, extra=()):
    shutil.rmtree(DATA, ignore_errors=True)
    log = open(DATA + ".server.log", "w")
    p = subprocess.Popen([binary, "server", "--set", "log.dirs=" + DATA, "--pprof-addr", "127.0.0.1:6060", *extra],
                         stdout=log, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", 9092), 0.1).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit("broker did not start")


def stop_broker(p):
    p.terminate()
    p.wait()


def run_client(args):
    """Runs a bench client; returns (json result, cpu seconds)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"client failed: {args} {out[-500:]!r}")
    return json.loads(out), ru.ru_utime + ru.ru_stime


def profile(secs, outdir, name):
    os.makedirs(outdir, exist_ok=True)
    def get(kind, q=""):
        with urllib.request.urlopen(f"http://127.0.0.1:6060/debug/pprof/{kind}{q}", timeout=secs + 30) as r:
            open(os.path.join(outdir, f"{name}.{kind}.pb.gz"), "wb").write(r.read())
    get("profile", f"?seconds={secs}")
    get("allocs")


def lat(r):
    l = r["latency_ms"]
    return {"p50": round(l["p50"], 1), "p99": round(l["p99"], 1), "p999": round(l["p999"], 1)}


def main():
    mode, binary, label = sys.argv[1:4]
    rest = sys.argv[4:]
    prof = None
    if "--profile" in rest:
        i = rest.index("--profile")
        prof = (int(rest[i + 1]), rest[i + 2])
        del rest[i:i + 3]
    consume = "--consume" in rest
    rest = [a for a in rest if a != "--consume"]
    srv, cli = [], []
    if "--tls" in rest:
        i = rest.index("--tls")
        d = rest[i + 1]
        del rest[i:i + 2]
        srv = ["--set", "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "--set", "ssl.keystore.type=PEM",
               "--set", "ssl.keystore.location=" + os.path.join(d, "broker.pem")]
        cli = ["-b", "127.0.0.1:9093", "--command-config", os.path.join(d, "ssl.properties")]
    B = binary
    if mode == "produce":
        size, n, parts, runs = rest
        for r in range(int(runs)):
            bp = start_broker(B, srv)
            m0, b0 = machine_busy(), proc_cpu(bp.pid)
            t0 = time.time()
            th = None
            if prof:
                th = threading.Thread(target=lambda: (time.sleep(0.3), profile(prof[0], prof[1], f"{label}-{r}")))
                th.start()
            res, ccpu = run_client([B, "bench", "produce", "--topic", "bt", "--partitions", parts, "--records", n,
                                    "--record-size", size, "--acks", "all", "--report-interval-ms", "0", "-o", "json", *cli])
            wall = time.time() - t0
            if th:
                th.join()
            m1, b1 = machine_busy(), proc_cpu(bp.pid)
            out = {"label": label, "run": r, "rec_s": round(res["records_per_sec"]), "MB_s": round(res["mb_per_sec"], 1),
                   **lat(res), "broker_cpu": round(b1 - b0, 2), "client_cpu": round(ccpu, 2),
                   "other_cpu": round((m1 - m0) - (b1 - b0) - ccpu, 2), "wall": round(wall, 2),
                   "broker_ns_per_rec": round((b1 - b0) * 1e9 / int(n), 1),
                   "broker_s_per_GiB": round((b1 - b0) / (int(n) * int(size) / 2**30), 2)}
            if consume:
                subprocess.run(["sync"])
                m0, b0, t0 = machine_busy(), proc_cpu(bp.pid), time.time()
                th = None
                if prof:
                    th = threading.Thread(target=lambda: (time.sleep(0.3), profile(min(prof[0], 2), prof[1], f"{label}-{r}-consume")))
                    th.start()
                cres, cc = run_client([B, "bench", "consume", "--topic", "bt", "--report-interval-ms", "0", "-o", "json", *cli])
                if th:
                    th.join()
                m1, b1 = machine_busy(), proc_cpu(bp.pid)
                out.update({"cons_MB_s": round(cres["mb_per_sec"], 1), "cons_rec_s": round(cres["records_per_sec"]),
                            "cons_broker_cpu": round(b1 - b0, 2), "cons_client_cpu": round(cc, 2),
                            "cons_broker_s_per_GiB": round((b1 - b0) / (int(n) * int(size) / 2**30), 2),
                            "cons_other_cpu": round((m1 - m0) - (b1 - b0) - cc, 2)})
            st = open(f"/proc/{bp.pid}/status").read()
            out["rss_kb"] = int([l for l in st.splitlines() if l.startswith("VmRSS")][0].split()[1])
            stop_broker(bp)
            out["noisy"] = out["other_cpu"] > 0.15 * out["wall"]
            print(json.dumps(out), flush=True)
    elif mode == "tail":
        parts, rate, n, runs = rest
        for r in range(int(runs)):
            bp = start_broker(B)
            subprocess.run([B, "topic", "create", "bt", "--partitions", parts, "--replication-factor", "1"],
                           stdout=subprocess.DEVNULL, check=True)
            cons = {}
            def consumer():
                cons["res"], cons["cpu"] = run_client([B, "bench", "consume", "--topic", "bt", "--records", n,
                                                       "--report-interval-ms", "0", "-o", "json"])
            ct = threading.Thread(target=consumer)
            ct.start()
            time.sleep(1)
            m0, b0, t0 = machine_busy(), proc_cpu(bp.pid), time.time()
            th = None
            if prof:
                th = threading.Thread(target=lambda: (time.sleep(1), profile(prof[0], prof[1], f"{label}-{r}")))
                th.start()
            res, pcpu = run_client([B, "bench", "produce", "--topic", "bt", "--records", n, "--record-size", "100",
                                    "--throughput", rate, "--report-interval-ms", "0", "-o", "json"])
            ct.join()
            if th:
                th.join()
            m1, b1 = machine_busy(), proc_cpu(bp.pid)
            wall = time.time() - t0
            stop_broker(bp)
            c = cons["res"]
            out = {"label": label, "run": r, "broker_cpu": round(b1 - b0, 2),
                   "broker_ns_per_rec": round((b1 - b0) * 1e9 / int(n), 1),
                   "prod_rec_s": round(res["records_per_sec"]), "prod": lat(res), "e2e": lat(c),
                   "clients_cpu": round(pcpu + cons["cpu"], 2),
                   "other_cpu": round((m1 - m0) - (b1 - b0) - pcpu - cons["cpu"], 2), "wall": round(wall, 2)}
            out["noisy"] = out["other_cpu"] > 0.15 * out["wall"]
            print(json.dumps(out), flush=True)


main()
