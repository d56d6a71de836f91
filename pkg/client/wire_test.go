package client

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// TestGRPCAddrOf: the gRPC address a node tells is used as told, unless
// its host is unspecified: then the host the client reached the node at.
func TestGRPCAddrOf(t *testing.T) {
	for _, c := range []struct{ told, dialled, want string }{
		{"10.0.0.5:50051", "10.0.0.5:7070", "10.0.0.5:50051"},
		{"node1.example:50051", "10.0.0.5:7070", "node1.example:50051"},
		{"0.0.0.0:50051", "10.0.0.5:7070", "10.0.0.5:50051"},
		{"[::]:50051", "node2:7070", "node2:50051"},
		{":50051", "[fe80::1]:7070", "[fe80::1]:50051"},
		{"", "10.0.0.5:7070", ""},
		{"no-port", "10.0.0.5:7070", ""},
	} {
		if got := grpcAddrOf(c.told, c.dialled); got != c.want {
			t.Errorf("grpcAddrOf(%q, %q) = %q, want %q", c.told, c.dialled, got, c.want)
		}
	}
}

// TestDialWireRefusesBadAddresses: a wire:// address without a port, or
// without any address, fails at once with ErrInvalidArgument.
func TestDialWireRefusesBadAddresses(t *testing.T) {
	for _, addr := range []string{"wire://", "wire://,", "wire://127.0.0.1", "wire://127.0.0.1:7070,nohost"} {
		if _, err := Dial(context.Background(), addr); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Dial(%q): %v, want ErrInvalidArgument", addr, err)
		}
	}
}

// TestNoGRPCFailsClearly: a Client whose hermes-wire node told no gRPC
// address answers admin calls at once with an error that says what to
// do.
func TestNoGRPCFailsClearly(t *testing.T) {
	cfg := clientConfig{retry: defaultRetry().normalize(), logger: slog.New(slog.DiscardHandler)}
	c := newClient(nil, hermesv1.NewHermesClient(noGRPC{}), cfg)
	_, err := c.ListTopics(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Retriable || !strings.Contains(e.Message, "Dial its gRPC address") {
		t.Fatalf("ListTopics: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
