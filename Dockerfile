# clothcast server image: `docker build -t clothcast .` then
#   docker run -p 8470:8470 -e CLOTHCAST_PUBLISHER_TOKEN=… -e CLOTHCAST_VIEWER_TOKEN=… clothcast
# The default database is baked while the image is built (~8 min on 2 cores), so a
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
# SIGTERM (docker stop, Kubernetes) closes every connection with 1001 and a reason
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/clothcast", "serve", "--config", "/etc/clothcast/server.toml"]
