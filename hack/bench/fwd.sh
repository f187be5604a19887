# hack/bench/fwd.sh - the forwarding case of hack/bench.sh (sourced by it; uses its helpers,
# $MP, $TMP, $SOCK, $DUR, $CSV and the core numbers).
#
# A network function's data path: a generator on one CPU, the forwarder alone on the other.
#   generator (CPU $SRV_CORE): memif-perf --mode txrx with two ports, both memif clients with
#       --zero-copy: header-only frames built in its pool and sent without a copy, received as
#       views and released (the cheapest generator memif-perf has), --window -1 (no bound: like
#       txonly, it sends whenever its ring has room); Mpps = what comes back on its second port.
#   forwarder (CPU $CLI_CORE), both ports memif servers (they copy, as every memif server does):
#     FG   memif-perf --mode fwd: RxQueue.ForwardDrop, one copy per packet (ring buffer to ring
#          buffer), what the other side cannot take dropped;
#     FD   testpmd --forward-mode=io --port-topology=paired over two net_memif vdevs
#          (hack/bench/testpmd-fwd.sh): rte_eth_rx_burst copies into mbufs, rte_eth_tx_burst
#          copies out of them (two copies), unsent mbufs freed (dropped); run before and after FG
#          (FDe), like the DPDK->DPDK references of the other cases;
#     F0   no forwarder: the generator's first port (client) connected to its own second port
#          (server) - the generator's own ceiling on this machine, which caps any ratio above.
#   zero-copy forwarders (cases fwdzc64, fwdzc1500): the forwarder's ports are zero-copy clients,
#   the generator's two ports servers (memif-perf txrx copying frames in and out, header only
#   without --verify), started first (a DPDK client dials once and never again):
#     FGzc memif-perf --mode fwd --zero-copy --peers-trust-each-other: two clients of one buffer
#          pool, no copy at all (both peers are the generator: one party, as testpmd's one mempool);
#     FDzc testpmd io between two net_memif zero-copy clients (descriptors point into its mbufs:
#          no copy in testpmd), and FDzce after FGzc.
# Rows of one size run back to back: FD F0 FG FDe, or FDzc FGzc FDzce (reversed in odd rounds by
# bench.sh).
# Every forwarder counts its busy cycles per packet (testpmd --record-core-cycles, memif-perf's
# summary) and is stopped while the generator still sends: net_memif's counters, which testpmd
# divides by, read 0 once its peers are gone.

FWD_SOCKA=$SOCK-fwd-a FWD_SOCKB=$SOCK-fwd-b

fwd_listening() {  # both abstract listeners of the forwarder are bound
  awk -v a="@$FWD_SOCKA" -v b="@$FWD_SOCKB" '$4=="00010000" && $5=="0005" { if ($8==a) fa=1; if ($8==b) fb=1 } END{exit !(fa && fb)}' /proc/net/unix
}

# start_fwd IMPL(FG|FD|FGzc|FDzc) PKT TAG: the forwarder on CLI_CORE. As servers (FG, FD) it
# waits until both ports accept clients; as zero-copy clients it returns at once (the generator
# listens already). Sets STARTED.
start_fwd() {
  local impl=$1 pkt=$2 tag=$3 i role=server
  case $impl in *zc) role=client;; esac
  case $impl in
    FD*)
      local zc=()
      [ "$role" = client ] && zc=(--zero-copy yes)
      "$ROOT/hack/bench/testpmd-fwd.sh" --socket1 "$FWD_SOCKA" --socket2 "$FWD_SOCKB" --role "$role" \
        --core "$CLI_CORE" --bsize 2048 --rsize 10 --mbufs "$MBUFS" --record-core-cycles "${zc[@]}" \
        >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
      ;;
    *)
      local zc=()
      [ "$role" = client ] && zc=(--zero-copy --peers-trust-each-other)
      taskset -c "$CLI_CORE" "$MP" --mode fwd --role "$role" --socket "@$FWD_SOCKA" --role2 "$role" \
        --socket2 "@$FWD_SOCKB" --size "$pkt" --ring-size 1024 --burst 32 --duration "$((DUR + 20))s" \
        --connect-timeout "${CONNECT_TO}s" "${zc[@]}" >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
      ;;
  esac
  STARTED=$!
  PIDS+=("$STARTED")
  [ "$role" = client ] && return 0
  for i in $(seq 1 600); do
    kill -0 "$STARTED" 2>/dev/null || return 1
    if [ "$impl" = FD ]; then grep -q "testpmd-fwd: listening" "$TMP/$tag.out" && return 0
    else fwd_listening && return 0; fi
    sleep 0.1
  done
  return 1
}

# start_gen PKT TAG PORTS(clients|loop|servers): the generator on SRV_CORE, sending for DUR+6 s
# from link up (the forwarder is stopped at DUR s, while it still sends). Servers: waits until
# both listen. Sets STARTED.
start_gen() {
  local pkt=$1 tag=$2 kind=$3 ports i
  case $kind in
    clients) ports=(--role client --socket "@$FWD_SOCKA" --role2 client --socket2 "@$FWD_SOCKB" --zero-copy);;
    loop) ports=(--role client --socket "@$FWD_SOCKA" --role2 server --socket2 "@$FWD_SOCKA" --zero-copy);;
    servers) ports=(--role server --socket "@$FWD_SOCKA" --role2 server --socket2 "@$FWD_SOCKB");;
  esac
  taskset -c "$SRV_CORE" "$MP" --mode txrx "${ports[@]}" --window -1 --size "$pkt" \
    --ring-size 1024 --burst 32 --duration "$((DUR + 6))s" --connect-timeout "${CONNECT_TO}s" \
    >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  STARTED=$!
  PIDS+=("$STARTED")
  [ "$kind" = servers ] || return 0
  for i in $(seq 1 600); do
    kill -0 "$STARTED" 2>/dev/null || return 1
    fwd_listening && return 0
    sleep 0.1
  done
  return 1
}

# fwd_cycles IMPL TAG: the forwarder's "cycles idle_share tsc_mhz" (see rx_cycles in bench.sh).
fwd_cycles() {
  local f=$TMP/$2.out c m
  case $1 in
    FD*) c=$(summary_field_any "$f" testpmd_cycles_per_pkt); m=$(summary_field_any "$f" testpmd_tsc_mhz)
         echo "$c NA $m";;
    *) echo "$(summary_field "$f" busy_cycles_per_pkt) $(summary_field "$f" idle_share) $(summary_field "$f" tsc_mhz)";;
  esac
}
summary_field_any() {  # KEY=value from any line of FILE (NA if absent)
  local v
  v=$(tr ' ' '\n' <"$1" 2>/dev/null | sed -n "s/^$2=//p" | tail -n 1)
  echo "${v:-NA}"
}

# run_fwd ROUND CASE(fwd64|fwd1500|fwdzc64|fwdzc1500) PAIR(FD|FDe|FG|F0|FDzc|FGzc|FDzce): one
# run; appends a CSV line (rx_cpu = the generator's CPU share, tx_cpu = the forwarder's,
# gen_txfull = the share of the generator's turns that found its transmit ring full, in %,
# cyc_pkt/idle_share/tsc_mhz = the forwarder's busy cycles per packet, see fwd_cycles).
run_fwd() {
  local round=$1 c=$2 pair=$3 pkt impl fimpl=G gen=clients tag ld v st=ok fpid="" gpid="" i
  local ta="" g0=0 f0=0 gcpu=NA fcpu=NA t_start now full cyc=NA idle=NA mhz=NA
  pkt=${c#fwd}; pkt=${pkt#zc}
  impl=${pair%e}
  case $impl in FD*) fimpl=D;; esac  # side_ticks: testpmd is the child of the script
  case $impl in F0) gen=loop;; *zc) gen=servers;; esac
  tag="r$round-$c-$pair"; ld=$(load1)
  if [ "$gen" = servers ]; then
    # the generator listens first: a DPDK client dials once, at port start
    start_gen "$pkt" "$tag.gen" servers || st="generator-not-listening"
    gpid=$STARTED
    if [ "$st" = ok ]; then start_fwd "$impl" "$pkt" "$tag.fwd"; fpid=$STARTED; fi
  else
    if [ "$impl" != F0 ]; then
      start_fwd "$impl" "$pkt" "$tag.fwd" || st="forwarder-not-listening"
      fpid=$STARTED
    fi
    if [ "$st" = ok ]; then start_gen "$pkt" "$tag.gen" "$gen"; gpid=$STARTED; fi
  fi
  if [ "$st" = ok ]; then
    t_start=${EPOCHREALTIME/./}
    for i in $(seq 1 $(((DUR + CONNECT_TO + 30) * 10))); do
      kill -0 "$gpid" 2>/dev/null || break
      now=${EPOCHREALTIME/./}
      if [ -z "$ta" ] && [ "$DUR" -ge 4 ] && [ $((now - t_start)) -ge 2000000 ]; then
        ta=$EPOCHREALTIME; g0=$(side_ticks "$gpid" G); [ -n "$fpid" ] && f0=$(side_ticks "$fpid" "$fimpl")
      elif [ -n "$ta" ] && [ "$gcpu" = NA ] && [ $((now - t_start)) -ge $(((DUR - 1) * 1000000)) ]; then
        gcpu=$(awk -v a="$ta" -v b="$EPOCHREALTIME" -v t="$(($(side_ticks "$gpid" G) - g0))" -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz / (b - a)}')
        [ -n "$fpid" ] && fcpu=$(awk -v a="$ta" -v b="$EPOCHREALTIME" -v t="$(($(side_ticks "$fpid" "$fimpl") - f0))" -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz / (b - a)}')
      fi
      [ $((now - t_start)) -ge $((DUR * 1000000)) ] && break
      sleep 0.1
    done
  fi
  # The forwarder first, while the generator still sends (it has DUR+6 s from link up).
  if [ -n "$fpid" ]; then stop_pid "$fpid"; forget "$fpid"; fi
  if [ -n "$gpid" ]; then stop_pid "$gpid"; forget "$gpid"; fi
  full=NA
  if [ "$st" = ok ]; then
    v=$(go_rate "$TMP/$tag.gen.err"); [ "$v" = NA ] && st="no-samples"
    # The generator's turns whose transmit ring took nothing: how often it waited for the forwarder.
    full=$(sed -n 's/.*tx_full=[0-9]* (\([0-9.]*\) %).*/\1/p' "$TMP/$tag.gen.err" | tail -n 1)
    [ -n "$fpid" ] && read -r cyc idle mhz < <(fwd_cycles "$impl" "$tag.fwd")
  else v=NA; fi
  printf 'fwd,%s,%s,-,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$round" "$c" "$pair" "$pkt" "$v" "$ld" "$st" "$gcpu" "$fcpu" "${full:-NA}" "$cyc" "$idle" "$mhz" >>"$CSV"
  printf 'bench: round %s %-9s %-5s %8s Mpps  (load1 %s, cpu generator %s forwarder %s, forwarder busy cycles/pkt %s) %s\n' "$round" "$c" "$pair" "$v" "$ld" "$gcpu" "$fcpu" "$cyc" "$st" >&2
  if [ "$st" != ok ]; then
    echo "bench:   --- $tag failed; last lines:" >&2
    tail -n 5 "$TMP/$tag".*.out "$TMP/$tag".*.err 2>/dev/null | sed 's/^/bench:   /' >&2 || true
  fi
}

# plan_fwd: the forwarding rows of one round.
plan_fwd() {
  local c
  for c in fwd64 fwd1500; do
    has "$c" || continue
    echo "fwd $c - FD"; echo "fwd $c - F0"; echo "fwd $c - FG"; echo "fwd $c - FDe"
  done
  for c in fwdzc64 fwdzc1500; do
    has "$c" || continue
    echo "fwd $c - FDzc"; echo "fwd $c - FGzc"; echo "fwd $c - FDzce"
  done
}

# run_clping ROUND: the machine's cache-line ping-pong between the two cores (hack/bench/clping),
# the floor under any polling round trip; CSV lines like the latency rows (pair CL, microseconds).
run_clping() {
  local round=$1 ld line q v
  ld=$(load1)
  line=$("$TMP/clping" -cpus "$CLI_CORE,$SRV_CORE" -rounds 2000000 2>&1 | tail -n 1)
  for q in p50 p99; do
    v=$(printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^rtt_${q}_ns=//p")
    [ -n "$v" ] && v=$(awk -v n="$v" 'BEGIN{printf "%.3f", n / 1000}')
    printf '%s,%s,lat,c2s,CL,64,%s,%s,%s,NA,NA,NA,NA,NA,NA\n' "$q" "$round" "${v:-NA}" "$ld" "$([ -n "$v" ] && echo ok || echo no-result)" >>"$CSV"
  done
  printf 'bench: round %s cache-line ping-pong %s (load1 %s)\n' "$round" "$line" "$ld" >&2
}
