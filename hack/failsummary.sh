#!/usr/bin/env bash
# Prints, for each failed test in a go test log (stdin), its header and the last lines of its
# output, where t.Error and t.Fatal land after the t.Log lines of a long test (the chaos run's
# report): .ci/run prints it at the very end, so a CI page that keeps only the head and the tail
# of the log still shows why each test failed.
#
#   hack/failsummary.sh [LINES] < go-test.log     LINES per failed test (default 25)
set -euo pipefail
lines=${1:-25}
awk -v keep="$lines" '
function flush(   i, from) {
  if (name == "") return
  print name
  from = n > keep ? n - keep + 1 : 1
  if (from > 1) printf "    [... %d lines]\n", from - 1
  for (i = from; i <= n; i++) print buf[i]
  name = ""; n = 0
}
/^[[:space:]]*--- FAIL: / { flush(); name = $0; next }
name != "" && /^[[:space:]]/ { buf[++n] = $0; next }
{ flush() }
END { flush() }
'
