# report.awk - turn hack/bench.sh's raw CSV into the markdown table.
# Input (CSV, header line first): kind,round,case,dir,pair,pkt,value,load1,status[,rx_cpu,tx_cpu[,gen_txfull[,cyc_pkt,idle_share,tsc_mhz]]]
#   (the busy cycles are reported by report-cycles.awk)
#   rx_cpu/tx_cpu: share of one CPU the receiver/sender process got while traffic flowed (NA: none)
#   kind=tput: value = receiver Mpps (trimmed mean of its per-second samples)
#   kind=p50|p99|p999: value = round-trip microseconds (pair = GG or GD: Go ping vs Go/DPDK echo;
#     CL: the cache-line ping-pong, no memif)
#   kind=fwd: reported by report-fwd.awk
# A value of "NA" is a failed run; it is listed but left out of medians and ratios.
# Output: the throughput table (when there are tput rows), then the latency table (when there are
# latency rows).
BEGIN { FS = "," }
NR == 1 { next }
function median(a, n,    i, j, t, b) {
  for (i = 1; i <= n; i++) b[i] = a[i]
  for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
  if (n == 0) return "NA"
  return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
function minof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function maxof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
{
  kind = $1; r = $2; c = $3; d = $4; p = $5; v = $7
  key = kind SUBSEP c SUBSEP d SUBSEP p
  if (!(key in seen)) { seen[key] = 1; order[++nk] = key; pkt[key] = $6 }
  total[key]++
  if (v != "NA") { cnt[key]++; val[key, cnt[key]] = v + 0; byround[key, r] = v + 0 }
  if (NF >= 11 && $10 != "NA" && $10 != "") { ncpu[key]++; rcpu[key, ncpu[key]] = $10 + 0; scpu[key, ncpu[key]] = $11 + 0 }
  else fails[key]++
  rounds[r] = 1
}
function label(p) {
  if (p == "DD") return "DPDK->DPDK"
  if (p == "GG") return "Go->Go"
  if (p == "GD") return "Go->DPDK"
  if (p == "DG") return "DPDK->Go"
  if (p == "GGv") return "Go->Go --verify"
  if (p == "DDzc") return "DPDK->DPDK zero-copy"
  if (p == "DDe" || p == "DDzce") return "(reference again, end of block)"
  if (p == "GGc") return "Go->Go copy mode"
  if (p == "GGzc") return "Go->Go zero-copy"
  if (p == "GDzc") return "Go->DPDK zero-copy"
  if (p == "DGzc") return "DPDK->Go zero-copy"
  return p
}
function work(p) {
  if (p == "DD") return "txonly hdr / rxonly no-read"
  if (p == "GG" || p == "GD" || p == "DG" || p == "GGc") return "hdr-only tx / no-read rx (both sides)"
  if (p == "GGv") return "--verify: stamp + check every byte"
  if (p == "DDzc") return "txonly / rxonly, client zero-copy"
  if (p == "GGzc" || p == "GDzc" || p == "DGzc") return "hdr-only tx / no-read rx, client zero-copy"
  return ""
}
function casename(c) {
  if (c == "64") return "64 B"
  if (c == "1500") return "1500 B"
  if (c == "chain") return "512 B in 128 B bufs"
  if (c == "zc64") return "64 B zero-copy"
  if (c == "zc1500") return "1500 B zero-copy"
  return c
}
# sameround(key, ref, ref2): median (min-max) over rounds of key's value divided by the reference
# of the same round. With ref2 (the reference run again at the end of the block), the reference is
# the mean of the two, and a round whose two differ by more than 25 % (the VM changed speed state
# inside the block) is left out and counted as unsteady.
function sameround(key, ref, ref2,    r, m, b, x, y, unsteady, s) {
  m = 0; unsteady = 0
  for (r in rounds) {
    if (!((key, r) in byround) || !((ref, r) in byround) || byround[ref, r] <= 0) continue
    x = byround[ref, r]
    if (ref2 != "") {
      if (!((ref2, r) in byround) || byround[ref2, r] <= 0) continue
      y = byround[ref2, r]
      if ((x > y ? x / y : y / x) > 1.25) { unsteady++; continue }
      x = (x + y) / 2
    }
    b[++m] = byround[key, r] / x
  }
  s = (m > 0) ? sprintf("**%.2f** (%.2f-%.2f), %d rounds", median(b, m), minof(b, m), maxof(b, m), m) : "NA"
  if (unsteady) s = s sprintf(" (%d unsteady left out)", unsteady)
  return s
}
END {
  ntput = 0
  for (k = 1; k <= nk; k++) { split(order[k], f, SUBSEP); if (f[1] == "tput") ntput++ }
  if (ntput > 0) print_tput()
  print_latency()
}
function print_tput(    k, key, f, c, d, p, n, a, b, i, m, r, med, mpps, gbps, ratio, cc, ref, cpu) {
  print "| case | dir | row | work compared | median Mpps (min-max) | Gbit/s | Go/DPDK same round: median (min-max) | CPU share rx/tx | runs ok |"
  print "|---|---|---|---|---|---|---|---|---|"
  for (k = 1; k <= nk; k++) {
    key = order[k]; split(key, f, SUBSEP)
    if (f[1] != "tput") continue
    c = f[2]; d = f[3]; p = f[4]; n = cnt[key] + 0
    delete a
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    if (n > 0) {
      med = median(a, n)
      mpps = sprintf("**%.2f** (%.2f-%.2f)", med, minof(a, n), maxof(a, n))
      gbps = sprintf("%.1f", med * pkt[key] * 8 / 1000)
    } else { mpps = "NA"; gbps = "NA" }
    ratio = ""
    if (p == "GGzc" || p == "GDzc" || p == "DGzc" || p == "GGc") {
      # Go (zero-copy) against DPDK zero-copy, and Go zero-copy against Go copy mode next to it
      ratio = sameround(key, "tput" SUBSEP c SUBSEP d SUBSEP "DDzc", "tput" SUBSEP c SUBSEP d SUBSEP "DDzce")
      if (p == "GGzc") ratio = ratio "; Go zc/copy " sameround(key, "tput" SUBSEP c SUBSEP d SUBSEP "GGc", "")
    } else if (p == "DDe" || p == "DDzce") {
      ratio = ""
    } else if (p != "DD" && p != "DDzc") {
      ratio = sameround(key, "tput" SUBSEP c SUBSEP d SUBSEP "DD", "tput" SUBSEP c SUBSEP d SUBSEP "DDe")
    } else if (p == "DDzc") {
      # zero-copy: compare with DPDK's own copy mode of the same size and direction, same round
      cc = substr(c, 3); ref = "tput" SUBSEP cc SUBSEP d SUBSEP "DD"
      m = 0; delete b
      for (r in rounds) if (((key, r) in byround) && ((ref, r) in byround) && byround[ref, r] > 0) b[++m] = byround[key, r] / byround[ref, r]
      ratio = (m > 0) ? sprintf("(DPDK zc/copy %.2f)", median(b, m)) : ""
    }
    cpu = "NA"; m = ncpu[key] + 0
    if (m > 0) {
      delete a; delete b
      for (i = 1; i <= m; i++) { a[i] = rcpu[key, i]; b[i] = scpu[key, i] }
      cpu = sprintf("%.2f / %.2f", median(a, m), median(b, m))
    }
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n", casename(c), d, label(p), work(p), mpps, gbps, ratio, cpu, n, total[key]
  }
  print ""
}
function print_latency(    k, key, f, nl, p, line, qi, q, kk, n, a, i, cell) {
  nl = 0
  for (k = 1; k <= nk; k++) { split(order[k], f, SUBSEP); if (f[1] == "p50") nl++ }
  if (nl == 0) return
  print "Ping-pong round trip, 64 B, polling, one packet in flight (memif-perf --mode ping as client on core 1):"
  print ""
  print "| echo peer (server, core 0) | p50 us median (min-max) | p99 us median (min-max) | p99.9 us median (min-max) | runs ok |"
  print "|---|---|---|---|---|"
  for (k = 1; k <= nk; k++) {
    key = order[k]; split(key, f, SUBSEP)
    if (f[1] != "p50") continue
    p = f[4]; line = (p == "GG") ? "memif-perf --mode echo (Go)" : "testpmd --forward-mode=io (DPDK)"
    if (p == "CL") line = "no memif: cache-line ping-pong between the cores (hack/bench/clping)"
    for (qi = 1; qi <= 3; qi++) {
      q = (qi == 1) ? "p50" : (qi == 2) ? "p99" : "p999"
      kk = q SUBSEP f[2] SUBSEP f[3] SUBSEP p; n = cnt[kk] + 0; delete a
      for (i = 1; i <= n; i++) a[i] = val[kk, i]
      cell[qi] = (n > 0) ? sprintf("**%.2f** (%.2f-%.2f)", median(a, n), minof(a, n), maxof(a, n)) : "NA"
    }
    printf "| %s | %s | %s | %s | %d/%d |\n", line, cell[1], cell[2], cell[3], cnt[key] + 0, total[key]
  }
}
