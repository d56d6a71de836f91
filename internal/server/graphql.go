package server

import "github.com/hermes-mq/hermes/internal/api/graphql"

// The GraphQL API (/graphql, /graphql/ui) on the HTTP address.
func init() { httpAdapters = append(httpAdapters, graphql.Register) }
