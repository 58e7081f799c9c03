# shellcheck shell=bash
# Toxiproxy in front of the cluster's CLIENT listeners: the pinned toxiproxy-server (`bin/kafka cluster
# fetch` builds it with go install), its proxies kafka-1..3, and starting it under a supervisor and stopping it.

# Shopify's toxiproxy, pinned, built with `go install` through the Go module proxy into a cache shared
# by every clone (like the jars, fetched once). Without Go: download toxiproxy-server-linux-amd64 of the
# same release from github.com/Shopify/toxiproxy/releases and point TOXIPROXY_SERVER at it.
TOXIPROXY_VERSION="2.12.0"
TOXIPROXY_PORT="${TOXIPROXY_PORT:-8474}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/sluice"
TOXIPROXY_BIN="$CACHE/toxiproxy-$TOXIPROXY_VERSION/toxiproxy-server"
TOXI_DIR="$BASE/toxiproxy"
[[ "$TOXIPROXY_PORT" == 8474 ]] || TOXI_DIR="$BASE/toxiproxy-$TOXIPROXY_PORT"
TOXI_CONFIG="$TOXI_DIR/toxiproxy.json"
TOXI_PIDFILE="$TOXI_DIR/toxiproxy.pid"
TOXI_LOG="$TOXI_DIR/toxiproxy.log"

toxiproxy_server() { # prints the toxiproxy-server to run, or returns 1
  if [[ -n "${TOXIPROXY_SERVER:-}" ]]; then echo "$TOXIPROXY_SERVER"; return 0; fi
  [[ -x "$TOXIPROXY_BIN" ]] && { echo "$TOXIPROXY_BIN"; return 0; }
  command -v toxiproxy-server 2>/dev/null
}

find_go() { command -v go 2>/dev/null || { [[ -x /usr/local/go/bin/go ]] && echo /usr/local/go/bin/go; }; }

cmd_cluster_fetch() {
  local go gobin start=$SECONDS
  if toxiproxy_server >/dev/null; then say "toxiproxy present ($(toxiproxy_server))"; return 0; fi
  go="$(find_go)" || die "toxiproxy-server not found and no Go to build it: install Go (https://go.dev/dl), or download toxiproxy-server-linux-amd64 ${TOXIPROXY_VERSION} from github.com/Shopify/toxiproxy/releases and set TOXIPROXY_SERVER=/path/to/it"
  lock "$CACHE/.toxiproxy.lock"
  if toxiproxy_server >/dev/null; then unlock; say "toxiproxy present"; return 0; fi
  gobin="$(dirname "$TOXIPROXY_BIN")/.build"
  rm -rf "$gobin"
  mkdir -p "$gobin"
  say "building toxiproxy v${TOXIPROXY_VERSION} (go install through the Go module proxy)"
  # Module and build caches under the cache dir, never in the clone; -mod=mod: no vendor directory.
  if ! GOPATH="$CACHE/go" GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOBIN="$gobin" GOFLAGS=-mod=mod \
    "$go" install "github.com/Shopify/toxiproxy/v2/cmd/server@v${TOXIPROXY_VERSION}" >"$gobin/go.log" 2>&1 </dev/null; then
    prefix <"$gobin/go.log" >&2
    die "go install of toxiproxy failed (see above)"
  fi
  mv "$gobin/server" "$TOXIPROXY_BIN"
  rm -rf "$gobin"
  unlock
  say "toxiproxy v${TOXIPROXY_VERSION} built in $((SECONDS - start))s: $TOXIPROXY_BIN"
}

is_our_toxiproxy() { # is_our_toxiproxy PID -> a live toxiproxy-server started with our config
  local cmd
  [[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null || return 1
  cmd="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmd" == *"-config $TOXI_CONFIG"* ]]
}

toxiproxy_pid() {
  local pid
  [[ -f "$TOXI_PIDFILE" ]] && pid="$(<"$TOXI_PIDFILE")" && is_our_toxiproxy "$pid" && { echo "$pid"; return 0; }
  return 1
}

write_toxiproxy_config() { # proxy kafka-N: its proxy port -> node N's CLIENT listener
  local n sep=""
  mkdir -p "$TOXI_DIR"
  {
    echo "["
    for n in "${NODES[@]}"; do
      printf '%s  {"name": "kafka-%d", "listen": "%s:%d", "upstream": "%s:%d", "enabled": true}\n' \
        "$sep" "$n" "$HOST" $((CLUSTER_PROXY_PORT + n - 1)) "$HOST" $((CLUSTER_PORT + n - 1))
      sep=","
    done
    echo "]"
  } >"$TOXI_CONFIG"
}

toxiproxy_ready() {
  local n
  port_open "$TOXIPROXY_PORT" || return 1
  for n in "${NODES[@]}"; do port_open $((CLUSTER_PROXY_PORT + n - 1)) || return 1; done
}

toxiproxy_start() {
  local server pid i
  if pid="$(toxiproxy_pid)"; then say "toxiproxy already running (pid $pid) on ${HOST}:${TOXIPROXY_PORT}"; return 0; fi
  server="$(toxiproxy_server)" || die "toxiproxy-server not found (bin/kafka cluster fetch)"
  port_open "$TOXIPROXY_PORT" && die "${HOST}:${TOXIPROXY_PORT} is already in use by another process; stop it or set TOXIPROXY_PORT"
  write_toxiproxy_config
  [[ -f "$TOXI_LOG" ]] && mv -f "$TOXI_LOG" "$TOXI_LOG.1"
  # Like launch: own session, no inherited fds (the lock on fd 9), the pid written by the process itself.
  # Unlike a node, under a supervisor that starts toxiproxy-server again if it exits: 2.12 has races
  # between toxic changes and connections closing, and a Go panic in one of them ends the whole server,
  # which took the proxies (and so the cluster) away from every spec after it in CI. The restarted server
  # reads the same config: the same proxies, enabled, no toxics. Each restart is logged with the exit
  # status ("toxiproxy-server exited"), the panic above it; bin/test-cluster reports them. The pid file
  # names the supervisor; SIGTERM stops both.
  # shellcheck disable=SC2016
  setsid nohup bash -c 'for fd in /proc/$$/fd/*; do fd=${fd##*/}
      if ((fd > 2)) && [[ -e /proc/$$/fd/$fd ]]; then eval "exec $fd>&-"; fi; done
    echo $$ >"$0"
    trap "kill -TERM \$child 2>/dev/null; wait \$child; exit 0" TERM INT
    while :; do
      "$@" & child=$!
      wait $child; status=$?
      printf "{\"level\":\"error\",\"time\":\"%s\",\"message\":\"toxiproxy-server exited (status %d), starting it again\"}\n" \
        "$(date -u +%FT%TZ)" "$status"
      sleep 0.2
    done' "$TOXI_PIDFILE" \
    "$server" -host "$HOST" -port "$TOXIPROXY_PORT" -config "$TOXI_CONFIG" </dev/null >>"$TOXI_LOG" 2>&1 9>&- &
  for ((i = 0; i < 100; i++)); do
    pid="$(cat "$TOXI_PIDFILE" 2>/dev/null)" || true
    if [[ -n "$pid" ]] && toxiproxy_ready; then
      say "toxiproxy pid $pid: API ${HOST}:${TOXIPROXY_PORT}, proxies kafka-1..3 on $(cluster_bootstrap)"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$TOXI_LOG" 2>/dev/null | prefix >&2
  die "toxiproxy did not come up within 10s (log: ${TOXI_LOG#"$ROOT"/})"
}

toxiproxy_stop() {
  local pid
  pid="$(toxiproxy_pid)" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_exit "$pid"
  kill -KILL -- "-$pid" 2>/dev/null || true # the server, if its supervisor had to be KILLed
  rm -f "$TOXI_PIDFILE"
  say "toxiproxy stopped (pid $pid)"
}
