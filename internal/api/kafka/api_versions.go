package kafka

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: the API keys and versions this listener serves, exactly
// those of handlers. Answered before SASL authentication, as Kafka does.
func init() {
	handlers[kmsg.ApiVersions.Int16()] = handler{min: 0, max: 3, beforeAuth: true,
		fn: now(func(c *conn, req *kmsg.ApiVersionsRequest) kmsg.Response {
			return apiVersionsResponse(req.Version)
		})}
}

func apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	keys := make([]int16, 0, len(handlers))
	for k := range handlers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		h := handlers[k]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: h.min, MaxVersion: h.max})
	}
	return resp
}
