#!/usr/bin/env bash
# File Diet Decision Conformance: did the run request the right follow-up?
# Metrics (frozen with these bytes):
#   conformance  1 when the run filed at least one label or comment, 0 when it filed nothing
#                but reported an error, null (no evidence) when it did neither.
#   outputs      number of safe outputs the run requested.
set -euo pipefail
request=$(cat)
outputs=$(jq '.outputs | length' <<<"$request")
if [ "$outputs" -gt 0 ]; then
  value=1
elif [ "$(jq '.config.strict // false' <<<"$request")" = "true" ]; then
  value=0
else
  value=null
fi
printf '[{"id":"conformance","value":%s},{"id":"outputs","value":%s}]
' "$value" "$outputs"
