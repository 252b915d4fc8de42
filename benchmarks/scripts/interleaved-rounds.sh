#!/usr/bin/env bash
# Two builds of the benchmarks compared on a shared, noisy machine: one JMH fork of each jar per round, the jars'
# order alternating, and per benchmark the median over the rounds of each round's ratio (the second jar's time over
# the first's), so that load that comes and goes weighs on both sides of a ratio alike.
#
#   benchmarks/scripts/interleaved-rounds.sh BEFORE.jar AFTER.jar ROUNDS OUT_DIR [JMH arguments: -p ..., the regexp]
#
# Each fork runs with JMH_FORK (default: -f 1 -wi 2 -i 3 -w 1s -r 1s); longer iterations where GC pauses make one
# second too short, for example JMH_FORK='-f 1 -wi 3 -i 5 -w 1s -r 2s'.
#
# Writes OUT_DIR/round-N-{before,after}.csv (and .log, JMH's output) and prints one line per benchmark and parameter set: the rounds' ratios,
# then their median.
set -euo pipefail
[ $# -ge 5 ] || { sed -n '2,12p' "$0"; exit 2; }
before=$1 after=$2 rounds=$3 out=$4
shift 4
jmh_args=("$@")
java=${JAVA_HOME:+$JAVA_HOME/bin/}java
fork=${JMH_FORK:--f 1 -wi 2 -i 3 -w 1s -r 1s}
mkdir -p "$out"
run() { # jar, csv
  LD_PRELOAD=${JAVA_HOME:+$JAVA_HOME/lib/libjsig.so} "$java" -Djmh.ignoreLock=true --enable-native-access=ALL-UNNAMED \
    -jar "$1" jmh $fork -rf csv -rff "$2" "${jmh_args[@]}" > "${2%.csv}.log" 2>&1 \
    || { echo "JMH failed on $1 (JAVA_HOME must be a JDK 25); the end of ${2%.csv}.log:" >&2; tail -5 "${2%.csv}.log" >&2; exit 1; }
}
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="before after"; else order="after before"; fi
  for side in $order; do
    jar=$before; [ "$side" = after ] && jar=$after
    run "$jar" "$out/round-$r-$side.csv"
  done
done
# "Benchmark","Mode","Threads","Samples","Score","Score Error (99.9%)","Unit",params...: key = name + params
awk -F, -v rounds="$rounds" '
  FNR == 1 { split(FILENAME, p, "round-"); split(p[2], q, "-"); r = q[1]; side = (FILENAME ~ /after/) ? "after" : "before"; next }
  { key = $1; for (i = 8; i <= NF; i++) key = key "," $i; gsub(/"/, "", key); score[key, r, side] = $5; keys[key] = 1 }
  END {
    for (k in keys) {
      n = 0; line = ""
      for (r = 1; r <= rounds; r++) if ((k, r, "before") in score && (k, r, "after") in score) {
        ratio = score[k, r, "after"] / score[k, r, "before"]; v[++n] = ratio; line = line sprintf(" %.2f", ratio)
      }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      median = n == 0 ? 0 : (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
      printf "%s: rounds%s; median %.3f\n", k, line, median
    }
  }' "$out"/round-*-before.csv "$out"/round-*-after.csv | sort
