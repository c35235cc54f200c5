#!/usr/bin/env bash
# Regenerates idl/kitex_gen from idl/*.thrift with the Kitex generator pinned in
# go.mod (tools.go). Run from anywhere; the output is committed.
set -euo pipefail
cd "$(dirname "$0")"
module=github.com/sluicehq/sluice
rm -rf kitex_gen
for f in common dispatcher resourcemanager jobmaster taskexecutor; do
  go run github.com/cloudwego/kitex/tool/cmd/kitex \
    -module "$module" -gen-path kitex_gen -no-fast-api "$f.thrift" >/dev/null
done
gofmt -w kitex_gen
