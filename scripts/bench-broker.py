#!/usr/bin/env python3
"""Broker benchmark harness behind docs/benchmarks.md.

Each run: a fresh data dir, a fresh broker (the given gregor binary, with --pprof-addr
127.0.0.1:6060), the `gregor bench` client(s), then the broker is stopped. It prints one JSON
line per run: the client's figures plus the CPU seconds of the broker (from /proc/<pid>/stat),
of the clients (rusage) and of everything else on the machine during the run ("other_cpu":
other work sharing the cores; such runs are flagged "noisy").

usage:
  scripts/bench-broker.py produce BIN LABEL SIZE RECORDS PARTITIONS RUNS [--consume] [--tls CERTDIR] [--profile SECS OUTDIR]
                          [--drivers gregor,kafka-tools]
  scripts/bench-broker.py tail BIN LABEL PARTITIONS RATE RECORDS RUNS [--profile SECS OUTDIR]

produce: `gregor bench produce` (acks=all) of RECORDS records of SIZE bytes to a new topic of
PARTITIONS partitions; with --consume, then `gregor bench consume` of them from the page cache.
tail: a consumer tails a new topic of PARTITIONS partitions while a producer writes RATE
records/s of 100 bytes to it (end-to-end latency, broker CPU per record).
--tls CERTDIR runs the clients over TLS: the broker gets an SSL listener on 127.0.0.1:9093 with
the PEM key store CERTDIR/broker.pem, and the clients connect there with --command-config
CERTDIR/ssl.properties (security.protocol=SSL and the CA as PEM trust store); the figures add
the broker's CPU seconds per GiB moved ("broker_s_per_GiB", "cons_broker_s_per_GiB").
--drivers runs each run with every driver named, one after another, each on a fresh broker:
"gregor" is `gregor bench` (franz-go), "kafka-tools" Kafka's own kafka-producer-perf-test and
kafka-consumer-perf-test (ProducerPerformance and ConsumerPerformance of
org.apache.kafka:kafka-tools, run with java -cp on the classpath Maven resolves into
compat/java/target/tools-lib; fetched on first use) with the settings of `gregor bench`: 1 MiB
batches, 5 ms linger, 256 MiB buffered, acks=all, idempotent, no compression; 64 MiB fetches
of at most 8 MiB a partition. Each JSON line names its "driver".
--profile takes a SECS-second CPU profile and an allocs profile of the broker into OUTDIR.
The data dir is $GREGOR_BENCH_DIR (default /tmp/gregor-bench); it is deleted at each start.
"""
import json, os, re, shutil, socket, subprocess, sys, time, urllib.request, threading

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


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_LIB = os.path.join(ROOT, "compat", "java", "target", "tools-lib")
# kafka-run-class.sh's heap and JVM options for the perf tools.
JAVA = ["java", "-Xmx512M", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", os.path.join(TOOLS_LIB, "*")]


def kafka_tools():
    """Resolves kafka-tools and its dependencies into TOOLS_LIB with Maven, once."""
    if not os.path.isdir(TOOLS_LIB):
        env = dict(os.environ, MAVEN_OPTS=os.environ.get("MAVEN_OPTS", "") + " -Djansi.noreset=true")
        subprocess.run(["mvn", "-q", "-B", "-f", os.path.join(ROOT, "compat", "java", "pom.xml"), "-Pkafka-tools",
                        "dependency:copy-dependencies"], check=True, env=env)


def run_java(args):
    """Runs a Kafka perf tool; returns (its stdout lines, cpu seconds)."""
    p = subprocess.Popen(JAVA + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"client failed: {args} {out[-500:]!r}")
    return out.strip().splitlines(), ru.ru_utime + ru.ru_stime


def perf_produce(size, n, cli):
    """kafka-producer-perf-test with gregor bench's settings, in gregor bench's JSON shape.
    Its last line: "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
    latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th." (MB = MiB)."""
    lines, cpu = run_java(["org.apache.kafka.tools.ProducerPerformance", "--topic", "bt", "--num-records", n,
                           "--record-size", size, "--throughput", "-1", "--bootstrap-server", cli["bootstrap"],
                           "--command-property", "acks=all", "enable.idempotence=true", "batch.size=1048576",
                           "linger.ms=5", "buffer.memory=268435456", "compression.type=none", *cli["args"]])
    m = re.match(r"\d+ records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, "
                 r"(\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, (\d+) ms 99.9th", lines[-1])
    if not m:
        raise SystemExit(f"kafka-producer-perf-test: unexpected summary {lines[-1]!r}")
    return {"records_per_sec": float(m[1]), "mb_per_sec": float(m[2]),
            "latency_ms": {"p50": float(m[3]), "p99": float(m[4]), "p999": float(m[5])}}, cpu


def perf_consume(size, n, cli):
    """kafka-consumer-perf-test with gregor bench's fetch sizes. Its figures after the
    header: start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, rebalance.time.ms,
    fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec; the fetch ones leave out joining the group,
    which gregor bench consume (no group) does not do."""
    lines, cpu = run_java(["org.apache.kafka.tools.ConsumerPerformance", "--topic", "bt", "--num-records", n,
                           "--bootstrap-server", cli["bootstrap"], "--timeout", "60000",
                           "--command-property", "fetch.max.bytes=67108864", "max.partition.fetch.bytes=8388608",
                           *cli["args"]])
    f = [x.strip() for x in lines[-1].split(",")]
    return {"mb_per_sec": float(f[8]), "records_per_sec": float(f[9]), "with_join_mb_per_sec": float(f[3])}, cpu


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
    drivers = ["gregor"]
    if "--drivers" in rest:
        i = rest.index("--drivers")
        drivers = rest[i + 1].split(",")
        del rest[i:i + 2]
    if "kafka-tools" in drivers:
        kafka_tools()
    # The perf tools take the same client properties file as gregor's --command-config.
    jcli = {"bootstrap": "127.0.0.1:9092", "args": []}
    if cli:
        jcli = {"bootstrap": "127.0.0.1:9093", "args": cli[-2:]}
    if mode == "produce":
        size, n, parts, runs = rest
        for r, driver in ((r, d) for r in range(int(runs)) for d in drivers):
            bp = start_broker(B, srv)
            if driver == "kafka-tools":
                subprocess.run([B, "topic", "create", "bt", "--partitions", parts, "--replication-factor", "1"],
                               stdout=subprocess.DEVNULL, check=True)
            m0, b0 = machine_busy(), proc_cpu(bp.pid)
            t0 = time.time()
            th = None
            if prof:
                th = threading.Thread(target=lambda: (time.sleep(0.3), profile(prof[0], prof[1], f"{label}-{r}")))
                th.start()
            if driver == "kafka-tools":
                res, ccpu = perf_produce(size, n, jcli)
            else:
                res, ccpu = run_client([B, "bench", "produce", "--topic", "bt", "--partitions", parts, "--records", n,
                                        "--record-size", size, "--acks", "all", "--report-interval-ms", "0", "-o", "json", *cli])
            wall = time.time() - t0
            if th:
                th.join()
            m1, b1 = machine_busy(), proc_cpu(bp.pid)
            out = {"label": label, "driver": driver, "run": r, "rec_s": round(res["records_per_sec"]), "MB_s": round(res["mb_per_sec"], 1),
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
                if driver == "kafka-tools":
                    cres, cc = perf_consume(size, n, jcli)
                else:
                    cres, cc = run_client([B, "bench", "consume", "--topic", "bt", "--report-interval-ms", "0", "-o", "json", *cli])
                if th:
                    th.join()
                m1, b1 = machine_busy(), proc_cpu(bp.pid)
                out.update({"cons_MB_s": round(cres["mb_per_sec"], 1), "cons_rec_s": round(cres["records_per_sec"]),
                            "cons_broker_cpu": round(b1 - b0, 2), "cons_client_cpu": round(cc, 2),
                            "cons_broker_s_per_GiB": round((b1 - b0) / (int(n) * int(size) / 2**30), 2),
                            "cons_other_cpu": round((m1 - m0) - (b1 - b0) - cc, 2)})
                if "with_join_mb_per_sec" in cres:
                    out["cons_MB_s_with_join"] = round(cres["with_join_mb_per_sec"], 1)
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
