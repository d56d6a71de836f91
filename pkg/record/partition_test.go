package record

import "testing"

// The vectors are Kafka's own (UtilsTest.testMurmur2), so a key partitions
// the same way in Hermes and in Kafka.
func TestMurmur2MatchesKafka(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestKeyPartitionInRange(t *testing.T) {
	for n := int32(1); n <= 64; n++ {
		for _, k := range []string{"", "a", "order-17", "\xff\xfe"} {
			p := KeyPartition([]byte(k), n)
			if p < 0 || p >= n {
				t.Fatalf("KeyPartition(%q, %d) = %d", k, n, p)
			}
		}
	}
}
