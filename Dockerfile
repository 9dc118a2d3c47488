# Build the one binary, then run it as an unprivileged user on a slim image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/orderd ./cmd/orderd

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 orderd
COPY --from=build /out/orderd /usr/local/bin/orderd
USER orderd
EXPOSE 8080
ENTRYPOINT ["orderd"]
CMD ["serve"]
