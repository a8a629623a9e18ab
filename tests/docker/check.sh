#!/usr/bin/env bash
# Reads docker/Dockerfile for what the tests cannot run on a machine without docker
# (issue 17, packaging): the data volume exists and is owned by the server's user before
# VOLUME declares it (a new named volume starts as a copy of it); the HEALTHCHECK asks the
# port HAMEL_PORT says, read when the check runs (shell form); the CLI (hamel and the
# hamel-remote that `hamel remote` execs) is built and copied beside the server; the build
# stage has every -dev package the Makefile's pkg-config lists need. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
f=docker/Dockerfile
pass=0 fail=0
check() { # description, command...
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}
run_stage=$(sed -n '/^FROM .* AS run/,$p' "$f")
build_stage=$(sed -n '/^FROM .* AS build/,/^FROM .* AS run/p' "$f")
volume=$(sed -n 's/^VOLUME \["\([^"]*\)"\]/\1/p' "$f")
user=$(sed -n 's/^USER \([a-z0-9_-]*\)/\1/p' "$f")

check "one VOLUME" test -n "$volume"
check "the server runs as a user, not root" test -n "$user" -a "$user" != root
check "the volume's directory is made before VOLUME" \
  bash -c "grep -n 'mkdir -p $volume' '$f' | head -1 | cut -d: -f1 | { read -r a; b=\$(grep -n '^VOLUME' '$f' | cut -d: -f1); [ \"\$a\" -lt \"\$b\" ]; }"
check "the volume's directory is owned by $user" grep -Eq "chown $user(:$user)? $volume" <<<"$run_stage"
check "HAMEL_DATA is on the volume" grep -Eq "HAMEL_DATA=$volume( |\$)" <<<"$run_stage"
check "HEALTHCHECK in shell form reads \$HAMEL_PORT" \
  grep -Eq '^HEALTHCHECK .*CMD curl [^[]*\$\{?HAMEL_PORT' "$f"
check "HEALTHCHECK names no fixed port" bash -c "! grep -E '^HEALTHCHECK' '$f' | grep -Eq ':[0-9]+/'"
for bin in hamel-server hamel hamel-remote; do
  check "build/$bin is built" grep -Eq "make .*build/$bin( |\$)" <<<"$build_stage"
  check "build/$bin is copied into the image" grep -Eq "^COPY --from=build .*/build/$bin( |\$)" <<<"$run_stage"
done
check "hamel and hamel-remote land in the same directory" \
  grep -Eq '^COPY --from=build .*/build/hamel /src/build/hamel-remote /usr/local/bin/' <<<"$run_stage"
# every pkg-config package of the Makefile has its -dev package in the build stage
declare -A dev=([gsl]=libgsl-dev [jansson]=libjansson-dev [libcrypto]=libssl-dev [libmicrohttpd]=libmicrohttpd-dev
  [hiredis]=libhiredis-dev [zlib]=zlib1g-dev [libcurl]=libcurl4-openssl-dev)
for p in $(sed -n 's/^\(ENGINE\|SERVER\|CLIENT\)_PKGS := //p' Makefile); do
  check "the build stage installs ${dev[$p]:-a -dev package for $p}" grep -q "${dev[$p]:-no-such-package}" <<<"$build_stage"
done
echo "docker: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
