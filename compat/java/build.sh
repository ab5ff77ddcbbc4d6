#!/usr/bin/env bash
# Builds compat/java (Kafka's Java client driven by the compatibility suite) with Maven, only
# when pom.xml or a source changed since the last build: the stamp target/.built holds the
# SHA-256 over pom.xml and the files under src (in byte order of their paths), which
# compat/java_test.go checks before it starts the JVM. Maven resolves kafka-clients and the
# build's plugins (all at fixed versions) from Maven Central into ~/.m2 once; rebuilds after
# that need no network.
set -euo pipefail
cd "$(dirname "$0")"
hash=$(cat pom.xml $(find src -type f | LC_ALL=C sort) | sha256sum | cut -d' ' -f1)
if [ "$(cat target/.built 2>/dev/null)" != "$hash" ]; then
  # jansi.noreset: Debian's Maven 3.8 prints colour resets even with -q -B.
  MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -q -B package
  echo "$hash" > target/.built
fi
