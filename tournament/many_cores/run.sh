#!/bin/bash
# The many-core figures, from a bundle made by make_bundle.sh (run from anywhere; writes
# $OUT/all.txt): the network family's HTTP servers at 1000 connections under wrk (the
# server pinned to CPU 1, wrk with 8 threads on CPUs 4-11; the ops server on io_uring before
# and after, when the bundle has the older one), three interleaved rounds, then the hand-off
# families of the bench (MultiProducer, MultiProducerContention, PingPong, BurstSubmit,
# ReadinessRoundTrip) for every system, 3 repetitions; with an older bench in the bundle, it
# and this one alternate, ROUNDS times each. Knobs: ROUNDS (3), DUR (s per wrk run, 3),
# CLI_CPUS (4-11), BENCH (1: run the bench families), NET (1: run the network family),
# FILTER (the bench families' regex). After the HTTP servers, when the bundle has them, the
# offload family (tournament/net/worker_pool.c: each request's work on worker threads, the reply
# posted back to the loop thread) at 1000 and OFF_CONNS connections, ROUNDS rounds: loop
# thread on CPU 1, workers on OFF_CPUS. Its knobs: OFFLOAD (1: run it), OFF_WORKERS (2),
# OFF_WORK_US (2), OFF_CPUS (2-3), OFF_CONNS (200).
set -u
K=$(cd "$(dirname "$0")" && pwd)
L=$K/lib
run() { "$L/ld-linux-x86-64.so.2" --library-path "$L" "$@"; }
exec >"$OUT/all.txt" 2>&1
ulimit -n 100000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "== machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo)"
echo "== fd limit $(ulimit -n), load $(cat /proc/loadavg)"
port=9100
net() { # label binary args...
    local label=$1 bin=$2
    shift 2
    port=$((port + 1))
    taskset -c 1 "$L/ld-linux-x86-64.so.2" --library-path "$L" "$K/bin/$bin" --port $port "$@" \
        >/dev/null 2>&1 &
    local pid=$!
    sleep 0.4
    echo "== net $label round $r"
    taskset -c "${CLI_CPUS:-4-11}" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$K/bin/wrk" \
        -t8 -c1000 -d"${DUR:-3}"s --timeout 2s --latency "http://127.0.0.1:$port/" 2>&1 |
        grep -E "Requests/sec|Socket errors|Non-2xx|  99%|  50%|requests in"
    kill $pid
    wait $pid 2>/dev/null
}
for r in $(seq 1 "${ROUNDS:-3}"); do
    [ "${NET:-1}" = 1 ] || break
    [ -x "$K/bin/net_server_evloop_ops_before" ] &&
        net ops-before/io_uring net_server_evloop_ops_before --backend io_uring
    net ops/io_uring net_server_evloop_ops --backend io_uring
    net ops/epoll net_server_evloop_ops --backend epoll
    net readiness/epoll net_server_evloop --backend epoll
    net readiness/io_uring net_server_evloop --backend io_uring
    net libev net_server_libev
    net libuv net_server_libuv
done
# offload label binary conns args...: the server places its own threads (loop on CPU 1,
# workers on OFF_CPUS), so no taskset around it.
offload() {
    local label=$1 bin=$2 conns=$3
    shift 3
    [ -x "$K/bin/$bin" ] || return 0
    port=$((port + 1))
    "$L/ld-linux-x86-64.so.2" --library-path "$L" "$K/bin/$bin" --port $port \
        --workers "${OFF_WORKERS:-2}" --work-us "${OFF_WORK_US:-2}" --loop-cpu 1 \
        --worker-cpus "${OFF_CPUS:-2-3}" "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep 0.4
    echo "== offload $label c=$conns round $r"
    taskset -c "${CLI_CPUS:-4-11}" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$K/bin/wrk" \
        -t8 -c"$conns" -d"${DUR:-3}"s --timeout 2s --latency "http://127.0.0.1:$port/" 2>&1 |
        grep -E "Requests/sec|Socket errors|Non-2xx|  99%|  50%|requests in"
    kill $pid
    wait $pid
    echo "server exit $?"
}
for r in $(seq 1 "${ROUNDS:-3}"); do
    [ "${OFFLOAD:-1}" = 1 ] || break
    for conns in 1000 ${OFF_CONNS:-200}; do
        offload evloop/epoll net_server_evloop_offload "$conns" --backend epoll
        offload evloop/io_uring net_server_evloop_offload "$conns" --backend io_uring
        offload libev net_server_libev_offload "$conns"
        offload libuv net_server_libuv_offload "$conns"
        offload libuv-queue-work net_server_libuv_queue_work "$conns"
    done
done
[ "${BENCH:-1}" = 1 ] || exit 0
filter=${FILTER:-'^(MultiProducer|MultiProducerContention|PingPong|BurstSubmit|ReadinessRoundTrip)/'}
bench() { # binary
    timeout 300 "$L/ld-linux-x86-64.so.2" --library-path "$L" "$K/bin/$1" \
        --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_min_time=0.2 \
        --benchmark_report_aggregates_only=true
}
if [ -x "$K/bin/evloop_bench_before" ]; then
    for r in $(seq 1 "${ROUNDS:-3}"); do
        echo "== bench before round $r"
        bench evloop_bench_before
        echo "== bench after round $r"
        bench evloop_bench
    done
else
    echo "== bench"
    bench evloop_bench
fi
echo "== end, load $(cat /proc/loadavg)"
