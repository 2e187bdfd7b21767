#!/bin/sh
# Packs what tournament/many_cores/run.sh needs into one folder that runs on a machine without
# packages: the bench binaries of a Release build, wrk, and every shared library they load,
# the dynamic loader included (the programs are started through it, so the target's own
# libc, if any, is not used). Optionally an older build's ops server and bench, for an A/B.
#
#   tournament/many_cores/make_bundle.sh BUILD BUNDLE [BEFORE_BUILD]
#     BUILD         a build folder with -DCMAKE_BUILD_TYPE=Release -DEVLOOP_BUILD_BENCH=ON
#     BUNDLE        the folder to write (replaced)
#     BEFORE_BUILD  another such build: its net_server_evloop_ops and evloop_bench go in
#                   as net_server_evloop_ops_before and evloop_bench_before
set -eu
build=$1
bundle=$2
before=${3:-}
command -v wrk >/dev/null ||
    { echo "make_bundle: wrk not found (apt-get install wrk)" >&2; exit 1; }
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for b in bench/evloop_bench tournament/net/net_server_evloop tournament/net/net_server_evloop_ops \
         tournament/net/net_server_libev tournament/net/net_server_libuv \
         tournament/net/net_server_evloop_offload tournament/net/net_server_libev_offload \
         tournament/net/net_server_libuv_offload tournament/net/net_server_libuv_queue_work; do
    [ -x "$build/$b" ] || { echo "make_bundle: $build/$b not built" >&2; exit 1; }
    cp "$build/$b" "$bundle/bin/"
done
cp "$(command -v wrk)" "$bundle/bin/"
if [ -n "$before" ]; then
    cp "$before/tournament/net/net_server_evloop_ops" "$bundle/bin/net_server_evloop_ops_before"
    cp "$before/bench/evloop_bench" "$bundle/bin/evloop_bench_before"
fi
for b in "$bundle"/bin/*; do
    ldd "$b" | awk '/=>/ { print $3 } /ld-linux/ { print $1 }'
done | sort -u | while read -r lib; do
    cp -L "$lib" "$bundle/lib/"
done
cp "$(dirname "$0")/run.sh" "$bundle/"
echo "make_bundle: $bundle ($(du -sh "$bundle" | cut -f1)); run it there as: OUT=DIR $bundle/run.sh"
