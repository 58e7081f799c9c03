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

# --------------------------------------------------------------------------------------- class-data sharing
# A JVM that starts maps the classes an earlier JVM of its kind (the broker, or one tool) loaded from these jars,
# instead of loading and verifying them again (JDK 13+'s dynamic archives): a broker's start took 6-7 s instead
# of 9 s here, most of it CPU, and CI starts brokers by the dozen (the own-broker specs, the cluster's restarts,
# the rolling upgrade) beside specs that want the CPU. Each kind's archive lies beside its version's jars (a new
# fetch drops it). The first JVM of a kind writes it when it exits, into a file of its own that becomes the
# archive only once that JVM exited by itself: one cut short (a KILL while it wrote) makes the JVM that maps it
# die of SIGBUS. A JVM that cannot use an archive (another JDK, other jars) runs without it, silently: callers
# read the tools' output.
CDS_DIR="$LIBS/cds"
CDS_QUIET=(-Xlog:cds=off -Xlog:cds+dynamic=off)

cds_options() { # cds_options KIND FILE: into CDS, the JVM options that map KIND's archive, or else write one to FILE
  if [[ -s "$CDS_DIR/$1.jsa" ]]; then
    CDS=(-XX:SharedArchiveFile="$CDS_DIR/$1.jsa" "${CDS_QUIET[@]}")
  else
    mkdir -p "$CDS_DIR"
    rm -f "$2"
    CDS=(-XX:ArchiveClassesAtExit="$2" "${CDS_QUIET[@]}")
  fi
}

# keep_archive KIND FILE [VERSION]: FILE, written by a JVM of KIND that exited by itself and ran VERSION's jars (by
# default KAFKA_VERSION's: a rolling upgrade stops one version's broker to start the next), becomes KIND's archive.
keep_archive() {
  local dir="$BASE/libs/${3:-$KAFKA_VERSION}/cds"
  [[ -s "$2" ]] || return 0
  if [[ -s "$dir/$1.jsa" || ! -d "$dir" ]]; then rm -f "$2"; else mv -f "$2" "$dir/$1.jsa"; fi # a rename: never half written
}

run_tool() { # run_tool CLASS ARGS... (kafka CLI tool, quiet logging)
  local kind="tool-${1##*.}" status=0
  local written="$CDS_DIR/$kind.$BASHPID.jsa" # two bin/kafka at once write files of their own
  need_java
  write_tools_log4j
  cds_options "$kind" "$written"
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true "${CDS[@]}" \
    -Dlog4j.configuration="file:$TOOLS_LOG4J" -cp "$LIBS/*" "$@" || status=$?
  if ((status == 0)); then keep_archive "$kind" "$written"; else rm -f "$written"; fi
  return $status
}

running_version() { # running_version PID: the KAFKA_VERSION whose jars the broker runs (a rolling upgrade mixes them)
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | sed -n 's|.*/libs/\([^/]*\)/\*$|\1|p' | head -n 1
}
