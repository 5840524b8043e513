# syntax=docker/dockerfile:1
# The toolpulse image: a release build on the official Rust image, run as a non-root user on
# debian:bookworm-slim (the same Debian as the build image, so the same glibc).
#
#   docker build -t toolpulse:0.1.0 .
#   docker run --rm -p 8080:8080 -p 127.0.0.1:9464:9464 --stop-timeout 45 \
#     toolpulse:0.1.0 --upstream http://gateway:9000
#
# - The upstream: arguments after the image name are appended to the ENTRYPOINT, so pass
#   `--upstream URL` there, or mount a config with `[proxy] upstream` (next point).
# - The config: /etc/toolpulse/toolpulse.toml (TOOLPULSE_CONFIG), a copy of config/toolpulse.toml
#   (which names no upstream). Mount your own over it
#   (`-v ./toolpulse.toml:/etc/toolpulse/toolpulse.toml:ro`), or mount it elsewhere and pass
#   `--config FILE` or `-e TOOLPULSE_CONFIG=FILE`. SIGHUP (`docker kill -s HUP`) reloads it.
# - Ports: the proxy on 0.0.0.0:8080 and the admin listener (/healthz, /readyz, /metrics) on
#   0.0.0.0:9464, set by the ENTRYPOINT's flags, which win over the config file's `listen` keys.
#   8090 is the MCP front's, when the config lists [[mcp.servers]] and sets
#   `[mcp] listen = "0.0.0.0:8090"` (which needs [progress] token or TOOLPULSE_PROGRESS_TOKEN);
#   see deploy/docker-compose.yml.
# - Stopping: SIGTERM drains in-flight streams for up to `[proxy] drain_timeout_ms` (30 s by
#   default), but `docker stop` waits only 10 s before SIGKILL: give it `--stop-timeout 45`
#   (`stop_grace_period: 45s` in compose, `terminationGracePeriodSeconds` in Kubernetes).
# - Other commands follow the entrypoint's flags: `docker run --rm toolpulse:0.1.0 check
#   /etc/toolpulse/toolpulse.toml` shows the config as the container runs it (0.0.0.0 addresses).
#
# deploy/check-dockerfile.sh runs the build stage's steps and assembles this image's layout
# without Docker; tests/it/deploy.rs checks this file against the repo and the binary.

ARG RUST_VERSION=1

FROM rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /build

# Dependencies first, in their own layer: built against placeholder sources, they are rebuilt only
# when Cargo.toml or Cargo.lock change. Cargo reads every target the manifest declares, so the
# placeholders cover the [[bench]] too. The workspace's other member, the test oracle, is only
# its manifest and an empty placeholder: cargo must load every member, the image never uses it.
COPY Cargo.toml Cargo.lock ./
COPY oracle/Cargo.toml oracle/
RUN mkdir -p src benches oracle/src \
 && echo 'fn main() {}' > src/main.rs \
 && echo '' > src/lib.rs \
 && echo 'fn main() {}' > benches/rewrite.rs \
 && echo '' > oracle/src/lib.rs \
 && cargo build --release --locked

# The real sources. COPY keeps their (older) modification times, so without the touch cargo would
# take the placeholder build as up to date and ship it.
COPY src/ src/
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked

FROM debian:bookworm-slim AS runtime
# ca-certificates: https upstreams are verified against the platform's roots.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 toolpulse \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin toolpulse

COPY --from=build /build/target/release/toolpulse /usr/local/bin/toolpulse
COPY config/ /etc/toolpulse/
ENV TOOLPULSE_CONFIG=/etc/toolpulse/toolpulse.toml
# glibc's malloc serves blocks of 128 KiB and more with mmap, and gives them back when freed, but
# raises that threshold (up to 32 MiB) each time such a block is freed: after a stream that held
# large events or arguments, later ones come from its arenas, which keep them. Fixed at its own
# default, the memory comes back: three streams that peaked at 64-79 MiB left 38-51 MiB held
# (12 MiB before them); with it 13 MiB (measured on the release build, glibc 2.36).
ENV MALLOC_MMAP_THRESHOLD_=131072

# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8080 9464 8090
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD ["toolpulse", "health", "--admin", "127.0.0.1:9464"]
ENTRYPOINT ["toolpulse", "--listen", "0.0.0.0:8080", "--admin-listen", "0.0.0.0:9464"]
