#!/usr/bin/env bash
# Start or stop NATS (JetStream on) on loopback, for `hermes bench -target nats`.
#
#   scripts/peers/nats.sh start [1|3]   # single node (default) or a 3-node cluster
#   scripts/peers/nats.sh stop
#   scripts/peers/nats.sh status
#
# Clients connect to nats://127.0.0.1:4222 (3 nodes: also :4223, :4224).
# State lives in $NATS_DIR (default /tmp/hermes-peers/nats); each server is
# stopped by the PID in its pid file, never by name.
#
# Durability as configured: JetStream file storage, which acknowledges a
# publish once the stream leader (and, replicated, a quorum) stored it,
# and fsyncs periodically (every 2 minutes by default), not per message.
set -euo pipefail

DIR=${NATS_DIR:-/tmp/hermes-peers/nats}
cmd=${1:-}
nodes=${2:-1}

install() {
	command -v nats-server >/dev/null && return
	echo "installing nats-server from the distribution's packages"
	apt-get install -y nats-server >/dev/null || { apt-get update >/dev/null && apt-get install -y nats-server >/dev/null; }
}

conf() { # conf INDEX NODES
	local i=$1 n=$2
	cat <<CONF
server_name: n$i
listen: 127.0.0.1:$((4221 + i))
http: 127.0.0.1:$((8221 + i))
jetstream {
  store_dir: "$DIR/n$i/data"
  max_memory_store: 1G
  max_file_store: 20G
}
CONF
	if [ "$n" -gt 1 ]; then
		local routes=""
		for j in $(seq 1 "$n"); do routes="$routes${routes:+,} \"nats-route://127.0.0.1:$((6221 + j))\""; done
		cat <<CONF
cluster {
  name: hermes-bench
  listen: 127.0.0.1:$((6221 + i))
  routes: [$routes ]
}
CONF
	fi
}

start() {
	install
	mkdir -p "$DIR"
	for i in $(seq 1 "$nodes"); do
		mkdir -p "$DIR/n$i/data"
		if [ -f "$DIR/n$i/pid" ] && kill -0 "$(cat "$DIR/n$i/pid")" 2>/dev/null; then
			echo "n$i already running (pid $(cat "$DIR/n$i/pid"))"
			continue
		fi
		conf "$i" "$nodes" >"$DIR/n$i/nats.conf"
		nats-server -c "$DIR/n$i/nats.conf" >"$DIR/n$i/nats.log" 2>&1 &
		echo $! >"$DIR/n$i/pid"
	done
	for i in $(seq 1 "$nodes"); do
		for _ in $(seq 1 100); do
			curl -fsS "http://127.0.0.1:$((8221 + i))/healthz?js-enabled-only=true" >/dev/null 2>&1 && break
			sleep 0.1
		done
		echo "n$i: pid $(cat "$DIR/n$i/pid"), nats://127.0.0.1:$((4221 + i)), log $DIR/n$i/nats.log"
	done
}

stop() {
	for f in "$DIR"/n*/pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
			echo "stopped pid $pid"
		fi
		rm -f "$f"
	done
}

status() {
	for f in "$DIR"/n*/pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then echo "$(dirname "$f"): running, pid $pid"; else echo "$(dirname "$f"): not running"; fi
	done
}

case "$cmd" in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start [1|3] | stop | status" >&2; exit 2 ;;
esac
