#!/bin/bash
# franz-go's own integration suite (pkg/kgo, from the module version in
# go.mod, unchanged) against Hermes' Kafka listener: a single node, or
# with NODES=3 a 3-node cluster (replication factor 3).
#
#   scripts/kafka-compat.sh            # or: make kafka-compat
#   NODES=3 scripts/kafka-compat.sh
#   KGO_RUN='TestGroupETL' scripts/kafka-compat.sh   # a subset
#
# Hermes is built, started on free loopback ports with a fresh data
# directory, and stopped by PID when the suite ends.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-1}
RECORDS=${KGO_TEST_RECORDS:-20000}
GO=${GO:-go}
export GOFLAGS=-tags=pebblegozstd
work=$(mktemp -d /tmp/hermes-kafka-compat.XXXX)
pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap stop EXIT

echo "== build hermes"
$GO build -o "$work/hermes" ./cmd/hermes
version=$($GO list -m -f '{{.Version}}' github.com/twmb/franz-go)
echo "== fetch franz-go $version"
$GO mod download github.com/twmb/franz-go
dir="$($GO env GOMODCACHE)/github.com/twmb/franz-go@$version"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
peers="" seeds=""
declare -a raft kafka grpc http
for i in $(seq 1 "$NODES"); do
	raft[$i]=$(port); kafka[$i]=$(port); grpc[$i]=$(port); http[$i]=$(port)
	peers="$peers${peers:+,}$i=127.0.0.1:${raft[$i]}"
	seeds="$seeds${seeds:+,}127.0.0.1:${kafka[$i]}"
done
echo "== start $NODES hermes node(s); Kafka at $seeds"
for i in $(seq 1 "$NODES"); do
	args=(serve --data-dir "$work/d$i" --node-id "$i" --raft-addr "127.0.0.1:${raft[$i]}"
		--grpc-addr "127.0.0.1:${grpc[$i]}" --http-addr "127.0.0.1:${http[$i]}" --kafka-addr "127.0.0.1:${kafka[$i]}" --log-level warn)
	if [ "$NODES" -gt 1 ]; then args+=(--peers "$peers"); fi
	"$work/hermes" "${args[@]}" > "$work/log$i" 2>&1 &
	pids+=($!)
done
for i in $(seq 1 "$NODES"); do
	for _ in $(seq 1 300); do
		curl -sf "http://127.0.0.1:${http[$i]}/readyz" > /dev/null && break
		sleep 0.1
	done
done
# The cluster serves once its metadata group has a leader: create (and
# delete) a topic, retrying while it elects.
for _ in $(seq 1 150); do
	"$work/hermes" topic create kafka-compat-ready --if-not-exists --addr "127.0.0.1:${grpc[1]}" > /dev/null 2>&1 && break
	sleep 0.2
done
"$work/hermes" topic delete kafka-compat-ready --addr "127.0.0.1:${grpc[1]}" > /dev/null 2>&1 || true
echo "== franz-go pkg/kgo suite (KGO_TEST_RF=$NODES, $RECORDS records per test)"
rf=$NODES
if [ "$rf" -gt 3 ]; then rf=3; fi
status=0
(cd "$dir" && KGO_SEEDS="$seeds" KGO_TEST_RF=$rf KGO_TEST_RECORDS=$RECORDS KGO_LOG_LEVEL=none \
	$GO test -count=1 -timeout 20m ${KGO_RUN:+-run "$KGO_RUN"} ./pkg/kgo/ 2>&1 | tee "$work/kgo.log" | grep -E '^(--- FAIL|FAIL|ok|panic)') || status=1
if grep -q '^--- FAIL\|^FAIL' "$work/kgo.log"; then
	status=1
	echo "== failures"; grep -A5 '^--- FAIL' "$work/kgo.log" | head -60
	echo "== hermes log (node 1, last lines)"; tail -20 "$work/log1"
fi
exit $status
