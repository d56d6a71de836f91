package rest

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// The access-control administration: whoami, users, API tokens, ACLs
// and quotas.

type whoamiJSON struct {
	Principal    string `json:"principal"`
	Via          string `json:"via"`
	AuthRequired bool   `json:"auth_required"`
}

func (a *API) whoami(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	p := a.b.WhoAmI(r.Context())
	writeJSON(w, http.StatusOK, whoamiJSON{Principal: p.Name, Via: p.Via, AuthRequired: a.b.AuthRequired()})
	return nil
}

type userBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

func (a *API) createUser(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[userBody](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if err := a.b.CreateUser(r.Context(), body.Name, body.Password); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/users/"+url.PathEscape(body.Name))
	writeJSON(w, http.StatusCreated, map[string]string{"name": body.Name})
	return nil
}

func (a *API) setPassword(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[struct {
		Password string `json:"password"`
	}](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if err := a.b.SetPassword(r.Context(), r.PathValue("user"), body.Password); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) deleteUser(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	if err := a.b.DeleteUser(r.Context(), r.PathValue("user")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type userJSON struct {
	Name       string   `json:"name"`
	Mechanisms []string `json:"mechanisms"`
}

func (a *API) listUsers(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	users, err := a.b.Users(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Users []userJSON `json:"users"`
	}{Users: []userJSON{}}
	for _, u := range users {
		out.Users = append(out.Users, userJSON{Name: u.Name, Mechanisms: u.Mechanisms})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type tokenJSON struct {
	ID            string `json:"id"`
	Principal     string `json:"principal"`
	CreatedUnixMs int64  `json:"created_unix_ms"`
	ExpiresUnixMs int64  `json:"expires_unix_ms,omitempty"`
	Description   string `json:"description,omitempty"`
}

func toTokenJSON(t broker.TokenInfo) tokenJSON {
	out := tokenJSON{ID: t.ID, Principal: t.Principal, CreatedUnixMs: t.Created.UnixMilli(), Description: t.Description}
	if !t.Expires.IsZero() {
		out.ExpiresUnixMs = t.Expires.UnixMilli()
	}
	return out
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[struct {
		Principal   string `json:"principal"`
		TTLMs       int64  `json:"ttl_ms"`
		Description string `json:"description"`
	}](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if body.TTLMs < 0 {
		return invalid("ttl_ms must not be negative")
	}
	info, token, err := a.b.CreateToken(r.Context(), body.Principal, time.Duration(body.TTLMs)*time.Millisecond, body.Description)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, struct {
		Token string    `json:"token"`
		Info  tokenJSON `json:"info"`
	}{token, toTokenJSON(info)})
	return nil
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	tokens, err := a.b.Tokens(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Tokens []tokenJSON `json:"tokens"`
	}{Tokens: []tokenJSON{}}
	for _, t := range tokens {
		out.Tokens = append(out.Tokens, toTokenJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	if err := a.b.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// aclJSON is an ACL, or a filter (empty fields match anything).
type aclJSON struct {
	Principal    string `json:"principal,omitempty"`
	ResourceType string `json:"resource_type,omitempty"` // topic, group, cluster, transactional-id
	Name         string `json:"name,omitempty"`
	Pattern      string `json:"pattern,omitempty"`    // literal (default) or prefix
	Operation    string `json:"operation,omitempty"`  // read, write, create, delete, alter, describe, all
	Permission   string `json:"permission,omitempty"` // allow or deny
	Host         string `json:"host,omitempty"`
}

var aclKinds = map[string]broker.ResourceKind{"topic": broker.ResourceTopic, "group": broker.ResourceGroup,
	"cluster": broker.ResourceCluster, "transactional-id": broker.ResourceKind(4)}

var aclActions = map[string]broker.Action{"read": broker.ActionRead, "write": broker.ActionWrite, "create": broker.ActionCreate,
	"delete": broker.ActionDelete, "alter": broker.ActionAlter, "describe": broker.ActionDescribe, "all": broker.Action(7)}

// fromACLJSON converts j (as a filter, empty fields are wildcards).
func fromACLJSON(j aclJSON, field string, filter bool) (broker.ACL, broker.ACLFilter, error) {
	var acl broker.ACL
	var f broker.ACLFilter
	acl.Principal, acl.Name, acl.Host = j.Principal, j.Name, j.Host
	if j.ResourceType != "" || !filter {
		k, ok := aclKinds[strings.ToLower(j.ResourceType)]
		if !ok {
			return acl, f, invalid("%s.resource_type: topic, group, cluster or transactional-id", field)
		}
		acl.Kind = k
	}
	if j.Operation != "" || !filter {
		op, ok := aclActions[strings.ToLower(j.Operation)]
		if !ok {
			return acl, f, invalid("%s.operation: read, write, create, delete, alter, describe or all", field)
		}
		acl.Action = op
	}
	switch strings.ToLower(j.Pattern) {
	case "", "literal":
		f.PatternSet = j.Pattern != ""
	case "prefix":
		acl.Prefix, f.PatternSet = true, true
	default:
		return acl, f, invalid("%s.pattern: literal or prefix", field)
	}
	switch strings.ToLower(j.Permission) {
	case "allow":
		f.PermissionSet = true
	case "deny":
		acl.Deny, f.PermissionSet = true, true
	case "":
		if !filter {
			return acl, f, invalid("%s.permission: allow or deny", field)
		}
	default:
		return acl, f, invalid("%s.permission: allow or deny", field)
	}
	f.Principal, f.Kind, f.Name, f.Prefix, f.Action, f.Deny, f.Host = acl.Principal, acl.Kind, acl.Name, acl.Prefix, acl.Action, acl.Deny, acl.Host
	return acl, f, nil
}

func toACLJSON(a broker.ACL) aclJSON {
	j := aclJSON{Principal: a.Principal, ResourceType: a.Kind.String(), Name: a.Name, Pattern: "literal",
		Operation: a.Action.String(), Permission: "allow", Host: a.Host}
	if a.Prefix {
		j.Pattern = "prefix"
	}
	if a.Deny {
		j.Permission = "deny"
	}
	return j
}

func (a *API) createACLs(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[struct {
		ACLs []aclJSON `json:"acls"`
	}](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	var acls []broker.ACL
	for i, j := range body.ACLs {
		acl, _, err := fromACLJSON(j, "acls["+strconv.Itoa(i)+"]", false)
		if err != nil {
			return err
		}
		acls = append(acls, acl)
	}
	if err := a.b.AddACLs(r.Context(), acls); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) deleteACLs(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[struct {
		Filters []aclJSON `json:"filters"`
	}](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	var filters []broker.ACLFilter
	for i, j := range body.Filters {
		_, f, err := fromACLJSON(j, "filters["+strconv.Itoa(i)+"]", true)
		if err != nil {
			return err
		}
		filters = append(filters, f)
	}
	n, err := a.b.RemoveACLs(r.Context(), filters)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

// aclParams are the query parameters of GET /v1/acls: a filter.
var aclParams = []string{"principal", "resource_type", "name", "pattern", "operation", "permission", "host"}

func (a *API) listACLs(w http.ResponseWriter, r *http.Request, q url.Values) error {
	j := aclJSON{Principal: q.Get("principal"), ResourceType: q.Get("resource_type"), Name: q.Get("name"),
		Pattern: q.Get("pattern"), Operation: q.Get("operation"), Permission: q.Get("permission"), Host: q.Get("host")}
	_, f, err := fromACLJSON(j, "query", true)
	if err != nil {
		return err
	}
	acls, err := a.b.ACLs(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		ACLs []aclJSON `json:"acls"`
	}{ACLs: []aclJSON{}}
	for _, acl := range acls {
		out.ACLs = append(out.ACLs, toACLJSON(acl))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type quotaJSON struct {
	Principal             string `json:"principal,omitempty"`
	ProduceBytesPerSecond int64  `json:"produce_bytes_per_second"`
	FetchBytesPerSecond   int64  `json:"fetch_bytes_per_second"`
	RequestsPerSecond     int64  `json:"requests_per_second"`
}

func (a *API) setQuota(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[quotaJSON](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	if body.Principal != "" {
		return invalid("principal: it is in the path")
	}
	err = a.b.SetQuota(r.Context(), r.PathValue("principal"), broker.Quota{
		ProduceBytes: body.ProduceBytesPerSecond, FetchBytes: body.FetchBytesPerSecond, Requests: body.RequestsPerSecond})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listQuotas(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	qs, err := a.b.Quotas(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Quotas []quotaJSON `json:"quotas"`
	}{Quotas: []quotaJSON{}}
	for p, q := range qs {
		out.Quotas = append(out.Quotas, quotaJSON{Principal: p, ProduceBytesPerSecond: q.ProduceBytes,
			FetchBytesPerSecond: q.FetchBytes, RequestsPerSecond: q.Requests})
	}
	sortQuotas(out.Quotas)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func sortQuotas(qs []quotaJSON) {
	for i := 1; i < len(qs); i++ {
		for j := i; j > 0 && qs[j].Principal < qs[j-1].Principal; j-- {
			qs[j], qs[j-1] = qs[j-1], qs[j]
		}
	}
}
