package server

import "github.com/hermes-mq/hermes/internal/api/console"

// The web console (/ui) on the HTTP address. Its files are public (they
// hold no data: the console calls the APIs with the user's credentials),
// so that a node requiring authentication can show its login page.
func init() { httpAdapters = append(httpAdapters, console.Register) }

// openPath reports whether a path needs no authentication.
func openPath(p string) bool { return openPaths[p] || console.Public(p) }
