#!/usr/bin/env bash
# hack/bench/callgrind-burst.sh - instructions per packet of TxBurst/RxBurst, load-independent:
# runs pkg/memif's BenchmarkBurst (in-process pair, one goroutine) under callgrind, for the tree as
# it is ("base") and with hack/bench/burst-fastpath-experiment.patch applied ("exp"), and prints
# the inclusive Ir per packet of txOwn/txPeer/consume/refill. Needs valgrind; ~5 min.
# Go needs GODEBUG=cpu.rdtscp=off (valgrind 3.19 lacks RDTSCP) and asyncpreemptoff=1 (callgrind
# asserts on Go's preemption signals).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=$(mktemp -d /tmp/memif-cg.XXXXXX)
trap 'rm -rf "$W"' EXIT
OPS=20000 BURST=32
for v in base exp; do
  mkdir -p "$W/$v"
  (cd "$ROOT" && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$W/$v")
  cp "$ROOT/pkg/memif/burst.go" "$W/$v/pkg/memif/burst.go"   # the working tree's version
  if [ "$v" = exp ]; then (cd "$W/$v" && patch -s -p1 <"$ROOT/hack/bench/burst-fastpath-experiment.patch"); fi
  (cd "$W/$v" && go test -c -o "$W/$v.test" ./pkg/memif)
done
export GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1
for sub in client-to-server/size=64 server-to-client/size=64 client-to-server/size=1500; do
  for v in base exp; do
    out=$W/$v.cg
    for _ in 1 2 3; do  # the pair's handshake can time out under valgrind on a loaded box: retry
      valgrind --tool=callgrind --callgrind-out-file="$out" "$W/$v.test" -test.run '^$' \
        -test.bench "^BenchmarkBurst\$/^$sub/burst=$BURST\$" -test.benchtime "${OPS}x" >"$W/$v.log" 2>&1 || true
      grep -q "ns/pkt" "$W/$v.log" && break
    done
    echo "== $v $sub/burst=$BURST ($((OPS * BURST)) packets)"
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
      grep -E 'memif\.\(\*(TxQueue|RxQueue)\)\.(txOwn|txPeer|consume|refill) \[' |
      awk -v n=$((OPS * BURST)) '{gsub(/,/, "", $1); f=$0; sub(/.*memif\./, "", f); sub(/ \[.*/, "", f); printf "   %-22s %7.1f Ir/pkt\n", f, $1 / n}'
  done
done
