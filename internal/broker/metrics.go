package broker

import "github.com/prometheus/client_golang/prometheus"

// metrics are the broker's Prometheus series. Per-topic series are deleted
// with their topic.
type metrics struct {
	publishedRecords *prometheus.CounterVec // topic, mode
	publishedBytes   *prometheus.CounterVec // topic, mode
	consumedRecords  *prometheus.CounterVec // topic
	consumedBytes    *prometheus.CounterVec // topic
	publishLatency   *prometheus.HistogramVec
	rejected         *prometheus.CounterVec // reason
	fsyncLatency     prometheus.Histogram
	commitRecords    prometheus.Histogram
	stages           [4]prometheus.Observer // queue, persist, commit, apply
	stageVec         *prometheus.HistogramVec
	consumerLag      *prometheus.GaugeVec   // group, topic, partition
	ringEvicted      *prometheus.CounterVec // topic
	ringMissed       *prometheus.CounterVec // topic
	deadLettered     *prometheus.CounterVec // group, topic
	redelivered      *prometheus.CounterVec // group, topic
	subscriptions    prometheus.Gauge
	duplicates       *prometheus.CounterVec // topic
	corrupt          *prometheus.CounterVec // topic, partition
	repaired         *prometheus.CounterVec // topic, partition
	scrubbedBytes    prometheus.Counter
	scrubbedCorrupt  prometheus.Counter
	relayed          *prometheus.CounterVec // topic
	groupRelays      prometheus.Counter
	authFailures     prometheus.Counter
	authDenials      prometheus.Counter
	throttled        *prometheus.CounterVec // kind
	diskFree         prometheus.Gauge
	storageFailures  prometheus.Counter
	storageRecovered prometheus.Counter
	offline          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		publishedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_published_records_total", Help: "Records acknowledged to publishers.",
		}, []string{"topic", "mode"}),
		publishedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_published_bytes_total", Help: "Bytes of acknowledged records (batch bytes as stored).",
		}, []string{"topic", "mode"}),
		consumedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_consumed_records_total", Help: "Records delivered to subscribers and fetchers.",
		}, []string{"topic"}),
		consumedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_consumed_bytes_total", Help: "Bytes delivered to subscribers and fetchers.",
		}, []string{"topic"}),
		publishLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hermes_publish_latency_seconds", Help: "From a publish entering the broker to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}, []string{"mode"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_publish_rejected_total", Help: "Publishes refused, by reason.",
		}, []string{"reason"}),
		fsyncLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hermes_fsync_latency_seconds", Help: "Duration of group-commit fsyncs.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}),
		stageVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermes_replication_stage_seconds",
			Help:    "Where a durable publish's time goes on its partition leader, per Raft entry: queue (waiting for the partition's loop), persist (write and fsync), commit (a quorum's acknowledgements), apply (made readable, publishers answered).",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 16),
		}, []string{"stage"}),
		commitRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hermes_group_commit_records", Help: "Records made durable by one fsync.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		consumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hermes_consumer_lag_records", Help: "High watermark minus the group's committed offset.",
		}, []string{"group", "topic", "partition"}),
		ringEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_ring_evicted_total", Help: "Performance-mode records evicted from the in-memory ring.",
		}, []string{"topic"}),
		ringMissed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_ring_missed_total", Help: "Performance-mode records a subscriber missed because the ring evicted them first.",
		}, []string{"topic"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_dead_lettered_total", Help: "Records moved to a dead-letter topic after max deliveries.",
		}, []string{"group", "topic"}),
		redelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_redelivered_total", Help: "Records sent again after an ack deadline or nack.",
		}, []string{"group", "topic"}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermes_subscriptions", Help: "Open subscriptions.",
		}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_publish_duplicates_total", Help: "Retried publishes answered with the offsets of the copy already stored.",
		}, []string{"topic"}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_corrupt_batches_total",
			Help: "Stored batches found corrupt when read (each one counted once per node and process), by partition.",
		}, []string{"topic", "partition"}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_corrupt_batches_repaired_total",
			Help: "Damaged batches rewritten in place from another replica's copy, by partition.",
		}, []string{"topic", "partition"}),
		scrubbedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermes_scrub_bytes_total", Help: "Bytes of committed records the scrubber read back and checked.",
		}),
		scrubbedCorrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermes_scrub_corrupt_batches_total", Help: "Damaged batches the scrubber found (each one is repaired from another replica when one has a good copy).",
		}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_publish_relayed_batches_total",
			Help: "Publishes (batches) this node relayed to their partition's leader and had acknowledged there.",
		}, []string{"topic"}),
	}
	m.groupRelays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_group_members_relayed_total",
		Help: "Group members that subscribed on this node and were relayed to the group coordinator on another node.",
	})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_authentication_failures_total", Help: "Requests whose credentials were wrong or missing where required.",
	})
	m.authDenials = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_authorization_denials_total", Help: "Requests refused because their principal may not do what they ask.",
	})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermes_quota_throttled_total", Help: "Requests refused or delayed by a principal's quota, by quota.",
	}, []string{"quota"})
	m.diskFree = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hermes_data_dir_free_bytes", Help: "Bytes free (for this process) on the data directory's file system.",
	})
	m.storageFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_partition_storage_failures_total", Help: "Partition replicas taken offline by a failed write or fsync (a full disk, an I/O error).",
	})
	m.storageRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_partition_storage_recoveries_total", Help: "Partition replicas opened again from disk after a storage failure, once the disk had room.",
	})
	m.offline = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hermes_offline_partitions", Help: "Partition replicas on this node offline after a storage failure, waiting for room on the disk.",
	})
	for i, stage := range []string{"queue", "persist", "commit", "apply"} {
		m.stages[i] = m.stageVec.WithLabelValues(stage)
	}
	for _, reason := range []string{"queue_full", "disk_quota", "disk_low", "quota"} {
		m.rejected.WithLabelValues(reason) // present at 0, for alerts
	}
	for _, q := range []string{"produce", "fetch", "requests"} {
		m.throttled.WithLabelValues(q)
	}
	reg.MustRegister(m.publishedRecords, m.publishedBytes, m.consumedRecords, m.consumedBytes,
		m.publishLatency, m.rejected, m.fsyncLatency, m.commitRecords, m.stageVec, m.consumerLag,
		m.ringEvicted, m.ringMissed, m.deadLettered, m.redelivered, m.subscriptions, m.duplicates, m.relayed, m.groupRelays,
		m.corrupt, m.repaired, m.scrubbedBytes, m.scrubbedCorrupt, m.authFailures, m.authDenials, m.throttled, m.diskFree, m.storageFailures, m.storageRecovered, m.offline)
	return m
}

// initTopic makes a topic's counters visible at 0 before anything happens.
func (m *metrics) initTopic(topic string) {
	m.ringEvicted.WithLabelValues(topic)
	m.ringMissed.WithLabelValues(topic)
	m.duplicates.WithLabelValues(topic)
	m.relayed.WithLabelValues(topic)
}

// forgetTopic drops the per-topic series of a deleted topic.
func (m *metrics) forgetTopic(topic string) {
	l := prometheus.Labels{"topic": topic}
	m.publishedRecords.DeletePartialMatch(l)
	m.publishedBytes.DeletePartialMatch(l)
	m.consumedRecords.DeletePartialMatch(l)
	m.consumedBytes.DeletePartialMatch(l)
	m.consumerLag.DeletePartialMatch(l)
	m.ringEvicted.DeletePartialMatch(l)
	m.ringMissed.DeletePartialMatch(l)
	m.deadLettered.DeletePartialMatch(l)
	m.redelivered.DeletePartialMatch(l)
	m.duplicates.DeletePartialMatch(l)
	m.relayed.DeletePartialMatch(l)
	m.corrupt.DeletePartialMatch(l)
	m.repaired.DeletePartialMatch(l)
}
