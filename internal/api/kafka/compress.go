package kafka

import (
	"bytes"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compress compresses a batch's records with a Kafka codec (1 gzip, 2
// snappy, 3 lz4, 4 zstd), appending to dst. ok is false when it could
// not (the batch is then served uncompressed).
func compress(dst []byte, codec uint8, src []byte) ([]byte, bool) {
	switch codec {
	case 1:
		buf := bytes.NewBuffer(dst)
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil || w.Close() != nil {
			return dst, false
		}
		return buf.Bytes(), true
	case 2:
		return append(dst, snappy.Encode(nil, src)...), true
	case 3:
		buf := bytes.NewBuffer(dst)
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil || w.Close() != nil {
			return dst, false
		}
		return buf.Bytes(), true
	case 4:
		return zstdEncoder().EncodeAll(src, dst), true
	}
	return dst, false
}

var (
	gzipWriters = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression); return w }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	})
	return zstdEnc
}
