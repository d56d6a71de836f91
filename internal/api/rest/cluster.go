package rest

import (
	"net/http"
	"net/url"
	"strconv"
)

type clusterJSON struct {
	NodeID string     `json:"node_id"`
	Nodes  []nodeJSON `json:"nodes"`
}

// nodeJSON is one node and its client addresses. An address the node
// does not know is "".
type nodeJSON struct {
	ID    string `json:"id"`
	GRPC  string `json:"grpc"`
	HTTP  string `json:"http"`
	Ready bool   `json:"ready"`
}

// cluster serves GET /v1/cluster. On a single node, the only node is this
// one; its HTTP address is the one the client reached it at (the Host
// header), and its gRPC address is not known to the HTTP adapters.
func (a *API) cluster(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	writeJSON(w, http.StatusOK, clusterJSON{
		NodeID: strconv.FormatUint(a.b.NodeID(), 10),
		Nodes:  []nodeJSON{{ID: strconv.FormatUint(a.b.NodeID(), 10), HTTP: r.Host, Ready: a.b.Ready()}},
	})
	return nil
}
