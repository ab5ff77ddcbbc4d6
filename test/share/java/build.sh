#!/usr/bin/env bash
# Builds test/share/java with Maven (offline once kafka-clients and the plugins are in ~/.m2),
# only when pom.xml or a source changed since the last build: target/.built holds the SHA-256
# over pom.xml and the files under src.
set -euo pipefail
cd "$(dirname "$0")"
hash=$(cat pom.xml $(find src -type f | LC_ALL=C sort) | sha256sum | cut -d' ' -f1)
if [ "$(cat target/.built 2>/dev/null)" != "$hash" ]; then
  MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -q -B package
  echo "$hash" > target/.built
fi
