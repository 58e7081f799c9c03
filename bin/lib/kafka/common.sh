# shellcheck shell=bash
# bin/kafka's common ground, sourced first: where everything lives (tmp/kafka/ under the project root,
# listeners on 127.0.0.1), the "kafka: ..." output and the usage text, the lock that serialises concurrent
# invocations, and the port and process checks every other part uses.

HOST="127.0.0.1"
# The physical path: a broker is known by the path of its config in its command line, and a checkout
# whose tmp/kafka links to another's must see that one's brokers as its own (not "not running", with
# their data then removed by stop).
# shellcheck disable=SC2034 # the files sourced after this one read it
BASE="$(realpath -m "$ROOT/tmp/kafka")"

say() { printf 'kafka: %s\n' "$*"; }
err() { printf 'kafka: %s\n' "$*" >&2; }
die() { err "$*"; exit 1; }
prefix() { sed -u 's/^/kafka: /'; }

usage() {
  cat <<EOF | prefix >&2
usage: bin/kafka start|stop|status|fetch|topic NAME [PARTITIONS]|scram-user NAME PASSWORD
       bin/kafka cluster fetch|start|stop|status|kill N|restart N|topic NAME [PARTITIONS]|describe [TOPIC]|leader TOPIC PARTITION|wait-isr|features ARGS
env: KAFKA_PORT=$KAFKA_PORT KAFKA_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT KAFKA_SASL_PORT=$KAFKA_SASL_PORT KAFKA_VERSION=$KAFKA_VERSION
EOF
  exit 2
}

# Serialise concurrent invocations (fd 9 = lock; never leak it into the broker process).
lock() { # lock FILE
  mkdir -p "$(dirname "$1")"
  exec 9>"$1"
  flock -w 300 9 || die "timed out waiting for lock $1"
}
unlock() { exec 9>&-; }

port_open() { # port_open PORT -> 0 if something accepts TCP connections on 127.0.0.1:PORT
  # shellcheck disable=SC2016 # $0 and $1: the inner shell's arguments
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$HOST" "$1" 2>/dev/null
}

need_java() {
  command -v java >/dev/null 2>&1 || die "java not found (run bin/setup, or apt-get install openjdk-17-jre-headless)"
}

wait_exit() { # wait_exit PID...: each one gone within 30s of a TERM, or KILLed (then KILLED=1)
  local pid i
  KILLED=0
  for pid in "$@"; do
    for ((i = 0; i < 150; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      err "pid $pid still alive after 30s, sending KILL"
      KILLED=1
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  done
}
