#!/usr/bin/env bash
# Start or stop Apache Kafka 3.9 in KRaft mode on loopback, for
# `hermes bench -target kafka`.
#
#   scripts/peers/kafka.sh start [1|3]   # single node (default) or a 3-node cluster
#   scripts/peers/kafka.sh stop
#   scripts/peers/kafka.sh status
#
# Kafka's jars come from Maven Central through Maven (`mvn
# dependency:copy-dependencies` on a generated pom: Maven knows its own
# repository); Java 17 runs them. Brokers listen on 127.0.0.1:19092 (3
# nodes: also :19094, :19096; 9092 is Hermes' own Kafka listener), controllers on the next port up. State lives
# in $KAFKA_DIR (default /tmp/hermes-peers/kafka); each process is stopped
# by the PID in its pid file, never by name.
#
# Durability as configured: the Kafka defaults. With acks=all a produce is
# acknowledged once every in-sync replica has the record in its page
# cache; Kafka does not fsync per write (log.flush.interval.messages is
# unlimited), durability rests on replication.
set -euo pipefail

VERSION=${KAFKA_VERSION:-3.9.1}
DIR=${KAFKA_DIR:-/tmp/hermes-peers/kafka}
HEAP=${KAFKA_HEAP:-1G}
cmd=${1:-}
nodes=${2:-1}

fetch() {
	[ -f "$DIR/libs/.complete-$VERSION" ] && return
	command -v mvn >/dev/null || { echo "kafka.sh needs Maven (apt-get install -y maven) and Java 17" >&2; exit 1; }
	mkdir -p "$DIR/libs"
	cat >"$DIR/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>hermes.bench</groupId>
  <artifactId>kafka-peer</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
POM
	echo "fetching Kafka $VERSION jars with Maven into $DIR/libs"
	mvn -q -B -Dstyle.color=never -f "$DIR/pom.xml" dependency:copy-dependencies -DoutputDirectory="$DIR/libs" -DincludeScope=runtime
	touch "$DIR/libs/.complete-$VERSION"
}

# props INDEX NODES: the server.properties of node INDEX.
props() {
	local i=$1 n=$2 voters=""
	for j in $(seq 1 "$n"); do voters="$voters${voters:+,}$j@127.0.0.1:$((19091 + 2 * j))"; done
	local rf=$((n < 3 ? 1 : 3)) isr=$((n < 3 ? 1 : 2))
	cat <<PROPS
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$((19090 + 2 * i)),CONTROLLER://127.0.0.1:$((19091 + 2 * i))
advertised.listeners=PLAINTEXT://127.0.0.1:$((19090 + 2 * i))
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$DIR/n$i/data
num.partitions=1
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
min.insync.replicas=$isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS
}

log4j() {
	cat <<L4J
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$DIR/n$1/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
L4J
}

java_run() { # java_run NODE MAINCLASS ARGS... (replaces the calling shell: run it in a subshell or with &)
	local i=$1
	shift
	exec java -Xms"$HEAP" -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
		-Dlog4j.configuration="file:$DIR/n$i/log4j.properties" -cp "$DIR/libs/*" "$@"
}

start() {
	command -v java >/dev/null || { echo "kafka.sh needs Java 17" >&2; exit 1; }
	fetch
	local cluster
	cluster=$(cat "$DIR/cluster-id" 2>/dev/null || true)
	if [ -z "$cluster" ]; then
		cluster=$(java -cp "$DIR/libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
		echo "$cluster" >"$DIR/cluster-id"
	fi
	for i in $(seq 1 "$nodes"); do
		mkdir -p "$DIR/n$i"
		if [ -f "$DIR/n$i/pid" ] && kill -0 "$(cat "$DIR/n$i/pid")" 2>/dev/null; then
			echo "n$i already running (pid $(cat "$DIR/n$i/pid"))"
			continue
		fi
		props "$i" "$nodes" >"$DIR/n$i/server.properties"
		log4j "$i" >"$DIR/n$i/log4j.properties"
		if [ ! -f "$DIR/n$i/data/meta.properties" ]; then
			(java_run "$i" kafka.tools.StorageTool format -t "$cluster" -c "$DIR/n$i/server.properties") >"$DIR/n$i/format.log" 2>&1
		fi
		java_run "$i" kafka.Kafka "$DIR/n$i/server.properties" >"$DIR/n$i/stdout.log" 2>&1 &
		echo $! >"$DIR/n$i/pid"
	done
	for i in $(seq 1 "$nodes"); do
		local port=$((19090 + 2 * i))
		for _ in $(seq 1 300); do
			(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
			kill -0 "$(cat "$DIR/n$i/pid")" 2>/dev/null || { echo "n$i exited; see $DIR/n$i/" >&2; exit 1; }
			sleep 0.2
		done
		echo "n$i: pid $(cat "$DIR/n$i/pid"), 127.0.0.1:$port, logs in $DIR/n$i/"
	done
}

stop() {
	for f in "$DIR"/n*/pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
			echo "stopped pid $pid"
		fi
		rm -f "$f"
		# A deleted topic's segments stay on disk, renamed *-delete,
		# until the broker removes them a minute later or at its next
		# start: a stopped broker would keep them (a minute of benchmark
		# load on three brokers left 25 GB).
		rm -rf "$(dirname "$f")"/data/*-delete
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
