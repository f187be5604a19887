#!/usr/bin/env bash
# hack/bench.sh - side-by-side memif throughput and latency: our Go library (cmd/memif-perf)
# against DPDK 22.11 testpmd's net_memif PMD, on one machine, interleaved.
#
# Usage (root; needs dpdk-testpmd from the Debian package dpdk-dev, and hugepages):
#   hack/bench.sh                 # full run: REPS=5 rounds, 8 s per run (~25 min)
#   QUICK=1 hack/bench.sh         # REPS=3, 5 s per run (~11 min)
# Environment:
#   REPS=N      rounds (default 5, QUICK: 3). Every row is measured once per round; within a round
#               the rows of one case (DPDK->DPDK, Go->Go, Go->DPDK, DPDK->Go) run back to back
#               between two DPDK->DPDK reference runs, and odd rounds run everything in reverse
#               order. This VM switches between speed states (3x apart) from minute to minute, so
#               a round whose two references differ by more than 25 % is unsteady and left out
#               of that case's ratios; the others use the mean of the two references.
#   DUR=S       receiver seconds from link up (default 8, QUICK: 5). Mpps = mean of the receiver's
#               per-second samples without the first and last one (the same trimming for testpmd
#               and memif-perf); the sender is stopped once the receiver is done.
#   CASES="..." subset of: 64 1500 chain zc64 zc1500 verify fwd64 fwd1500 fwdzc64 fwdzc1500 lat
#               (default: all).
#               fwd64/fwd1500: a generator on one CPU, a forwarder alone on the other, Go
#               (memif-perf --mode fwd) against testpmd io forwarding between two net_memif ports,
#               and the generator alone (hack/bench/fwd.sh); fwdzc64/fwdzc1500: the same with
#               zero-copy client forwarders. lat: ping-pong round trips, and the machine's
#               cache-line ping-pong (hack/bench/clping) in the same rounds.
# Busy cycles per packet: every receiver and forwarder counts them as testpmd's
# --record-core-cycles does (testpmd with that flag, memif-perf always in rx and fwd) and is
# stopped while its sender still sends (testpmd's figure divides by net_memif counters that read
# 0 once the peer is gone). CSV columns cyc_pkt, idle_share (Go only), tsc_mhz; the report leads
# with Go vs testpmd per round (hack/bench/report-cycles.awk). docs/performance.md explains it.
#   DIRS="..."  c2s (sender = memif client, receiver = server) and/or s2c, for 64 and 1500
#               (default: both)
#   CHAIN_DIRS="...", ZC_DIRS="..."  the same for the chained case (default: c2s) and the zero-copy
#               cases (default: c2s s2c: a zero-copy client gains most when it receives)
#   LDUR=S      seconds per ping-pong latency run (default 5)
#   OUT=FILE    report file (default hack/results/bench-<date>.md; the raw CSV goes next to it)
#   PEER=FILE   DPDK peer command (default: hack/dpdk-memif-peer, built)
#   KEEP_LOGS=1 keep every process's output (the temp dir is printed)
# Cores: memif server on CPU 0, client on CPU 1 (taskset; DPDK via the peer's --core).
# Every process started here is stopped on exit or Ctrl-C (by PID), testpmd included.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then REPS=${REPS:-3}; DUR=${DUR:-5}; else REPS=${REPS:-5}; DUR=${DUR:-8}; fi
CASES=${CASES:-"64 1500 chain zc64 zc1500 verify fwd64 fwd1500 fwdzc64 fwdzc1500 lat"}
DIRS=${DIRS:-"c2s s2c"}
CHAIN_DIRS=${CHAIN_DIRS:-c2s}
ZC_DIRS=${ZC_DIRS:-"c2s s2c"}
LDUR=${LDUR:-5}
STAMP=$(date +%Y%m%d-%H%M)
OUT=${OUT:-$ROOT/hack/results/bench-$STAMP.md}
CSV=${OUT%.md}.csv
KEEP_LOGS=${KEEP_LOGS:-0}
SRV_CORE=0 CLI_CORE=1
MBUFS=16384          # per testpmd; pool size made no measurable difference, and it starts faster
CONNECT_TO=30

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (hugepages, testpmd)"
command -v dpdk-testpmd >/dev/null || die "dpdk-testpmd missing: apt-get install -y dpdk-dev"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs"

TMP=$(mktemp -d /tmp/memif-bench.XXXXXX)
SOCK=/run/memifnet-bench-$$.sock          # abstract (\0 + this name): nothing left on disk
PIDS=()

# stop_pid PID: TERM it (the DPDK peer then stops its testpmd cleanly), KILL after 15 s, and
# KILL its children too in case it died without reaping them.
stop_pid() {
  local p=$1 kids i
  kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
  kids=$(pgrep -P "$p" || true)
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    kill -KILL "$p" 2>/dev/null || true
    for i in $kids; do kill -KILL "$i" 2>/dev/null || true; done
  fi
  wait "$p" 2>/dev/null || true
}
cleanup() {
  local p
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  PIDS=()
  if [ "$KEEP_LOGS" = 1 ]; then echo "bench: logs kept in $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; cleanup; exit 130' INT TERM

forget() {  # forget PID: drop it from PIDS once it is reaped
  local p keep=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

listener_up() {  # a SOCK_SEQPACKET listener bound to the abstract name @$SOCK
  awk -v p="@$SOCK" '$4=="00010000" && $5=="0005" && $8==p {f=1} END{exit !f}' /proc/net/unix
}

echo "bench: building memif-perf and dpdk-memif-peer" >&2
(cd "$ROOT" && go build -o "$TMP/memif-perf" ./cmd/memif-perf && go build -o "$TMP/clping" ./hack/bench/clping)
if [ -z "${PEER:-}" ]; then
  (cd "$ROOT" && go build -o "$TMP/dpdk-memif-peer" ./hack/dpdk-memif-peer)
  PEER=$TMP/dpdk-memif-peer
fi
[ -x "$PEER" ] || die "DPDK peer $PEER is not executable"
# what was built (others may commit while the run goes on): the commit, and a hash of any
# uncommitted change under pkg/ and cmd/
BUILT="$(cd "$ROOT" && git rev-parse --short HEAD)"
if ! (cd "$ROOT" && git diff --quiet HEAD -- pkg cmd); then
  BUILT="$BUILT + uncommitted pkg/cmd changes (diff sha256 $(cd "$ROOT" && git diff HEAD -- pkg cmd | sha256sum | cut -c1-12))"
fi
MP=$TMP/memif-perf

# start_side IMPL(D|G) ROLE(server|client) WHAT(tx|rx|ping|echo) DURATION PKT BSIZE ZC(yes|no) VERIFY(0|1) TAG [GO-FLAG...]
# Starts one side in the background; sets STARTED to its PID, output in $TMP/TAG.{out,err}. The
# GO-FLAGs go to memif-perf (the latency rows' echo: --record-cycles=false, as its testpmd
# counterpart runs without --record-core-cycles).
start_side() {
  local impl=$1 role=$2 what=$3 dur=$4 pkt=$5 bs=$6 zc=$7 ver=$8 tag=$9 core mode
  shift 9
  core=$CLI_CORE; [ "$role" = server ] && core=$SRV_CORE
  if [ "$impl" = D ]; then
    case $what in tx) mode=txonly;; rx) mode=rxonly;; echo) mode=io;; *) die "DPDK cannot $what";; esac
    local extra=()
    [ "$zc" = yes ] && [ "$role" = client ] && extra=(--zero-copy yes)
    # A receiver counts its busy cycles (testpmd --record-core-cycles; memif-perf always does in
    # rx mode), printed at stop into its log, kept for rx_cycles. The peer stops it after DUR s,
    # while the sender (DUR+20 s) still sends: net_memif's counters, which testpmd divides by,
    # read 0 once the peer has gone.
    if [ "$what" = rx ]; then
      mkdir -p "$TMP/$tag.logs"
      extra+=(--testpmd=--record-core-cycles --log-dir "$TMP/$tag.logs")
    fi
    "$PEER" --role "$role" --socket "$SOCK" --abstract yes --id 0 --mode "$mode" --pkt-size "$pkt" \
      --bsize "$bs" --rsize 10 --core "$core" --duration "$dur" --mbufs "$MBUFS" \
      --connect-timeout "$CONNECT_TO" --wait-socket 15 "${extra[@]}" \
      >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  else
    local varg=("$@")
    [ "$ver" = 1 ] && varg+=(--verify)
    [ "$zc" = yes ] && [ "$role" = client ] && varg+=(--zero-copy)
    taskset -c "$core" "$MP" --role "$role" --socket "@$SOCK" --id 0 --mode "$what" --size "$pkt" \
      --buffer-size "$bs" --ring-size 1024 --burst 32 --duration "${dur}s" \
      --connect-timeout "${CONNECT_TO}s" "${varg[@]}" \
      >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  fi
  STARTED=$!
  PIDS+=("$STARTED")
}

# wait_listening IMPL PID TAG: until the server accepts clients (a DPDK server refuses clients
# with "ID not found" until its port has started, and a DPDK client never retries).
wait_listening() {
  local impl=$1 pid=$2 tag=$3 i
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || return 1
    if [ "$impl" = D ]; then grep -q "memif-peer: listening" "$TMP/$tag.out" && return 0
    else listener_up && return 0; fi
    sleep 0.1
  done
  return 1
}

# go_rate FILE: memif-perf's per-second "rx X Mpps" samples, trimmed like the DPDK peer does
# testpmd's Rx-pps (active window, first and last second dropped), averaged.
go_rate() {
  awk '{ if (match($0, /\] rx +[0-9.]+ Mpps/)) { s = substr($0, RSTART, RLENGTH); gsub(/[^0-9.]/, "", s); v[n++] = s + 0 } }
    END { f = -1; l = -1
      for (i = 0; i < n; i++) if (v[i] > 0) { if (f < 0) f = i; l = i }
      if (f >= 0 && l - f + 1 >= 3) { f++; l-- }
      k = 0; s = 0; if (f >= 0) for (i = f; i <= l; i++) { s += v[i]; k++ }
      if (k) printf "%.3f\n", s / k; else print "NA" }' "$1"
}
dpdk_rate() {
  local v
  v=$(tail -n 1 "$1" | sed -n 's/^rx_mpps=\([0-9.]*\) .*/\1/p')
  if [ -z "$v" ] || [ "$v" = 0.000 ]; then echo NA; else echo "$v"; fi
}

load1() { cut -d' ' -f1 /proc/loadavg; }

# summary_field FILE KEY: KEY=value from the last line of a memif-perf summary (NA if absent).
summary_field() {
  local v
  v=$(tail -n 1 "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p")
  echo "${v:-NA}"
}

# rx_cycles IMPL TAG: the receiver's "cycles idle_share tsc_mhz": busy TSC cycles per received
# packet (memif-perf's summary; testpmd's "CPU cycles/packet" line in the kept log), the share of
# its loop's cycles in polls that moved nothing (memif-perf only: DPDK 22.11 does not count it),
# and the TSC's rate. docs/performance.md, "Busy cycles per packet".
rx_cycles() {
  local c m
  if [ "$1" = D ]; then
    c=$(cat "$TMP/$2".logs/*.log 2>/dev/null | sed -n 's/.*CPU cycles\/packet=\([0-9.]*\) .* at \([0-9]*\) MHz Clock.*/\1 \2/p' | tail -n 1)
    m=${c#* }; c=${c% *}
    echo "${c:-NA} NA ${m:-NA}"
  else
    echo "$(summary_field "$TMP/$2.out" busy_cycles_per_pkt) $(summary_field "$TMP/$2.out" idle_share) $(summary_field "$TMP/$2.out" tsc_mhz)"
  fi
}

# side_ticks PID IMPL: CPU time (utime+stime, clock ticks) of the process doing one side's work:
# memif-perf itself, or the testpmd child of the DPDK peer.
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
side_ticks() {
  local k t=0
  if [ "$2" = D ]; then
    for k in $(pgrep -P "$1" || true); do t=$((t + $(proc_ticks "$k"))); done
  else t=$(proc_ticks "$1"); fi
  echo "$t"
}
HZ=$(getconf CLK_TCK)

# run_tput ROUND CASE DIR PAIR: one throughput run; appends a CSV line.
run_tput() {
  local round=$1 c=$2 dir=$3 pair=$4 pkt bs=2048 zc=no ver=0 simpl rimpl srole rrole
  local sv cl svwhat clwhat sdur cdur tag ld v st="ok" spid cpid rpid opid i
  local ta="" tb="" r0=0 s0=0 r1=0 s1=0 rcpu=NA scpu=NA cyc=NA idle=NA mhz=NA
  case $c in
    64|zc64) pkt=64;; 1500|zc1500) pkt=1500;; chain) pkt=512; bs=128;; *) die "case $c";;
  esac
  case $c in zc*) zc=yes;; esac
  case $pair in
    DD|DDe|DDzc|DDzce) simpl=D; rimpl=D;; GG|GGzc) simpl=G; rimpl=G;; GGv) simpl=G; rimpl=G; ver=1;;
    GGc) simpl=G; rimpl=G; zc=no;;
    GD|GDzc) simpl=G; rimpl=D;; DG|DGzc) simpl=D; rimpl=G;; *) die "pair $pair";;
  esac
  if [ "$dir" = c2s ]; then srole=client; rrole=server; else srole=server; rrole=client; fi
  # server first, then client; the receiver runs DUR s, the sender until we stop it
  if [ "$srole" = server ]; then sv=$simpl; cl=$rimpl; svwhat=tx; clwhat=rx; sdur=$((DUR + 20)); cdur=$DUR
  else sv=$rimpl; cl=$simpl; svwhat=rx; clwhat=tx; sdur=$DUR; cdur=$((DUR + 20)); fi
  tag="r$round-$c-$dir-$pair"
  ld=$(load1)
  start_side "$sv" server "$svwhat" "$sdur" "$pkt" "$bs" "$zc" "$ver" "$tag.srv"; spid=$STARTED
  if wait_listening "$sv" "$spid" "$tag.srv"; then
    start_side "$cl" client "$clwhat" "$cdur" "$pkt" "$bs" "$zc" "$ver" "$tag.cli"; cpid=$STARTED
    if [ "$rrole" = server ]; then rpid=$spid; opid=$cpid; else rpid=$cpid; opid=$spid; fi
    # CPU share of each side while traffic flows: from 2 s after the client started until 1 s
    # before the receiver's end (an outside load steals it: the table shows how much was left)
    local t_start=${EPOCHREALTIME/./} now
    for i in $(seq 1 $(((DUR + CONNECT_TO + 30) * 10))); do
      kill -0 "$rpid" 2>/dev/null || break
      now=${EPOCHREALTIME/./}
      if [ -z "$ta" ] && [ "$DUR" -ge 4 ] && [ $((now - t_start)) -ge 2000000 ]; then
        ta=$EPOCHREALTIME; r0=$(side_ticks "$rpid" "$rimpl"); s0=$(side_ticks "$opid" "$simpl")
      elif [ -n "$ta" ] && [ -z "$tb" ] && [ $((now - t_start)) -ge $(((DUR - 1) * 1000000)) ]; then
        tb=$EPOCHREALTIME; r1=$(side_ticks "$rpid" "$rimpl"); s1=$(side_ticks "$opid" "$simpl")
        rcpu=$(awk -v a="$ta" -v b="$tb" -v t="$((r1 - r0))" -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz / (b - a)}')
        scpu=$(awk -v a="$ta" -v b="$tb" -v t="$((s1 - s0))" -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz / (b - a)}')
      fi
      sleep 0.1
    done
    stop_pid "$rpid"; forget "$rpid"
    stop_pid "$opid"; forget "$opid"
  else
    st="server-not-listening"; stop_pid "$spid"; forget "$spid"
  fi
  local rtag=$tag.srv; [ "$rrole" = client ] && rtag=$tag.cli
  if [ "$st" = ok ]; then
    if [ "$rimpl" = D ]; then v=$(dpdk_rate "$TMP/$rtag.out"); else v=$(go_rate "$TMP/$rtag.err"); fi
    [ "$v" = NA ] && st="no-samples"
    if [ "$ver" = 1 ] && ! grep -q ' verify_errors=0' "$TMP/$rtag.out"; then st="verify-errors"; v=NA; fi
    read -r cyc idle mhz < <(rx_cycles "$rimpl" "$rtag")
  else v=NA; fi
  printf 'tput,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,NA,%s,%s,%s\n' "$round" "$c" "$dir" "$pair" "$pkt" "$v" "$ld" "$st" "$rcpu" "$scpu" "$cyc" "$idle" "$mhz" >>"$CSV"
  printf 'bench: round %s %-6s %s %-4s %8s Mpps  (load1 %s, cpu rx %s tx %s, rx busy cycles/pkt %s) %s\n' "$round" "$c" "$dir" "$pair" "$v" "$ld" "$rcpu" "$scpu" "$cyc" "$st" >&2
  if [ "$st" != ok ]; then
    echo "bench:   --- $tag failed; last lines of each side:" >&2
    tail -n 5 "$TMP/$tag".*.out "$TMP/$tag".*.err 2>/dev/null | sed 's/^/bench:   /' >&2 || true
  fi
}

# run_lat ROUND PAIR: memif-perf ping (client, core 1) against an echoing server on core 0:
# GG = memif-perf --mode echo, GD = testpmd io.
run_lat() {
  local round=$1 pair=$2 sv=G tag ld spid cpid line st=ok q v i
  [ "$pair" = GD ] && sv=D
  tag="r$round-lat-$pair"; ld=$(load1)
  start_side "$sv" server echo $((LDUR + 20)) 64 2048 no 0 "$tag.srv" --record-cycles=false; spid=$STARTED
  line=""
  if wait_listening "$sv" "$spid" "$tag.srv"; then
    start_side G client ping "$LDUR" 64 2048 no 0 "$tag.cli"; cpid=$STARTED
    for i in $(seq 1 $(((LDUR + CONNECT_TO + 30) * 10))); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
    stop_pid "$cpid"; forget "$cpid"
    line=$(tail -n 1 "$TMP/$tag.cli.out")
  else st="server-not-listening"; fi
  stop_pid "$spid"; forget "$spid"
  case $line in *rtt_p50_us=*) ;; *) st=${st/ok/no-result};; esac
  for q in p50 p99 p999; do
    v=NA
    [ "$st" = ok ] && v=$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^rtt_${q}_us=//p")
    printf '%s,%s,lat,c2s,%s,64,%s,%s,%s,NA,NA,NA,NA,NA,NA\n' "$q" "$round" "$pair" "${v:-NA}" "$ld" "$st" >>"$CSV"
  done
  printf 'bench: round %s lat %s  %s (load1 %s) %s\n' "$round" "$pair" "${line#*rtt_}" "$ld" "$st" >&2
}

has() { case " $CASES " in *" $1 "*) return 0;; esac; return 1; }

# shellcheck source=bench/fwd.sh
. "$ROOT/hack/bench/fwd.sh"

# The work list of one round: one "kind case dir pair" per line, each case's rows together.
plan() {
  local c d
  for c in 64 1500 chain; do
    has "$c" || continue
    local dirs=$DIRS
    [ "$c" = chain ] && dirs=$CHAIN_DIRS
    for d in $dirs; do
      echo "tput $c $d DD"; echo "tput $c $d GG"; echo "tput $c $d GD"; echo "tput $c $d DG"
      if [ "$c" = 64 ] && [ "$d" = c2s ] && has verify; then echo "tput 64 c2s GGv"; fi
      echo "tput $c $d DDe"  # the reference again: a round whose two references disagree is unsteady
    done
  done
  for c in zc64 zc1500; do
    has "$c" || continue
    for d in $ZC_DIRS; do
      # GGc: Go copy mode next to Go zero-copy, for the zero-copy gain within one block
      echo "tput $c $d DDzc"; echo "tput $c $d GGc"; echo "tput $c $d GGzc"
      # with DPDK on the server side, the Go client is the zero-copy one
      if [ "$d" = c2s ]; then echo "tput $c $d GDzc"; else echo "tput $c $d DGzc"; fi
      echo "tput $c $d DDzce"
    done
  done
  plan_fwd
  if has lat; then echo "lat - - GG"; echo "lat - - GD"; echo "lat - - CL"; fi
}

mkdir -p "$(dirname "$OUT")"
echo "kind,round,case,dir,pair,pkt,value,load1,status,rx_cpu,tx_cpu,gen_txfull,cyc_pkt,idle_share,tsc_mhz" >"$CSV"
CMD="REPS=$REPS DUR=$DUR LDUR=$LDUR QUICK=$QUICK CASES=\"$CASES\" DIRS=\"$DIRS\" CHAIN_DIRS=\"$CHAIN_DIRS\" ZC_DIRS=\"$ZC_DIRS\" hack/bench.sh"
LOAD_BEFORE=$(cat /proc/loadavg)
T0=$(date +%s)
mapfile -t WORK < <(plan)
echo "bench: ${#WORK[@]} runs per round x $REPS rounds, ${DUR}s each; results -> $OUT" >&2
for round in $(seq 1 "$REPS"); do
  if [ $((round % 2)) = 0 ]; then
    mapfile -t ORDER < <(printf '%s\n' "${WORK[@]}" | tac)
  else ORDER=("${WORK[@]}"); fi
  for w in "${ORDER[@]}"; do
    read -r kind c d p <<<"$w"
    case $kind-$p in
      tput-*) run_tput "$round" "$c" "$d" "$p";;
      fwd-*) run_fwd "$round" "$c" "$p";;
      lat-CL) run_clping "$round";;
      *) run_lat "$round" "$p";;
    esac
  done
done
LOAD_AFTER=$(cat /proc/loadavg)
T1=$(date +%s)

{
  echo "# memif throughput: Go (cmd/memif-perf) vs DPDK $(dpkg-query -W -f='${Version}' dpdk-dev 2>/dev/null || echo '?') testpmd net_memif"
  echo
  echo "- Date: $(date -u -d "@$T0" '+%Y-%m-%d %H:%M') UTC, $(( (T1 - T0) / 60 )) min; host $(uname -n), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), kernel $(uname -r), $(go version | cut -d' ' -f3)"
  echo "- Built from: $BUILT (at the start of the run)"
  echo "- Command: \`$CMD\` (from the repo root, as root)"
  echo "- Load average before: $LOAD_BEFORE; after: $LOAD_AFTER; per-run load1 in the CSV: $(awk -F, 'NR>1 && $8!="" {v=$8+0; if (!n||v<mn) mn=v; if (!n||v>mx) mx=v; n++} END{printf "%.2f-%.2f", mn, mx}' "$CSV")"
  echo "- $REPS interleaved rounds; each run ${DUR} s from link up; Mpps = receiver's per-second samples, first and last dropped, averaged; medians over rounds. Ratios: each Go run divided by the DPDK->DPDK run of the same case and direction in the same round, median over rounds."
  echo "- Pinning: memif server on CPU $SRV_CORE, client on CPU $CLI_CORE. c2s = client sends, server receives; s2c = server sends, client receives. Ring 1024, burst 32, buffer 2048 B (chained case: 128 B on both sides). Go: --size N [--verify]; DPDK: dpdk-memif-peer --mode txonly|rxonly --pkt-size N --mbufs $MBUFS. Zero-copy: the client is zero-copy (DPDK --zero-copy yes, Go --zero-copy: header-only TxBurstZC of pool buffers / RxBurstZC views), the server copies."
  echo "- Raw per-run values: $(basename "$CSV")"
  echo
  awk -f "$ROOT/hack/bench/report-cycles.awk" "$CSV"
  awk -f "$ROOT/hack/bench/report.awk" "$CSV"
  awk -f "$ROOT/hack/bench/report-fwd.awk" "$CSV"
} >"$OUT"
cat "$OUT"
echo
echo "bench: wrote $OUT and $CSV"
echo "bench: reproduce with: $CMD"
