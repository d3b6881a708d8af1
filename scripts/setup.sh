#!/usr/bin/env bash
# Installs the Debian 12 packages revtorch needs, only those missing.
# Runs unattended (CI has no stdin); needs root or sudo for apt-get.
set -euo pipefail

packages=(build-essential cmake pkg-config libdnnl-dev libopenblas-dev libjansson-dev zlib1g-dev libcairo2-dev
          dataset-fashion-mnist
          libnifti2-dev mricron-data   # NIfTI I/O (src/data/nifti.c); brain templates for tests/cli_inspect.sh
          libopenmpi-dev openmpi-bin)  # data parallelism (src/dist), optional at build time
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all packages present"
    exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
