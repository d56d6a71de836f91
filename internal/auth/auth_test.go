package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestACLRules(t *testing.T) {
	topic := func(n string) Resource { return Resource{Kind: ResourceTopic, Name: n} }
	r := New([]string{"root"}, []ACL{
		{Principal: "alice", Kind: ResourceTopic, Name: "orders", Action: ActionWrite},
		{Principal: "alice", Kind: ResourceTopic, Name: "logs-", Prefix: true, Action: ActionRead},
		{Principal: "alice", Kind: ResourceTopic, Name: "logs-secret", Action: ActionAll, Deny: true},
		{Principal: Wildcard, Kind: ResourceTopic, Name: "public", Action: ActionRead},
		{Principal: "bob", Kind: ResourceTopic, Name: Wildcard, Action: ActionAll},
		{Principal: "bob", Kind: ResourceTopic, Name: "orders", Action: ActionDelete, Deny: true},
		{Principal: "carol", Kind: ResourceCluster, Action: ActionAlter},
		{Principal: "dave", Kind: ResourceTopic, Name: "orders", Action: ActionRead, Host: "10.0.0.1"},
	})
	cases := []struct {
		p    string
		a    Action
		res  Resource
		host string
		ok   bool
	}{
		{"alice", ActionWrite, topic("orders"), "", true},
		{"alice", ActionRead, topic("orders"), "", false},
		{"alice", ActionDescribe, topic("orders"), "", true}, // implied by write
		{"alice", ActionRead, topic("logs-app"), "", true},
		{"alice", ActionRead, topic("logs-secret"), "", false}, // deny wins
		{"alice", ActionDescribe, topic("logs-secret"), "", false},
		{"alice", ActionRead, topic("logsx"), "", false},
		{"alice", ActionRead, topic("public"), "", true},
		{"zed", ActionRead, topic("public"), "", true},
		{"zed", ActionWrite, topic("public"), "", false},
		{"bob", ActionCreate, topic("anything"), "", true},
		{"bob", ActionDelete, topic("orders"), "", false},
		{"bob", ActionAlter, Resource{Kind: ResourceCluster}, "", false},
		{"carol", ActionAlter, Resource{Kind: ResourceCluster}, "", true},
		{"carol", ActionDescribe, Resource{Kind: ResourceCluster}, "", true},
		{"dave", ActionRead, topic("orders"), "10.0.0.1", true},
		{"dave", ActionRead, topic("orders"), "10.0.0.2", false},
		{"root", ActionDelete, topic("orders"), "", true},
		{"", ActionRead, topic("public"), "", false}, // anonymous
		{"alice", ActionRead, Resource{Kind: ResourceGroup, Name: "orders"}, "", false},
	}
	for _, c := range cases {
		err := r.Authorize(c.p, c.a, c.res, c.host)
		if (err == nil) != c.ok {
			t.Errorf("%s %s %s %q from %q: %v, want allowed=%v", c.p, c.a, c.res.Kind, c.res.Name, c.host, err, c.ok)
		}
	}
	if err := (ACL{Principal: "x", Kind: ResourceTopic, Action: ActionRead}).Validate(); err == nil {
		t.Error("a topic ACL without a name validated")
	}
	f := Filter{Principal: "bob", Deny: true, PermissionSet: true}
	n := 0
	for _, a := range r.ACLs() {
		if f.Matches(a) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("filter matched %d ACLs, want 1", n)
	}
}

func TestCredentialVerify(t *testing.T) {
	for _, m := range Mechanisms {
		c, err := NewCredential(m, "s3cret", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Verify("s3cret") || c.Verify("s3cret ") || c.Verify("") {
			t.Errorf("%s: Verify is wrong", m)
		}
	}
	if _, err := NewCredential(ScramSHA256, "x", 100); err == nil {
		t.Error("100 iterations accepted")
	}
}

// RFC 7677's example exchange.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := deriveCredential(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewScramServer(ScramSHA256, func(u string) (Credential, bool) { return cred, u == "user" })
	if _, err := s.First([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	// The RFC's server nonce and first message.
	s.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	s.serverFirst = "r=" + s.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	final, user, err := s.Final([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil {
		t.Fatal(err)
	}
	if user != "user" || string(final) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q for %q", final, user)
	}
}

// scramClient runs the client side of an exchange against s.
func scramClient(t *testing.T, s *ScramServer, m Mechanism, user, password string) error {
	t.Helper()
	h, _ := m.hash()
	cnonce := "fyko+d2lbbFgONRv9qkxdawL"
	first := "n=" + user + ",r=" + cnonce
	sf, err := s.First([]byte("n,," + first))
	if err != nil {
		return err
	}
	attrs, err := scramAttrs(string(sf))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(attrs["r"], cnonce) {
		t.Fatalf("server nonce %q does not extend the client's", attrs["r"])
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
	salted, _ := pbkdf2.Key(h, password, salt, DefaultIterations, h().Size())
	clientKey := hmacOf(h, salted, "Client Key")
	storedKey := hashOf(h, clientKey)
	noProof := "c=biws,r=" + attrs["r"]
	authMsg := first + "," + string(sf) + "," + noProof
	sig := hmacOf(h, storedKey, authMsg)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	final, got, err := s.Final([]byte(noProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil {
		return err
	}
	want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, hmacOf(h, salted, "Server Key"), authMsg))
	if string(final) != want || got != user {
		t.Fatalf("server-final %q for %q, want %q for %q", final, got, want, user)
	}
	if !hmac.Equal([]byte(final), []byte(want)) {
		t.Fatal("server signature")
	}
	return nil
}

func TestScramExchange(t *testing.T) {
	for _, m := range Mechanisms {
		cred, _ := NewCredential(m, "pw", 0)
		lookup := func(u string) (Credential, bool) { return cred, u == "alice" }
		s, _ := NewScramServer(m, lookup)
		if err := scramClient(t, s, m, "alice", "pw"); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		s, _ = NewScramServer(m, lookup)
		if err := scramClient(t, s, m, "alice", "wrong"); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s, wrong password: %v", m, err)
		}
		s, _ = NewScramServer(m, lookup)
		if err := scramClient(t, s, m, "mallory", "pw"); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s, unknown user: %v", m, err)
		}
	}
	s, _ := NewScramServer(ScramSHA256, func(string) (Credential, bool) { return Credential{}, false })
	for _, bad := range []string{"", "n,a=admin,n=x,r=y", "p=tls-unique,,n=x,r=y", "n,,r=y", "n,,n=x"} {
		if _, err := s.First([]byte(bad)); err == nil {
			t.Errorf("client-first %q accepted", bad)
		}
	}
	if _, _, err := s.Final([]byte("c=biws,r=x,p=AAAA")); err == nil {
		t.Error("client-final before client-first accepted")
	}
}

func TestTokens(t *testing.T) {
	now := time.Now()
	tok, s := NewToken("alice", time.Hour, "ci", now)
	id, secret, err := ParseToken(s)
	if err != nil || id != tok.ID {
		t.Fatalf("parse %q: %q %v", s, id, err)
	}
	if !tok.Check(secret, now) || tok.Check(secret+"x", now) || tok.Check(secret, now.Add(2*time.Hour)) {
		t.Error("Check is wrong")
	}
	for _, bad := range []string{"", "hmt_", "hmt_abc_def", "xyz_0123456789abcdef_s"} {
		if _, _, err := ParseToken(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestQuotas(t *testing.T) {
	q := NewQuotas()
	q.Set(map[string]Quota{"slow": {ProduceBytes: 1000}, Wildcard: {Requests: 5}})
	now := time.Unix(1000, 0)
	// A burst of one second's rate, then waits.
	if w := q.Admit("slow", QuotaProduce, 1500, now); w != 0 {
		t.Fatalf("first publish waits %v", w)
	}
	w := q.Admit("slow", QuotaProduce, 10, now)
	if w < 400*time.Millisecond || w > 600*time.Millisecond {
		t.Fatalf("in debt of 500 bytes at 1000/s: wait %v, want 500ms", w)
	}
	if w := q.Admit("slow", QuotaProduce, 10, now.Add(time.Second)); w != 0 {
		t.Fatalf("after repaying: wait %v", w)
	}
	// Others fall under the wildcard: 5 requests/s.
	for i := 0; i < 5; i++ {
		if w := q.Admit("other", QuotaRequests, 1, now); w != 0 {
			t.Fatalf("request %d waits %v", i, w)
		}
	}
	if w := q.Admit("other", QuotaRequests, 1, now); w == 0 {
		// 5 tokens, 5 charged: at zero, not in debt yet; the next is.
		if w := q.Admit("other", QuotaRequests, 1, now); w == 0 {
			t.Fatal("the request cap did not apply")
		}
	}
	if w := q.Admit("other", QuotaProduce, 1<<30, now); w != 0 {
		t.Fatal("a principal without a produce quota was throttled")
	}
	if w := q.Charge("slow", QuotaFetch, 1<<30, now); w != 0 {
		t.Fatal("fetch without a fetch quota was throttled")
	}
}
