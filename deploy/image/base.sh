#!/usr/bin/env bash
# CI only: make `debian:bookworm-slim` locally, since CI reaches Debian's archive but no
# container registry. mmdebstrap builds a bookworm rootfs (minbase, trimmed like Debian's
# slim image: no manuals, docs or translations), which is imported into buildah's store
# under the name the Containerfile's FROM resolves to, so `buildah build --pull=never`
# uses it. A user's build pulls the real image and needs none of this.
#
# This machine's network re-signs TLS with its own certificate authority, which the host
# trusts. The base gets the host's local CA files (/usr/local/share/ca-certificates), so
# that the Containerfile's own `apt-get install ca-certificates` adds them to the bundle,
# and the `cert` line of the host's pip.conf: pip inside the build then reaches PyPI.
#
# Usage: deploy/image/base.sh   (root; reuses the image when it was made today from the
# same CA files; BASE_REFRESH=1 makes it anew)
set -euo pipefail

name=docker.io/library/debian:bookworm-slim
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# What the base depends on besides Debian's archive: the CA files and the day.
cas=/usr/local/share/ca-certificates
stamp="$(date -u +%Y-%m-%d) $(find "$cas" -type f -name '*.crt' -print0 2>/dev/null | sort -z | xargs -0r cat | sha256sum | cut -c1-16)"
have=$(buildah inspect --type image --format '{{index .ImageAnnotations "org.cosigner.ci-base"}}' "$name" 2>/dev/null || true)
if [ "${BASE_REFRESH:-0}" != 1 ] && [ "$have" = "$stamp" ]; then
  echo "base: $name from today's mmdebstrap is in the store; reusing it"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
hooks=()
if compgen -G "$cas/*.crt" >/dev/null; then
  mkdir -p "$work/ca"
  cp "$cas"/*.crt "$work/ca/"
  hooks+=(--customize-hook="mkdir -p \"\$1$cas\"" --customize-hook="copy-in $work/ca/. $cas")
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$work/pip.conf"
  hooks+=(--customize-hook="upload $work/pip.conf /etc/pip.conf")
fi

echo "base: mmdebstrap bookworm (minbase) from $mirror"
# The merged-usr hook lays out /usr as Debian's images have it without installing usrmerge
# (and the Perl it needs).
mmdebstrap --variant=minbase --format=tar --quiet \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log' \
  "${hooks[@]}" \
  bookworm "$work/rootfs.tar" \
  "deb $mirror bookworm main" \
  "deb $mirror bookworm-updates main" \
  "deb $security bookworm-security main" >"$work/mmdebstrap.log" 2>&1 || {
  tail -n 40 "$work/mmdebstrap.log"; echo "base: mmdebstrap failed (the end of its output is above)"; exit 1; }

ctr=$(buildah from --pull=never scratch)
buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
buildah config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --annotation "org.cosigner.ci-base=$stamp" "$ctr"
buildah commit --quiet --rm "$ctr" "$name" >/dev/null
echo "base: $name made ($(du -h "$work/rootfs.tar" | cut -f1) rootfs)"
