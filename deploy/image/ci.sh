#!/usr/bin/env bash
# CI: build Cosigner's image from this checkout and serve a round trip through it.
#
# Root on Debian 12, no container engine: buildah (Debian's package) builds the Containerfile
# with `--isolation chroot` and runs commands in the image on the host's network; the base,
# `debian:bookworm-slim`, is made here from Debian's archive by deploy/image/base.sh, since no
# registry but Debian's, PyPI and npm is reachable. Then deploy/image/smoke.py: migrate, serve,
# /readyz, create -> long-poll -> decide, on SQLite and (when it answers) this machine's
# PostgreSQL. Prints what each step took. Usage: deploy/image/ci.sh [IMAGE_TAG]
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-localhost/cosigner:ci}
export BUILDAH_ISOLATION=chroot
started=$(date +%s)
mark=$started
took() { now=$(date +%s); echo "image: $1 took $((now - mark)) s"; mark=$now; }

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "image: installing ${need[*]} (Debian's packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  took "installing ${need[*]}"
fi
# Overlay where the kernel has it (root needs neither fuse-overlayfs nor uidmap); else vfs,
# which copies every layer but works anywhere.
if ! grep -qw overlay /proc/filesystems; then
  export STORAGE_DRIVER=vfs
  echo "image: no overlay filesystem here; buildah stores layers with vfs (slower)"
fi

deploy/image/base.sh
took "the base (debian:bookworm-slim by mmdebstrap, or today's from the store)"

echo "image: buildah build -t $image (layers cached between runs on this machine)"
image_id() { buildah images --noheading --no-trunc --format '{{.ID}}' "$1" 2>/dev/null | head -1 || true; }
before=$(image_id "$image") before_build=$(image_id "$image-build")
log=$(mktemp)
# The build stage is tagged too (a second, cached pass), so that its previous result can be
# removed below like the image's.
if ! { buildah build --isolation chroot --pull=never --layers -t "$image" -f Containerfile . &&
       buildah build --isolation chroot --pull=never --layers --target build -t "$image-build" \
         -f Containerfile .; } >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "image: the build failed (the end of its output is above)"
  exit 1
fi
rm -f "$log"
# Keep the store from growing run after run: the previous results go, with the layers only
# they used (those the new ones share stay, and so does the cache they make).
for pair in "$before $(image_id "$image")" "$before_build $(image_id "$image-build")"; do
  set -- $pair
  if [ $# = 2 ] && [ "$1" != "$2" ]; then buildah rmi "$1" >/dev/null 2>&1 || true; fi
done
took "the build"
size=$(buildah images --format "{{.Size}}" "$image" | head -1)
base=$(buildah images --format '{{.Size}}' docker.io/library/debian:bookworm-slim | head -1)
echo "image: $image is $size uncompressed, on a base of $base (CI's mmdebstrap base)"

postgres=()
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  postgres=(--postgres "${COSIGNER_IMAGE_POSTGRES:-postgresql://postgres@127.0.0.1:5432/postgres}")
else
  echo "image: no PostgreSQL at 127.0.0.1:5432; the smoke test runs on SQLite alone"
fi
python3 deploy/image/smoke.py "$image" "${postgres[@]}"
took "the smoke test"
echo "image: built and served a round trip in $(( $(date +%s) - started )) s"
