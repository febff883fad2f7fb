#!/usr/bin/env bash
# kinetic-core is the pure domain and engine: its normal (non-dev) dependency
# tree must hold no Kubernetes client, no object_store, no HTTP client, and
# tokio only with the `time` and `sync` features (timers, semaphores,
# channels) — never `net`, `fs`, `process`, `rt` or the like. Adapters do IO.
set -euo pipefail
cd "$(dirname "$0")/.."

tree=$(cargo tree -p kinetic-core -e normal --prefix none --no-dedupe -f '{p}' | awk '{print $1}' | sort -u)
forbidden='^(kube|kube-client|kube-core|kube-runtime|k8s-openapi|object_store|reqwest|hyper|hyper-util|ureq|isahc|surf|curl|attohttpc|h2|tokio-net|mio)$'
bad=$(grep -E "$forbidden" <<<"$tree" || true)
if [[ -n "$bad" ]]; then
  echo "purity: kinetic-core must not depend on: $(tr '\n' ' ' <<<"$bad")" >&2
  exit 1
fi

if grep -qx tokio <<<"$tree"; then
  feats=$(cargo tree -p kinetic-core -e normal,features --prefix none -i tokio 2>/dev/null \
    | grep -oE '^tokio feature "[a-z0-9_-]+"' | sed -E 's/.*"(.*)"/\1/' | sort -u)
  allowed='^(default|time|sync)$'
  badf=$(grep -vE "$allowed" <<<"$feats" || true)
  if [[ -n "$badf" ]]; then
    echo "purity: kinetic-core may use tokio's time and sync features only, found: $(tr '\n' ' ' <<<"$badf")" >&2
    exit 1
  fi
fi
echo "purity: kinetic-core has no kube, object_store, HTTP client or tokio IO in its dependencies"
