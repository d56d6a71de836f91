//go:build tools

// This file keeps gqlgen's generator in go.mod so `go generate` runs the
// pinned version; it is never built.
package graphql

import _ "github.com/99designs/gqlgen"
