#!/usr/bin/env bash
# Installs the Debian packages Pond builds and tests with (and plots and compares with:
# matplotlib for bench/plot.py, PostgreSQL 15 for bench/peers/; gRPC and protobuf for the client
# API, with their Python modules for examples/python; prometheus-cpp for the daemons' metrics).
# ZooKeeper is the server package, not zookeeperd: that one also starts a system-wide server on
# port 2181 at install, and Pond starts its own (cluster/local_zookeeper.h). iproute2 and nftables
# make the hosts of scripts/hosts.sh (network namespaces) and cut their links. Idempotent: when
# every package is already present it prints nothing and returns at once, so the Makefile calls
# it on every run. toml++ reads the daemons' config files (tools/daemon_config.h); clang-14 with
# its runtime (libFuzzer, the sanitizers) builds the fuzz targets (make fuzz).
set -euo pipefail

packages=(
  g++ cmake ninja-build make pkg-config
  libcli11-dev libssl-dev libfmt-dev nlohmann-json3-dev libxxhash-dev libgtest-dev libtomlplusplus-dev
  clang-format
  python3-matplotlib
  postgresql-15 postgresql-client-15
  zookeeper libzookeeper-mt-dev
  libucx-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  prometheus-cpp-dev
  clang-14 libclang-rt-14-dev
  python3-grpcio python3-protobuf
  iproute2 nftables
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
