#!/usr/bin/env bash
# Resolves Temporal's Java time-skipping test server (io.temporal:temporal-test-server) and
# its runtime dependencies from Maven Central into .tools/temporal-test-server, and writes
# .tools/bin/temporal-test-server, a wrapper the workflow tests start as an 'existing-path'
# executable: `temporal-test-server <port> [--enable-time-skipping]`. The native binary the
# SDK would download at test time is not on Maven Central; the jar is, and runs on JDK 17.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${TEMPORAL_TEST_SERVER_VERSION:-1.38.0}"
dir="$here/.tools/temporal-test-server/$version"
wrapper="$here/.tools/bin/temporal-test-server"

if [[ -x "$wrapper" ]] && grep -q "/$version/" "$wrapper" && compgen -G "$dir/lib/temporal-test-server-*.jar" >/dev/null; then
  echo "temporal test server $version already in $dir"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: install a JDK (>= 11) and maven" >&2; exit 1; }
done
mkdir -p "$dir/lib" "$(dirname "$wrapper")"
cat >"$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>temporal-test-server-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>io.temporal</groupId><artifactId>temporal-test-server</artifactId><version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
echo "resolving io.temporal:temporal-test-server:$version with $(mvn -B -Dstyle.color=never -v 2>/dev/null | head -1)"
mvn -q -B -Dstyle.color=never -f "$dir/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir/lib" -DincludeScope=runtime
# Serial GC and tiered compilation stopped at C1 keep the JVM's start short on a small
# machine; the server holds a few workflows in memory, so a small heap is enough. The
# wrapper finds the jars beside itself, so the checkout may move.
cat >"$wrapper" <<'WRAP'
#!/usr/bin/env bash
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../temporal-test-server/VERSION" && pwd)"
cds=()
[[ -f "$dir/classes.jsa" ]] && cds=(-XX:SharedArchiveFile="$dir/classes.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
# SLF4J's three-line notice that no logging backend is bound says nothing about the server.
exec java "${cds[@]}" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx256m -cp "$dir/lib/*" \
  io.temporal.testserver.TestServer "$@" 2> >(grep -v '^SLF4J: ' >&2)
WRAP
sed -i "s/VERSION/$version/" "$wrapper"
chmod +x "$wrapper"

# A class-data-sharing archive of what the server loads while starting roughly halves its
# start-up time (measured on 2 busy cores: 0.8-1.6 s instead of 2.8-3.2 s). It is written
# when a JVM started with -XX:ArchiveClassesAtExit exits; a JVM of another build ignores it.
rm -f "$dir/classes.jsa"
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
java -XX:ArchiveClassesAtExit="$dir/classes.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -cp "$dir/lib/*" io.temporal.testserver.TestServer "$port" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
kill "$pid" 2>/dev/null || true
wait "$pid" || true
[[ -f "$dir/classes.jsa" ]] || echo "no class-data-sharing archive written; the server starts without it" >&2
echo "temporal test server $version: $wrapper"
