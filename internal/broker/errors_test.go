package broker

import (
	"context"
	"testing"
)

func TestCodeNamesEveryKind(t *testing.T) {
	for _, c := range codeNames {
		wrapped := errorf(c.kind, "detail")
		if got := Code(wrapped); got != c.name {
			t.Errorf("Code(%v) = %s, want %s", wrapped, got, c.name)
		}
	}
	if got := Code(context.Canceled); got != "INTERNAL" {
		t.Errorf("Code(context.Canceled) = %s", got)
	}
}
