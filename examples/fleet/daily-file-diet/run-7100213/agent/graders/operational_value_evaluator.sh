#!/usr/bin/env bash
# File Diet Decision Conformance (transitional: attainment on regrade, metric array otherwise).
#   value      1 when the run filed a label or comment, 0 when it filed nothing in strict mode,
#              null (no evidence) otherwise, and null at evidence times before the run existed.
#   maturesAt  seven days after the run was created; evidenceCutoff = min(evidenceAt, maturesAt).
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
if [ "$(jq '.evidenceAt != null' <<<"$request")" != "true" ]; then
  printf '[{"id":"conformance","value":%s},{"id":"outputs","value":%s}]\n' "$value" "$outputs"
  exit 0
fi
jq -c --argjson v "$value" --argjson n "$outputs" '
  def epoch: sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601;
  (.evidenceAt | epoch) as $at
  | ((.run.createdAt // .evidenceAt) | epoch) as $created
  | ($created + 7 * 86400) as $matures
  | (if $at < $created then null else $v end) as $value
  | {value: $value,
     case: (.case // {workflow: .run.workflow}),
     opportunityKey: "\(.run.repository)/\(.run.workflow)#\(.run.id)",
     evidenceCutoff: ([$at, $matures] | min | todate),
     maturesAt: ($matures | todate),
     provenance: (if $value == null then [] else [{repository: .run.repository, kind: "workflow-run",
                                                   ref: .run.id}] end),
     message: (if $value == null then "no evidence at this time" else "outputs=\($n)" end)}' <<<"$request"
