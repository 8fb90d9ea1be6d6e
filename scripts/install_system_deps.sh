#!/usr/bin/env bash
# Installs the Debian packages that software rendering needs on a machine without a GPU:
# EGL/OSMesa for MuJoCo (MetaWorld) and the Mesa 25 lavapipe Vulkan driver from
# bookworm-backports for SAPIEN (ManiSkill), whose Debian 12 lavapipe is too old.
# Idempotent: a second run does nothing but check.
set -euo pipefail

packages=(libegl1 libgl1 libgl1-mesa-dri libosmesa6 libglu1-mesa libvulkan1 ffmpeg git make)

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then echo sudo; else
      echo "install_system_deps: root or sudo is needed to apt-get install ${packages[*]}" >&2; exit 1
    fi
  fi
}
SUDO=$(need_root)

if ! command -v apt-get >/dev/null; then
  echo "install_system_deps: no apt-get here; install by hand: ${packages[*]} and a Vulkan ICD (Mesa >= 24 lavapipe or a GPU driver)" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
lavapipe_version=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)

codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
backports_list=/etc/apt/sources.list.d/vlarl-backports.list
if [ "$codename" = bookworm ] && [ ! -f "$backports_list" ]; then
  echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee "$backports_list" >/dev/null
  missing+=(update-only)
fi

if [ ${#missing[@]} -gt 0 ] || [[ "$lavapipe_version" != 25* && "$lavapipe_version" != 2[6-9]* ]]; then
  $SUDO apt-get update -qq
  real_missing=()
  for p in "${missing[@]}"; do [ "$p" = update-only ] || real_missing+=("$p"); done
  if [ ${#real_missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${real_missing[@]}"
  fi
  if [ "$codename" = bookworm ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1
  else
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mesa-vulkan-drivers
  fi
fi
echo "install_system_deps: rendering packages present (lavapipe $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers))"
