#!/usr/bin/env bash
# Runs the Dockerfile without Docker (CI has no Docker engine), to prove its build works:
# - every build stage (each stage but the last) gets its own directory as its filesystem, and its
#   WORKDIR, COPY, ENV and RUN instructions are carried out there, in order: the placeholder build
#   that caches the dependencies, then the real build;
# - of the last (runtime) stage only COPY and ENV are carried out, into a directory that stands
#   for the image (its RUN installs Debian packages and a user: that needs the real base image);
# - then the image's binary runs `--help`, `--version`, and the ENTRYPOINT with `--help` and
#   with `check` on the image's config (TOOLPULSE_CONFIG) appended, which must show the
#   ENTRYPOINT's listen address.
# The filesystems live outside the repo (inside it, cargo's workspace search would read the repo's
# Cargo.toml); only each build stage's WORKDIR/target is kept between runs, under
# target/dockerfile-check/, as Docker's layer cache would keep the dependencies.
# Handles the instructions this Dockerfile uses; anything else is an error.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dockerfile="$repo/Dockerfile"
cache="$repo/target/dockerfile-check"
fs="${TMPDIR:-/tmp}/toolpulse-dockerfile-check.$(printf '%s' "$repo" | cksum | cut -d' ' -f1)"
rm -rf "$fs"
trap 'rm -rf "$fs"' EXIT

# The Dockerfile as one instruction per line: continuations joined, comments dropped.
instructions() {
  local line joined=""
  while IFS= read -r line || [ -n "$line" ]; do
    [[ "$line" =~ ^[[:space:]]*# ]] && continue
    if [[ "$line" == *\\ ]]; then
      joined+="${line%\\} "
      continue
    fi
    joined+="$line"
    [[ -n "${joined//[[:space:]]/}" ]] && printf '%s\n' "$joined"
    joined=""
  done <"$dockerfile"
}
mapfile -t lines < <(instructions)
last_from=0
for i in "${!lines[@]}"; do
  [[ "${lines[$i]}" == FROM* ]] && last_from=$i
done

stage="" root="" cwd="/" final=false entrypoint=""
declare -A env=()
for i in "${!lines[@]}"; do
  line=${lines[$i]}
  keyword=${line%% *}
  args=${line#* }
  case "$keyword" in
    ARG) ;;
    FROM)
      # FROM image [AS name]
      read -r -a words <<<"$args"
      stage=${words[2]:-stage$i}
      [ "$i" -eq "$last_from" ] && final=true
      if $final; then root="$fs/image"; else root="$fs/stages/$stage"; fi
      mkdir -p "$root"
      cwd="/"
      env=()
      echo "== FROM ${words[0]} ($stage$($final && echo ', the image'))"
      ;;
    WORKDIR)
      cwd=$args
      mkdir -p "$root$cwd"
      if ! $final; then
        mkdir -p "$cache/$stage"
        ln -sfn "$cache/$stage" "$root$cwd/target"
      fi
      ;;
    ENV)
      name=${args%%=*}
      env[$name]=${args#*=}
      ;;
    COPY)
      read -r -a words <<<"$args"
      from=""
      while [[ "${words[0]}" == --* ]]; do
        case "${words[0]}" in
          --from=*) from=${words[0]#--from=} ;;
          *) echo "check-dockerfile: unsupported COPY flag ${words[0]}" >&2; exit 1 ;;
        esac
        words=("${words[@]:1}")
      done
      dest=${words[-1]}
      [[ "$dest" == /* ]] || dest="$cwd/$dest"
      for source in "${words[@]:0:${#words[@]}-1}"; do
        if [ -n "$from" ]; then source="$fs/stages/$from$source"; else source="$repo/$source"; fi
        if [[ "$dest" == */ ]]; then
          mkdir -p "$root$dest"
          if [ -d "$source" ]; then cp -a "$source/." "$root$dest"; else cp -a "$source" "$root$dest"; fi
        else
          mkdir -p "$(dirname "$root$dest")"
          cp -a "$source" "$root$dest"
        fi
      done
      ;;
    RUN)
      if $final; then
        echo "   (skipped in the image: RUN ${args:0:60}…)"
        continue
      fi
      echo "== RUN $args"
      (
        cd "$root$cwd"
        for name in "${!env[@]}"; do export "$name=${env[$name]}"; done
        sh -c "$args"
      )
      ;;
    ENTRYPOINT)
      entrypoint=$args
      ;;
    USER | EXPOSE | STOPSIGNAL | HEALTHCHECK | LABEL | CMD) ;;
    *)
      echo "check-dockerfile: unsupported instruction $keyword" >&2
      exit 1
      ;;
  esac
done

image="$fs/image"
bin="$image/usr/local/bin/toolpulse"
config="$image${env[TOOLPULSE_CONFIG]:?the image sets no TOOLPULSE_CONFIG}"
echo "== the image: $bin, $config"
help=$("$bin" --help)
[[ "$help" == *"Usage: toolpulse"* ]] || { echo "toolpulse --help: not the real binary: $help" >&2; exit 1; }
"$bin" --version

# The ENTRYPOINT's flags (JSON array; first word the program, found on the image's PATH).
mapfile -t argv < <(printf '%s' "$entrypoint" | tr -d '[]' | tr ',' '\n' | sed 's/^ *"//; s/" *$//')
[ "${argv[0]}" = toolpulse ] || { echo "ENTRYPOINT runs ${argv[0]}, not toolpulse" >&2; exit 1; }
PATH="$image/usr/local/bin:$PATH" TOOLPULSE_CONFIG="$config" "${argv[@]}" --help >/dev/null
# `docker run IMAGE check FILE`: the image's config as the container runs it, with the
# ENTRYPOINT's addresses.
checked=$(PATH="$image/usr/local/bin:$PATH" "${argv[@]}" check "$config")
printf '%s\n' "$checked"
for i in "${!argv[@]}"; do
  if [ "${argv[$i]}" = --listen ]; then
    [[ "$checked" == *"proxy: listen ${argv[$((i + 1))]} "* ]] || {
      echo "check does not show the ENTRYPOINT's --listen ${argv[$((i + 1))]}" >&2
      exit 1
    }
  fi
done
echo "check-dockerfile: ok (ENTRYPOINT ${argv[*]})"
