#!/usr/bin/env bash
# Installs what `make image-smoke` needs and builds, from Debian's packages
# alone, the two images deploy/Dockerfile starts FROM where no container
# registry is reachable:
#   localhost/debian:bookworm-slim  debootstrap --variant=minbase bookworm,
#                                   from this machine's Debian mirror
#   localhost/golang:<go>-bookworm  that base, git, and this machine's Go
#                                   toolchain (the one GOTOOLCHAIN names)
# Each is built once and kept; deploy/smoke.sh passes them as BASE and
# GO_IMAGE. Podman runs with runc (crun refuses hybrid cgroup hierarchies)
# and with the lowered rlimits of deploy/podman.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/podman.sh

missing=()
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} (the image smoke test)" >&2
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq podman runc debootstrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq podman runc debootstrap; }) >&2
  else
    echo "${missing[*]} missing: the image smoke test needs podman, runc and debootstrap (as root: apt-get install podman runc debootstrap)" >&2
    exit 1
  fi
fi

# mirror is the Debian mirror apt uses here for bookworm.
mirror() {
  local uri
  uri=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

if ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  echo "building $BASE_IMAGE with debootstrap from $(mirror)" >&2
  debootstrap --variant=minbase bookworm "$root/rootfs" "$(mirror)" >"$root/debootstrap.log" 2>&1 \
    || { tail -20 "$root/debootstrap.log" >&2; exit 1; }
  # What Debian's -slim images leave out: the downloaded packages, the
  # package lists, documentation, manuals and translations.
  rm -rf "$root"/rootfs/var/cache/apt/archives/*.deb "$root"/rootfs/var/lib/apt/lists/* \
    "$root"/rootfs/usr/share/doc/* "$root"/rootfs/usr/share/man/* "$root"/rootfs/usr/share/info/* "$root"/rootfs/usr/share/locale/*
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
    > "$root/rootfs/etc/dpkg/dpkg.cfg.d/slim"
  tar -C "$root/rootfs" -c . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

if ! "${PODMAN[@]}" image exists "$GO_IMAGE"; then
  goroot=$(go env GOROOT)
  echo "building $GO_IMAGE from $BASE_IMAGE and the Go toolchain at $goroot" >&2
  "${PODMAN[@]}" build "${BUILD_LIMITS[@]}" --network host --build-arg BASE="$BASE_IMAGE" -t "$GO_IMAGE" \
    -f "$PWD/deploy/golang.Containerfile" "$goroot" >&2
fi
