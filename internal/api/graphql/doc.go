// Package graphql is the GraphQL adapter of the Hermes API (gqlgen): the
// schema is in *.graphqls, gqlgen generates exec.go and models.go from it,
// and the resolvers (*.resolvers.go) decode and validate inputs, call the
// broker and leave every error to the one presenter in errors.go, which
// gives it the code every protocol uses.
//
// Two fast paths keep the common request cheap, each held to gqlgen's own
// behaviour by a differential test and a fuzz target: POST bodies of the
// usual shape are decoded by hand (params.go, post.go), and a publish
// mutation selecting scalars of its ack skips gqlgen's generic object
// machinery (lean.go). Operation limits are kept per parsed operation
// (limits.go).
//
// Register mounts /graphql (POST and GET; subscriptions over websockets
// with the graphql-transport-ws protocol) and a GraphiQL page at
// /graphql/ui.
package graphql

//go:generate go run github.com/99designs/gqlgen generate
