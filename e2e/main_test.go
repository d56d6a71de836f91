package e2e

import (
	"os"
	"testing"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.RemoveBinary() // os.Exit skips deferred calls
	os.Exit(code)
}
