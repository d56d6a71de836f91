// Package httpbody reads a request body into memory with one buffer sized
// from its announced length, for the HTTP adapters' publish fast paths.
package httpbody

import "io"

// MaxPrealloc bounds the buffer allocated for a body from its announced
// length before any of it has arrived; a bigger body grows the buffer as
// it comes, so that a client announcing a big body and sending none costs
// no memory.
const MaxPrealloc = 64 << 10

// Read reads all of r, as io.ReadAll does, into a buffer sized for the
// body's announced length (up to MaxPrealloc; io.ReadAll's first 512
// bytes when length < 0, unknown). On an error it returns what it read
// before it.
func Read(r io.Reader, length int64) ([]byte, error) {
	n := int64(512)
	if length >= 0 {
		n = min(length, MaxPrealloc) + 1 // +1: room to read EOF
	}
	b := make([]byte, 0, n)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append choose the growth
		}
	}
}
