#!/usr/bin/env bash
# kinetic-core is the pure domain and the ports. Its normal (non-dev)
# dependency tree holds no async runtime (no tokio at all: the timers and
# async cells live in kinetic-engine), no Kubernetes client, no
# object_store and no HTTP client; it cannot name the engine (a cycle
# cargo refuses). Its only file IO is reading what the user points at: the
# modules listed below. Adapters do the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

tree=$(cargo tree -p kinetic-core -e normal --prefix none --no-dedupe -f '{p}' | awk '{print $1}' | sort -u)
forbidden='^(tokio|async-std|smol|kinetic-engine|kube|kube-client|kube-core|kube-runtime|k8s-openapi|object_store|reqwest|hyper|hyper-util|ureq|isahc|surf|curl|attohttpc|h2|tokio-net|mio)$'
bad=$(grep -E "$forbidden" <<<"$tree" || true)
if [[ -n "$bad" ]]; then
  echo "purity: kinetic-core must not depend on: $(tr '\n' ' ' <<<"$bad")" >&2
  exit 1
fi

# File IO only where the user's project, data and profiles are read
# (the crate docs' "What reads files" names the same modules).
allowed='^crates/core/src/(hashing/|packaging/|requirements/|spec\.rs|config/profiles\.rs|files\.rs)'
io=$(grep -rlE 'std::fs|rustix::fs|\bfs::(read|write|File|OpenOptions|metadata|symlink_metadata|create_dir|remove|rename|hard_link|read_dir|canonicalize)' crates/core/src \
  | grep -vE "$allowed" || true)
if [[ -n "$io" ]]; then
  echo "purity: file IO outside the modules that read the user's project: $(tr '\n' ' ' <<<"$io")" >&2
  exit 1
fi
echo "purity: kinetic-core has no async runtime, kube, object_store or HTTP client, and reads files only in the project-reading modules"
