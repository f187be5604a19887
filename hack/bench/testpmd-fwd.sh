#!/usr/bin/env bash
# hack/bench/testpmd-fwd.sh - DPDK testpmd as a memif forwarder between two ports: two net_memif
# vdevs, --forward-mode=io with paired ports (every packet received on one port goes out on the
# other, both ways; what the other port cannot take is dropped), one forwarding lcore.
#
# Usage (root; dpdk-testpmd from Debian's dpdk-dev, hugepages):
#   hack/bench/testpmd-fwd.sh --socket1 NAME --socket2 NAME [--role server|client] [--id N]
#       [--core C] [--bsize N] [--rsize LOG2] [--zero-copy yes|no] [--mbufs N] [--log FILE]
#       [--burst-stats] [--record-core-cycles]
# Sockets are abstract (DPDK's default; pass the name without the @). Both ports get the same
# role and id. With role server it prints "testpmd-fwd: listening" once both ports are started
# (a DPDK server refuses clients with "ID not found" before that), and "testpmd-fwd: connected"
# once both links are up. It runs until SIGTERM or SIGINT, then stops testpmd (SIGINT: its clean
# shutdown; KILL after 10 s) and prints testpmd's status as the last line:
#   testpmd_status=N
# --burst-stats records testpmd's Rx burst sizes (--record-burst-stats: the share of empty
# polls, printed with the forwarding stats at exit; keep the log with --log to read them).
# --record-core-cycles has testpmd count its forwarding lcore's busy cycles (TSC cycles of the
# stream polls that received packets) and print "CPU cycles/packet" at stop; this script then
# prints, before its status line:
#   testpmd_cycles_per_pkt=X testpmd_tsc_mhz=N      (NA when testpmd printed none)
# testpmd divides by the ports' RX counters, which net_memif zeroes at a disconnect: stop it
# while its peers are still connected and sending, or the line is missing.
# Like hack/bench.sh it keeps nothing on disk: EAL --in-memory and a unique --file-prefix.
set -u

ROLE=server ID=0 CORE=1 BSIZE=2048 RSIZE=10 ZC=no MBUFS=16384 LOG="" S1="" S2="" BSTATS=0 CYCLES=0
while [ $# -gt 0 ]; do
  case "$1" in
    --socket1) S1=$2; shift 2;;
    --socket2) S2=$2; shift 2;;
    --role) ROLE=$2; shift 2;;
    --id) ID=$2; shift 2;;
    --core) CORE=$2; shift 2;;
    --bsize) BSIZE=$2; shift 2;;
    --rsize) RSIZE=$2; shift 2;;
    --zero-copy) ZC=$2; shift 2;;
    --mbufs) MBUFS=$2; shift 2;;
    --log) LOG=$2; shift 2;;
    --burst-stats) BSTATS=1; shift;;
    --record-core-cycles) CYCLES=1; shift;;
    *) echo "testpmd-fwd: unknown option $1" >&2; exit 2;;
  esac
done
[ -n "$S1" ] && [ -n "$S2" ] || { echo "testpmd-fwd: --socket1 and --socket2 are required" >&2; exit 2; }
case "$ROLE" in server|client) ;; *) echo "testpmd-fwd: --role server|client" >&2; exit 2;; esac
KEEP=1
if [ -z "$LOG" ]; then LOG=$(mktemp /tmp/testpmd-fwd.XXXXXX.log); KEEP=0; fi
PREFIX=testpmd-fwd-$$

vdev() {
  local v="net_memif$1,role=$ROLE,id=$ID,socket=$2,socket-abstract=yes,bsize=$BSIZE,rsize=$RSIZE"
  [ "$ZC" = yes ] && v="$v,zero-copy=yes"
  echo "$v"
}
EAL=(--lcores "(0,1)@$CORE" --file-prefix "$PREFIX" --no-pci --no-telemetry --in-memory
     --log-level pmd.net.memif:info
     --vdev "$(vdev 0 "$S1")" --vdev "$(vdev 1 "$S2")")
[ "$ZC" = yes ] && EAL+=(--single-file-segments)
# --no-flush-rx: a memif ring is empty at connect, and the flush would eat a fast peer's first
# packets (see internal/dpdkpeer).
PMD=(--forward-mode=io --port-topology=paired --auto-start --stats-period 1 --no-flush-rx
     --nb-cores=1 --rxq=1 --txq=1 --total-num-mbufs="$MBUFS")
[ "$BSTATS" = 1 ] && PMD+=(--record-burst-stats)
[ "$CYCLES" = 1 ] && PMD+=(--record-core-cycles)

listening() {  # both abstract SOCK_SEQPACKET listeners are bound
  awk -v a="@$S1" -v b="@$S2" '$4=="00010000" && $5=="0005" { if ($8==a) fa=1; if ($8==b) fb=1 } END{exit !(fa && fb)}' /proc/net/unix
}

echo "testpmd-fwd: taskset -c $CORE dpdk-testpmd ${EAL[*]} -- ${PMD[*]}" >&2
taskset -c "$CORE" dpdk-testpmd "${EAL[@]}" -- "${PMD[@]}" </dev/null >"$LOG" 2>&1 &
TPID=$!
STOP=0
trap 'STOP=1' INT TERM
said_listen=0 said_conn=0
while [ "$STOP" = 0 ] && kill -0 "$TPID" 2>/dev/null; do
  if [ "$said_listen" = 0 ] && [ "$ROLE" = server ] && grep -aq "Checking link statuses" "$LOG" && listening; then
    echo "testpmd-fwd: listening"; said_listen=1
  fi
  if [ "$said_conn" = 0 ] && [ "$(grep -ac 'memif_connect(): Connected' "$LOG")" -ge 2 ]; then
    echo "testpmd-fwd: connected"; said_conn=1
  fi
  if grep -aqE "Fail to start port|No probed ethernet devices" "$LOG"; then
    echo "testpmd-fwd: error: port start failed:" >&2; grep -aE -B3 "Fail to start port|No probed" "$LOG" >&2; break
  fi
  if [ "$said_conn" = 0 ]; then sleep 0.1; else sleep 1; fi
done
if kill -0 "$TPID" 2>/dev/null; then
  kill -INT "$TPID" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$TPID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$TPID" 2>/dev/null && kill -KILL "$TPID" 2>/dev/null
fi
wait "$TPID" 2>/dev/null; st=$?
if [ "$CYCLES" = 1 ]; then
  # "CPU cycles/packet=128.00 (total cycles=... / total io packets=...) at 2100 MHz Clock"
  sed -n 's/.*CPU cycles\/packet=\([0-9.]*\) .* at \([0-9]*\) MHz Clock.*/testpmd_cycles_per_pkt=\1 testpmd_tsc_mhz=\2/p' "$LOG" | tail -n 1 | grep . ||
    echo "testpmd_cycles_per_pkt=NA testpmd_tsc_mhz=NA"
fi
[ "$KEEP" = 0 ] && rm -f "$LOG"
rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null
echo "testpmd_status=$st"
