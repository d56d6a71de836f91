package httpbody

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 20_000) // 200 KB: beyond MaxPrealloc
	for _, c := range []struct {
		name   string
		n      int
		length int64
	}{
		{"exact", 100, 100},
		{"unknown length", 100, -1},
		{"announced shorter", 1000, 10},
		{"announced longer", 10, 1000},
		{"beyond the prealloc bound", len(body), int64(len(body))},
		{"empty", 0, 0},
	} {
		got, err := Read(iotest.HalfReader(bytes.NewReader(body[:c.n])), c.length)
		if err != nil || !bytes.Equal(got, body[:c.n]) {
			t.Errorf("%s: read %d bytes, %v; want %d", c.name, len(got), err, c.n)
		}
		if c.name == "exact" && cap(got) != 101 {
			t.Errorf("exact: a buffer of %d for a body of 100 announced", cap(got))
		}
	}
	boom := errors.New("boom")
	got, err := Read(io.MultiReader(bytes.NewReader(body[:30]), iotest.ErrReader(boom)), 100)
	if !errors.Is(err, boom) || !bytes.Equal(got, body[:30]) {
		t.Errorf("failing reader: %d bytes, %v; want the 30 read before the error", len(got), err)
	}
}
