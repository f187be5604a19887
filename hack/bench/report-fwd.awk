# report-fwd.awk - the forwarding table of hack/bench.sh (rows kind=fwd of its CSV; see
# hack/bench/fwd.sh). Per size: the generator's Mpps through testpmd io forwarding (FD, and FDe at
# the end of the block), through memif-perf --mode fwd (FG) and with no forwarder (F0); ratios are
# per round: FG over the mean of FD and FDe (a round whose two differ by more than 25 % straddled
# one of the VM's speed steps and is left out), FG and FD over F0 (how close each comes to the
# generator's own ceiling). The generator's turns that found its transmit ring full say how often
# it waited for the forwarder (rarely: the generator is the bottleneck; mostly: the forwarder).
BEGIN { FS = "," }
NR == 1 || $1 != "fwd" { next }
function median(a, n,    i, j, t, b) {
  for (i = 1; i <= n; i++) b[i] = a[i]
  for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
  if (n == 0) return "NA"
  return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
function minof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function maxof(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
function fmt(a, n) { return (n > 0) ? sprintf("**%.2f** (%.2f-%.2f)", median(a, n), minof(a, n), maxof(a, n)) : "NA" }
{
  r = $2; c = $3; p = $5
  if (!(c in seenc)) { seenc[c] = 1; cases[++nc] = c; pkt[c] = $6 }
  total[c, p]++
  if ($7 != "NA") { n[c, p]++; v[c, p, n[c, p]] = $7 + 0; byr[c, p, r] = $7 + 0 }
  if ($10 != "NA" && $10 != "") { nu[c, p]++; gc[c, p, nu[c, p]] = $10 + 0 }
  if ($11 != "NA" && $11 != "") { nf[c, p]++; fc[c, p, nf[c, p]] = $11 + 0 }
  if (NF >= 12 && $12 != "NA" && $12 != "") { nq[c, p]++; fq[c, p, nq[c, p]] = $12 + 0 }
  rounds[r] = 1
}
# ratio(c, num, den, den2): median (min-max) over rounds of num / den (the mean of den and den2 if
# given, leaving out rounds where they differ by more than 25 %).
function ratio(c, num, den, den2,    r, m, b, x, y, bad, s) {
  m = 0; bad = 0
  for (r in rounds) {
    if (!((c, num, r) in byr) || !((c, den, r) in byr) || byr[c, den, r] <= 0) continue
    x = byr[c, den, r]
    if (den2 != "") {
      if (!((c, den2, r) in byr) || byr[c, den2, r] <= 0) continue
      y = byr[c, den2, r]
      if ((x > y ? x / y : y / x) > 1.25) { bad++; continue }
      x = (x + y) / 2
    }
    b[++m] = byr[c, num, r] / x
  }
  s = (m > 0) ? sprintf("**%.2f** (%.2f-%.2f), %d rounds", median(b, m), minof(b, m), maxof(b, m), m) : "NA"
  if (bad) s = s sprintf(" (%d unsteady left out)", bad)
  return s
}
END {
  if (nc == 0) exit
  print ""
  print "Forwarding: generator (memif-perf txrx, two zero-copy client ports; for the zero-copy forwarders two server ports) on CPU 0, forwarder (two memif server ports, or two zero-copy client ports) alone on CPU 1; Mpps = what comes back to the generator:"
  print ""
  print "| size | forwarder | median Mpps (min-max) | same round: / testpmd | same round: / no forwarder | CPU share generator / forwarder | generator turns with its Tx ring full | runs ok |"
  print "|---|---|---|---|---|---|---|---|"
  nrows = split("FD F0 FG FDe FDzc FGzc FDzce", rows, " ")
  for (k = 1; k <= nc; k++) {
    c = cases[k]
    for (i = 1; i <= nrows; i++) {
      p = rows[i]
      if (!((c, p) in total)) continue
      delete a; m = n[c, p] + 0
      for (j = 1; j <= m; j++) a[j] = v[c, p, j]
      name = (p == "FD") ? "testpmd io, two net_memif ports" : (p == "FDe" || p == "FDzce") ? "(testpmd again, end of block)" : (p == "FG") ? "memif-perf --mode fwd (Go)" : (p == "FDzc") ? "testpmd io, two net_memif zero-copy clients" : (p == "FGzc") ? "memif-perf --mode fwd --zero-copy (Go, one pool)" : "none: the generator's ports connected to each other"
      r1 = (p == "FG") ? ratio(c, "FG", "FD", "FDe") : (p == "FGzc") ? ratio(c, "FGzc", "FDzc", "FDzce") : ""
      r2 = (p == "FG" || p == "FD") ? ratio(c, p, "F0", "") : ""
      delete g; delete f; mg = nu[c, p] + 0; mf = nf[c, p] + 0
      for (j = 1; j <= mg; j++) g[j] = gc[c, p, j]
      for (j = 1; j <= mf; j++) f[j] = fc[c, p, j]
      cpu = sprintf("%s / %s", mg ? sprintf("%.2f", median(g, mg)) : "NA", mf ? sprintf("%.2f", median(f, mf)) : "-")
      delete q; mq = nq[c, p] + 0
      for (j = 1; j <= mq; j++) q[j] = fq[c, p, j]
      full = mq ? sprintf("%.1f %% (%.1f-%.1f)", median(q, mq), minof(q, mq), maxof(q, mq)) : "NA"
      printf "| %d B | %s | %s | %s | %s | %s | %s | %d/%d |\n", pkt[c], name, fmt(a, m), r1, r2, cpu, full, m, total[c, p]
    }
  }
}
