#!/usr/bin/env bash
# Replication throughput and latency on this machine, in one run:
#   1. one broker, RF 1:                     gregor bench produce, acks=all, as fast as it goes
#   2. three broker+controller nodes, RF 3:  the same
#   3. the three nodes, RF 3, at half of (2)'s records/s: latency p50/p99/p99.9
# repeated ROUNDS times, alternating, each round on fresh topics. Prints one line per run and
# the RF 3 / RF 1 ratio of each round, plus the brokers' CPU seconds (utime+stime from /proc).
#
#   scripts/bench-cluster.sh [ROUNDS] [RECORDS] [RECORD_SIZE] [PARTITIONS]
#   (defaults: 3 rounds, 2,000,000 records of 100 bytes, 6 partitions)
#
# Env: BASE_PORT (default 39092; the cluster uses BASE_PORT..+2, +100.., +200..; the single
# broker BASE_PORT+300), KEEP=1 keeps the data dir, PPROF=1 serves pprof on node 1 at
# 127.0.0.1:$((BASE_PORT+400)) and takes a 10 s CPU profile of node 1 during the first RF 3 run.
# The failover and scale figures come from go test ./test/bench (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
records=${2:-2000000}
size=${3:-100}
parts=${4:-6}
base=${BASE_PORT:-39092}
work=$(mktemp -d /tmp/bench-cluster.XXXXXX)
bin="$work/gregor"
go build -o "$bin" ./cmd/gregor

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-}" = "" ]; then rm -rf "$work"; else echo "data kept in $work"; fi
}
trap cleanup EXIT

# wait_log FILE: until the node logs that it serves clients.
wait_log() {
  for _ in $(seq 600); do
    grep -q 'msg="gregor started"' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no start in $1" >&2
  tail -20 "$1" >&2
  return 1
}

# cpu PID...: the processes' user+system CPU seconds so far.
cpu() {
  local t=0
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", $1 / hz}'
}

# The single broker (RF 1): the default single-node server.
single_port=$((base + 300))
"$bin" server --set log.dirs="$work/single" --set listeners=PLAINTEXT://127.0.0.1:$single_port --set http.listener=127.0.0.1:0 >"$work/single.log" 2>&1 &
single_pid=$!
pids+=("$single_pid")
wait_log "$work/single.log"

# The three nodes (RF 3), from gregor dev cluster-config's files, started here so their
# pids are known.
"$bin" dev cluster-config 3 --dir "$work/cluster" --base-port "$base" >/dev/null
cluster_pids=()
for i in 1 2 3; do
  extra=()
  if [ "${PPROF:-}" != "" ] && [ "$i" = 1 ]; then extra=(--pprof-addr "127.0.0.1:$((base + 400))"); fi
  "$bin" server --config "$work/cluster/node-$i.properties" "${extra[@]}" >"$work/cluster/node-$i.log" 2>&1 &
  pids+=("$!")
  cluster_pids+=("$!")
done
for i in 1 2 3; do wait_log "$work/cluster/node-$i.log"; done
cluster_bs="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"

# run NAME BOOTSTRAP RF TOPIC THROUGHPUT PIDS...: one bench produce; prints its line and
# leaves its records/s in $rate.
run() {
  local name=$1 bs=$2 rf=$3 topic=$4 tput=$5
  shift 5
  local c0 c1 out
  c0=$(cpu "$@")
  out=$("$bin" bench produce -b "$bs" -o json --report-interval-ms 0 --topic "$topic" \
    --partitions "$parts" --replication-factor "$rf" --records "$records" --record-size "$size" \
    --acks all --throughput "$tput")
  c1=$(cpu "$@")
  rate=$(echo "$out" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["records_per_sec"]))')
  echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
l = r["latency_ms"]
name, cpu, n = sys.argv[1], float(sys.argv[2]), r["records"]
rps, mbs, p50, p99, p999 = r["records_per_sec"], r["mb_per_sec"], l["p50"], l["p99"], l["p999"]
print(f"{name:32s} {rps:>10,.0f} rec/s {mbs:7.1f} MB/s  "
      f"latency p50 {p50:.1f} p99 {p99:.1f} p99.9 {p999:.1f} ms  "
      f"broker CPU {cpu:.2f} s ({cpu * 1e9 / n:.0f} ns/record)")
' "$name" "$(echo "$c1 - $c0" | bc)"
}

echo "machine: $(nproc) cores; $records records of $size B, $parts partitions, acks=all, one franz-go producer"
for r in $(seq "$rounds"); do
  run "round $r: 1 broker, RF 1" "127.0.0.1:$single_port" 1 "rf1-$r" -1 "$single_pid"
  rf1=$rate
  if [ "${PPROF:-}" != "" ] && [ "$r" = 1 ]; then
    (sleep 1; go tool pprof -top -nodecount 30 "$bin" "http://127.0.0.1:$((base + 400))/debug/pprof/profile?seconds=10" >"$work/rf3-node1.prof.txt" 2>&1) &
    prof_pid=$!
  fi
  run "round $r: 3 brokers, RF 3" "$cluster_bs" 3 "rf3-$r" -1 "${cluster_pids[@]}"
  rf3=$rate
  half=$((rf3 / 2))
  run "round $r: 3 brokers, RF 3 @ $half/s" "$cluster_bs" 3 "rf3h-$r" "$half" "${cluster_pids[@]}"
  echo "round $r: RF 3 / RF 1 = $(echo "scale=2; 100 * $rf3 / $rf1" | bc)%"
done
if [ "${prof_pid:-}" != "" ]; then
  wait "$prof_pid"
  echo "--- CPU profile of node 1 during the first RF 3 run:"
  head -40 "$work/rf3-node1.prof.txt"
fi
