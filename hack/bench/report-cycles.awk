# report-cycles.awk - the busy-cycles table of hack/bench.sh (columns cyc_pkt, idle_share,
# tsc_mhz of its CSV). Busy cycles per packet are counted as testpmd's --record-core-cycles
# counts them (TSC cycles of the polls that moved packets, divided by the packets received; idle
# polls left out): a forwarder's or receiver's own cost, which the generator's speed does not set
# (docs/performance.md, "Busy cycles per packet"). Per round, Go's figure is divided by testpmd's
# in the same block (the mean of the block's two testpmd runs where both have one); medians
# (min-max) over rounds. The Mpps beside them is what the generator got back (forwarding) or the
# receiver took in (rx): what the forwarder or receiver was asked to carry.
#   forwarding: FG / FD,FDe (copy: two memif server ports), FGzc / FDzc,FDzce (zero-copy clients)
#   rx behind a DPDK sender: DG / DD,DDe (copy), DGzc / DDzc,DDzce (a zero-copy client receives)
BEGIN { FS = "," }
NR == 1 || NF < 15 || $13 == "NA" || $13 == "" { next }
function median(a, n,    i, j, t, b) {
  for (i = 1; i <= n; i++) b[i] = a[i]
  for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
  if (n == 0) return "NA"
  return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
function minof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function maxof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
function fmt(a, n, f) { return (n > 0) ? sprintf("**" f "** (" f "-" f ")", median(a, n), minof(a, n), maxof(a, n)) : "NA" }
{
  k = $1 SUBSEP $3 SUBSEP $4; p = $5; r = $2
  if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; kind[k] = $1; cs[k] = $3; dir[k] = $4 }
  cyc[k, p, r] = $13 + 0
  n[k, p]++; cv[k, p, n[k, p]] = $13 + 0
  if ($7 != "NA") { nm[k, p]++; mv[k, p, nm[k, p]] = $7 + 0 }
  if ($14 != "NA" && $14 != "") { ni[k, p]++; iv[k, p, ni[k, p]] = $14 + 0 }
  if ($15 != "NA" && $15 != "") mhz = $15
  rounds[r] = 1
}
function col(k, p, what,    a, j, m) {
  if (what == "cyc") { m = n[k, p] + 0; for (j = 1; j <= m; j++) a[j] = cv[k, p, j]; return fmt(a, m, "%.1f") }
  if (what == "mpps") { m = nm[k, p] + 0; for (j = 1; j <= m; j++) a[j] = mv[k, p, j]; return m ? sprintf("%.2f", median(a, m)) : "NA" }
  m = ni[k, p] + 0; for (j = 1; j <= m; j++) a[j] = iv[k, p, j]; return m ? sprintf("%.2f", median(a, m)) : "NA"
}
# ratio: per round, go / the mean of the references present.
function ratio(k, go, ref1, ref2,    r, b, m, x, y, s) {
  m = 0
  for (r in rounds) {
    if (!((k, go, r) in cyc)) continue
    x = ((k, ref1, r) in cyc) ? cyc[k, ref1, r] : -1; y = ((k, ref2, r) in cyc) ? cyc[k, ref2, r] : -1
    s = (x > 0 && y > 0) ? (x + y) / 2 : (x > 0) ? x : (y > 0) ? y : -1
    if (s > 0) b[++m] = cyc[k, go, r] / s
  }
  return (m > 0) ? sprintf("**%.2f** (%.2f-%.2f), %d rounds", median(b, m), minof(b, m), maxof(b, m), m) : "NA"
}
function row(k, what, go, ref1, ref2) {
  if (!((k, go) in n) && !((k, ref1) in n)) return
  printf "| %s | %s | %s | %s | %s | %s | %s / %s |\n", what, cs[k] (dir[k] != "-" ? " " dir[k] : ""), col(k, go, "cyc"), col(k, ref1, "cyc"), ratio(k, go, ref1, ref2), col(k, go, "idle"), col(k, go, "mpps"), col(k, ref1, "mpps")
}
END {
  if (nk == 0) exit
  print ""
  printf "Busy cycles per packet (TSC at %s MHz; testpmd --record-core-cycles' count, memif-perf's the same way): lower is cheaper. Go's idle share = its loop's cycles in polls that moved nothing.\n", mhz ? mhz : "?"
  print ""
  print "| what | case | Go busy cycles/pkt | testpmd busy cycles/pkt | same round: Go / testpmd | Go idle share | Mpps with Go / with testpmd |"
  print "|---|---|---|---|---|---|---|"
  for (i = 1; i <= nk; i++) {
    k = keys[i]
    if (kind[k] == "fwd") {
      row(k, "forwarder (copy)", "FG", "FD", "FDe")
      row(k, "forwarder (zero-copy)", "FGzc", "FDzc", "FDzce")
    } else if (kind[k] == "tput") {
      row(k, "receiver behind a DPDK sender", "DG", "DD", "DDe")
      row(k, "receiver behind a DPDK sender (zero-copy client)", "DGzc", "DDzc", "DDzce")
    }
  }
}
