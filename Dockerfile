# clothcast server image: `docker build -t clothcast .` then
#   docker run -p 8470:8470 -e CLOTHCAST_PUBLISHER_TOKEN=… -e CLOTHCAST_VIEWER_TOKEN=… clothcast
# The default database is baked while the image is built (5–7 min on 2 cores), so a
# container is serving within a second of its start: an orchestrator's liveness probe
# never meets a first-start bake. README.md, "Running in a container", says more.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin clothcast \
 && install -m 0755 target/release/clothcast /usr/local/bin/clothcast

FROM debian:bookworm-slim
RUN useradd --system --no-create-home --shell /usr/sbin/nologin clothcast
COPY --from=build /usr/local/bin/clothcast /usr/local/bin/clothcast
COPY deploy/container.toml /etc/clothcast/server.toml
# baked as root into the image, read-only to the server's user
ENV CLOTHCAST_CACHE=/var/cache/clothcast
RUN clothcast bake --default && chmod -R a+rX /var/cache/clothcast
USER clothcast
EXPOSE 8470
# `docker ps` shows the container healthy while its tick loop runs (/healthz answers
# 200; the image has no curl, so the server's own client asks). A config of your own
# on another port or with TLS: override it (`--health-cmd`, or Compose's healthcheck;
# with tls_cert: health --url https://127.0.0.1:8470/healthz --insecure)
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/clothcast", "health", "--url", "http://127.0.0.1:8470/healthz"]
# SIGTERM (docker stop, Kubernetes) closes every connection with 1001 and a reason
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/clothcast", "serve", "--config", "/etc/clothcast/server.toml"]
