#!/usr/bin/env bash
# Fuzzes every target for N seconds each (default 600), one after the other, then minimizes
# their corpora into fuzz/corpus/<target>/. Crashes land in fuzz/artifacts/<target>/.
#
#   fuzz/run.sh [SECONDS]        fuzz each target for SECONDS
#   fuzz/run.sh --seed           (re)seed fuzz/corpus/ from the fixtures, then exit
#   TARGETS=rewriter fuzz/run.sh one target only (default: "parser rewriter ag_ui h1 h1_request")
#
# ag_ui reads the rewriter's inputs: it starts from corpus/rewriter/ (read only) and keeps what it
# finds in corpus/ag_ui/.
#
# Needs nightly Rust and cargo-fuzz (`cargo install cargo-fuzz --locked`). Runs under
# `nice -n 10`: the machines it runs on are shared.
set -euo pipefail
cd "$(dirname "$0")"
fixtures=../tests/fixtures

# One seed: control bytes (printf escapes) followed by a file's bytes.
seed() { # target name control file
  { printf "$3"; cat "$4"; } >"corpus/$1/seed-$2"
}

if [[ "${1:-}" == "--seed" ]]; then
  mkdir -p corpus/parser corpus/rewriter
  for f in "$fixtures"/*.sse "$fixtures"/recordings/*/*.sse; do
    [[ "$f" == *.out.sse ]] && continue
    (($(stat -c %s "$f") > 1048576)) && continue # the 2-4 MiB fixtures: too slow to fuzz
    name=$(basename "$f" .sse)
    # parser: [limit-1, max chunk, split seed]
    seed parser "$name-256" '\xff\x40\x01' "$f"
    seed parser "$name-32-bytewise" '\x1f\x00\x07' "$f"
    # rewriter, raw input: [flags, max chunk, split seed]; flags & 3 = config, bits 3-5 = limit
    seed rewriter "$name-default" '\x00\x10\x03' "$f"
    seed rewriter "$name-fuzz" '\x01\x40\x05' "$f"
    seed rewriter "$name-all-512" '\x2a\x07\x09' "$f"
    seed rewriter "$name-payload-200" '\x23\x00\x02' "$f"
  done
  # rewriter, generated streams (flags bit 2): see `render` in checks.rs for the opcodes.
  printf '\x05\x10\x03\x00\x01\x00\x02\x03\x04\x00\x05\x06\x00\x07\x08' >corpus/rewriter/seed-ops-web-search
  printf '\x06\x08\x04\x00\x01\x02\x04\x02\x45\x09\x07\x08' >corpus/rewriter/seed-ops-mcp-fails
  printf '\x07\x03\x01\x01\x00\x11\x02\x04\x00\x14\x02\x15\x05\x07' >corpus/rewriter/seed-ops-parallel
  printf '\x45\x20\x01\x00\x01\x07\x04\x07\x12\x02' >corpus/rewriter/seed-ops-open-at-eof
  printf '\x85\x05\x02\x01\x03\x04\x03\x1c\x05\x27\x08' >corpus/rewriter/seed-ops-litellm
  printf '\x1d\x00\x00\x1d\x01\x02\xfd\x04\x02\xae\x05\x3f\x14\x07' >corpus/rewriter/seed-ops-crlf-big-split
  exit 0
fi

seconds=${1:-600}
toolchain=${TOOLCHAIN:-+nightly}
targets=${TARGETS:-parser rewriter ag_ui h1 h1_request}
for target in $targets; do
  mkdir -p "corpus/$target" "regressions/$target"
  # --sanitizer none: the crate has no `unsafe`, and ASan costs most of the speed;
  # -max_len: the seeds are cut there (long recordings gain nothing but slowness);
  # -timeout: a hang is a bug (every input runs in milliseconds).
  seeds=()
  [[ "$target" == ag_ui ]] && seeds=(corpus/rewriter)
  nice -n 10 cargo "$toolchain" fuzz run --sanitizer none "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1
done
for target in $targets; do
  nice -n 10 cargo "$toolchain" fuzz cmin --sanitizer none "$target" "corpus/$target" -- -max_len=16384
done
du -sh corpus/*
