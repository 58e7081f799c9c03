# shellcheck shell=bash
# Kafka versions (KAFKA_VERSION): each version's jars, fetched from Maven Central with maven into
# tmp/kafka/libs/VERSION/ (`bin/kafka fetch`; brokers of several versions run side by side), Kafka's own
# tools run from them (StorageTool, TopicCommand, ConfigCommand, FeatureCommand), and the version a running
# broker runs.

KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
SCALA_VERSION="2.13"
SLF4J_VERSION="1.7.36"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
LIBS="$BASE/libs/$KAFKA_VERSION" # one directory a version: brokers of several versions run side by side
MARKER="$LIBS/.complete"
MARKER_CONTENT="kafka_${SCALA_VERSION}:${KAFKA_VERSION} kafka-tools:${KAFKA_VERSION} slf4j-reload4j:${SLF4J_VERSION}"
TOOLS_LOG4J="$BASE/tools-log4j.properties"

# --------------------------------------------------------------------------------------- fetch
libs_complete() { [[ -f "$MARKER" && "$(<"$MARKER")" == "$MARKER_CONTENT" ]]; }

cmd_fetch() {
  if libs_complete; then
    say "jars present ($KAFKA_VERSION, $(find "$LIBS" -name '*.jar' | wc -l) jars in ${LIBS#"$ROOT"/})"
    return 0
  fi
  lock "$BASE/.fetch.lock"
  if libs_complete; then unlock; say "jars present ($KAFKA_VERSION)"; return 0; fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found (run bin/setup, or apt-get install maven)"
  need_java
  say "fetching kafka_${SCALA_VERSION}:${KAFKA_VERSION} + deps from Maven Central into ${LIBS#"$ROOT"/}"
  local work="$BASE/fetch" start=$SECONDS
  rm -rf "$work"
  mkdir -p "$work"
  # kafka-tools provides TopicCommand/ConsoleConsumer; connect-runtime (jetty, jersey, ...) is
  # only needed by connect-related tools and would add ~10 MB, so it is excluded.
  cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.sluice</groupId>
  <artifactId>kafka-dev-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${SCALA_VERSION}</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>${KAFKA_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion>
        <exclusion><groupId>com.fasterxml.jackson.jaxrs</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>${SLF4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
EOF
  if ! (cd "$work" && mvn -B -q "$DEPENDENCY_PLUGIN:copy-dependencies" \
    -DoutputDirectory="$work/libs" -DincludeScope=runtime -Dmdep.useRepositoryLayout=false \
    >"$work/mvn.log" 2>&1 </dev/null); then
    prefix <"$work/mvn.log" >&2
    die "maven failed to fetch the Kafka jars (see above)"
  fi
  ls "$work/libs/kafka_${SCALA_VERSION}"-*.jar >/dev/null 2>&1 || die "maven finished but kafka_${SCALA_VERSION} jar is missing"
  rm -rf "$LIBS"
  mkdir -p "$(dirname "$LIBS")"
  mv "$work/libs" "$LIBS"
  cp "$work/pom.xml" "$BASE/pom.xml"
  rm -rf "$work"
  printf '%s\n' "$MARKER_CONTENT" >"$MARKER"
  unlock
  say "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars ($(du -sh "$LIBS" | cut -f1)) in $((SECONDS - start))s"
}

# Pick the first class (of several candidates across Kafka versions) present in the jars.
# Jar central directories store entry names uncompressed, so a plain byte grep finds them.
find_class() {
  local c
  for c in "$@"; do
    if grep -qaF "${c//.//}.class" "$LIBS"/*.jar 2>/dev/null; then echo "$c"; return 0; fi
  done
  die "none of these classes found in ${LIBS#"$ROOT"/}: $*"
}

write_tools_log4j() {
  cat >"$TOOLS_LOG4J" <<'EOF'
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
}

run_tool() { # run_tool CLASS ARGS... (kafka CLI tool, quiet logging)
  need_java
  write_tools_log4j
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$TOOLS_LOG4J" -cp "$LIBS/*" "$@"
}

running_version() { # running_version PID: the KAFKA_VERSION whose jars the broker runs (a rolling upgrade mixes them)
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | sed -n 's|.*/libs/\([^/]*\)/\*$|\1|p' | head -n 1
}
