package server

import "github.com/hermes-mq/hermes/internal/api/rest"

// The REST/JSON API (/v1/..., /openapi.json) on the HTTP address.
func init() { httpAdapters = append(httpAdapters, rest.Register) }
