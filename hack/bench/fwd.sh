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
# Rows of one size run back to back: FD F0 FG FDe (reversed in odd rounds by bench.sh).

FWD_SOCKA=$SOCK-fwd-a FWD_SOCKB=$SOCK-fwd-b

fwd_listening() {  # both abstract listeners of the forwarder are bound
  awk -v a="@$FWD_SOCKA" -v b="@$FWD_SOCKB" '$4=="00010000" && $5=="0005" { if ($8==a) fa=1; if ($8==b) fb=1 } END{exit !(fa && fb)}' /proc/net/unix
}

# start_fwd IMPL(FG|FD) PKT TAG: the forwarder on CLI_CORE; waits until both ports accept
# clients. Sets STARTED.
start_fwd() {
  local impl=$1 pkt=$2 tag=$3 i
  if [ "$impl" = FD ]; then
    "$ROOT/hack/bench/testpmd-fwd.sh" --socket1 "$FWD_SOCKA" --socket2 "$FWD_SOCKB" --role server \
      --core "$CLI_CORE" --bsize 2048 --rsize 10 --mbufs "$MBUFS" \
      >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  else
    taskset -c "$CLI_CORE" "$MP" --mode fwd --role server --socket "@$FWD_SOCKA" --role2 server \
      --socket2 "@$FWD_SOCKB" --size "$pkt" --ring-size 1024 --burst 32 --duration "$((DUR + 20))s" \
      --connect-timeout "${CONNECT_TO}s" >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  fi
  STARTED=$!
  PIDS+=("$STARTED")
  for i in $(seq 1 600); do
    kill -0 "$STARTED" 2>/dev/null || return 1
    if [ "$impl" = FD ]; then grep -q "testpmd-fwd: listening" "$TMP/$tag.out" && return 0
    else fwd_listening && return 0; fi
    sleep 0.1
  done
  return 1
}

# start_gen PKT TAG LOOP(0|1): the generator on SRV_CORE. Sets STARTED.
start_gen() {
  local pkt=$1 tag=$2 loop=$3 ports
  ports=(--role client --socket "@$FWD_SOCKA" --role2 client --socket2 "@$FWD_SOCKB")
  [ "$loop" = 1 ] && ports=(--role client --socket "@$FWD_SOCKA" --role2 server --socket2 "@$FWD_SOCKA")
  taskset -c "$SRV_CORE" "$MP" --mode txrx "${ports[@]}" --zero-copy --window -1 --size "$pkt" \
    --ring-size 1024 --burst 32 --duration "${DUR}s" --connect-timeout "${CONNECT_TO}s" \
    >"$TMP/$tag.out" 2>"$TMP/$tag.err" </dev/null &
  STARTED=$!
  PIDS+=("$STARTED")
}

# run_fwd ROUND CASE(fwd64|fwd1500) PAIR(FD|FDe|FG|F0): one run; appends a CSV line (rx_cpu =
# the generator's CPU share, tx_cpu = the forwarder's, gen_txfull = the share of the generator's
# turns that found its transmit ring full, in %).
run_fwd() {
  local round=$1 c=$2 pair=$3 pkt=${2#fwd} impl fimpl=G tag ld v st=ok fpid="" gpid i
  local ta="" g0=0 f0=0 gcpu=NA fcpu=NA t_start now full
  impl=${pair%e}
  [ "$impl" = FD ] && fimpl=D  # side_ticks: testpmd is the child of the script
  tag="r$round-$c-$pair"; ld=$(load1)
  if [ "$impl" != F0 ]; then
    if start_fwd "$impl" "$pkt" "$tag.fwd"; then fpid=$STARTED; else st="forwarder-not-listening"; fi
  fi
  if [ "$st" = ok ]; then
    start_gen "$pkt" "$tag.gen" "$([ "$impl" = F0 ] && echo 1 || echo 0)"; gpid=$STARTED
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
      sleep 0.1
    done
    stop_pid "$gpid"; forget "$gpid"
  fi
  if [ -n "$fpid" ]; then stop_pid "$fpid"; forget "$fpid"; fi
  full=NA
  if [ "$st" = ok ]; then
    v=$(go_rate "$TMP/$tag.gen.err"); [ "$v" = NA ] && st="no-samples"
    # The generator's turns whose transmit ring took nothing: how often it waited for the forwarder.
    full=$(sed -n 's/.*tx_full=[0-9]* (\([0-9.]*\) %).*/\1/p' "$TMP/$tag.gen.err" | tail -n 1)
  else v=NA; fi
  printf 'fwd,%s,%s,-,%s,%s,%s,%s,%s,%s,%s,%s\n' "$round" "$c" "$pair" "$pkt" "$v" "$ld" "$st" "$gcpu" "$fcpu" "${full:-NA}" >>"$CSV"
  printf 'bench: round %s %-7s %-4s %8s Mpps  (load1 %s, cpu generator %s forwarder %s) %s\n' "$round" "$c" "$pair" "$v" "$ld" "$gcpu" "$fcpu" "$st" >&2
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
    printf '%s,%s,lat,c2s,CL,64,%s,%s,%s,NA,NA,NA\n' "$q" "$round" "${v:-NA}" "$ld" "$([ -n "$v" ] && echo ok || echo no-result)" >>"$CSV"
  done
  printf 'bench: round %s cache-line ping-pong %s (load1 %s)\n' "$round" "$line" "$ld" >&2
}
