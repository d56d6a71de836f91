// Package graphql is the GraphQL adapter of the Hermes API (gqlgen): the
// schema is in *.graphqls, gqlgen generates exec.go and models.go from it,
// and the resolvers (*.resolvers.go) decode and validate inputs, call the
// broker and leave every error to the one presenter in errors.go, which
// gives it the code every protocol uses.
//
// Register mounts /graphql (POST and GET; subscriptions over websockets
// with the graphql-transport-ws protocol) and a GraphiQL page at
// /graphql/ui.
package graphql

//go:generate go run github.com/99designs/gqlgen generate
