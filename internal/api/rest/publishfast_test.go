package rest

import (
	"bytes"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// fastSeeds are bodies of the common shape and bodies just outside it.
var fastSeeds = []string{
	benchPublishBody,
	` { "payload" : "a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac" , "key" : "" , "partition" : 0 } `,
	`{"records":[{"payload":"a","partition":-1,"timestamp_unix_nano":1700000000000000000},{"key":null}],"mode":"eventual"}`,
	`{"headers":{"a":"1","a":null,"é":"\u0041"},"message_id":null}`,
	`{"headers":[{"key":"k","value":"v"},{"key_base64":"/w==","value_base64":"","value":null}]}`,
	`{"headers":[],"records":[]}`,
	`{}`,
	`{"partition":2147483648}`,
	`{"partition":-2147483649}`,
	`{"timestamp_unix_nano":9223372036854775807}`,
	`{"timestamp_unix_nano":9223372036854775808}`,
	`{"timestamp_unix_nano":-9223372036854775808}`,
	`{"partition":1.0}`,
	`{"partition":1e2}`,
	`{"partition":01}`,
	`{"partition":-}`,
	`{"payload":"\ud83d\ude00"}`,
	`{"payload":"\xff"}`,
	"{\"payload\":\"\x01\"}",
	`{"payload":"a","payload":"b"}`,
	`{"Payload":"a"}`,
	`{"records":[{"mode":"eventual"}]}`,
	`{"records":[null]}`,
	`{"headers":[null]}`,
	`{"headers":"x"}`,
	`{"payload":"x"} {}`,
	`{"payload":"x"} `,
	`{"payload":"x",}`,
	`{"payload":"x"`,
	`null`,
	``,
}

// FuzzDecodePublishFast: whatever body the hand decoder takes, it decodes
// exactly as encoding/json (decodeJSON) does.
func FuzzDecodePublishFast(f *testing.F) {
	for _, s := range append(fastSeeds, publishSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got publishBody
		if !decodePublishFast(body, &got) {
			return
		}
		want, err := decodeJSON[publishBody](bytes.NewReader(body))
		if err != nil {
			t.Fatalf("the hand decoder took %q, encoding/json refuses it: %v", body, err)
		}
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("body %q: the hand decoder read\n%s\nencoding/json\n%s", body, dump(&got), dump(want))
		}
	})
}

// TestDecodePublishFastTakesCommonBodies keeps the fast path taking the
// shapes it is for: the cheaper path must not silently stop being used.
func TestDecodePublishFastTakesCommonBodies(t *testing.T) {
	for _, body := range fastSeeds[:7] {
		var b publishBody
		if !decodePublishFast([]byte(body), &b) {
			t.Errorf("not taken: %s", body)
		}
	}
}

func dump(b *publishBody) string {
	var sb strings.Builder
	v := reflect.ValueOf(b).Elem()
	for i := range v.NumField() {
		sb.WriteString(v.Type().Field(i).Name + "=" + deref(v.Field(i)) + " ")
	}
	return sb.String()
}

func deref(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "nil"
		}
		return "&" + deref(v.Elem())
	}
	if v.Kind() == reflect.Slice {
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = deref(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if v.Kind() == reflect.Struct {
		var parts []string
		for i := range v.NumField() {
			parts = append(parts, v.Type().Field(i).Name+":"+deref(v.Field(i)))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return strings.TrimSpace(strings.ReplaceAll(reflect.ValueOf(v.Interface()).String(), "\n", `\n`))
}

// TestWritePublishResponseMatchesWriteJSON: the hand-written answer is
// byte for byte writeJSON's.
func TestWritePublishResponseMatchesWriteJSON(t *testing.T) {
	for _, resp := range []*publishResponse{
		{Mode: "consistent", Records: []recordAck{{Partition: 0, Offset: 0, MessageID: "0190a5e1-7c3b-7def-8123-456789abcdef"}}},
		{Mode: "performance", Records: []recordAck{{Partition: 2147483647, Offset: -9223372036854775808, MessageID: formatID([16]byte{})}, {Partition: 3, Offset: 12}}},
		{Mode: "eventual", Records: []recordAck{}},
		{Mode: "a\"<é>\n", Records: []recordAck{{MessageID: "\\"}}},
	} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writePublishResponse(got, resp)
		writeJSON(want, 200, resp)
		if got.Body.String() != want.Body.String() || got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("%+v: wrote %d %v %q, writeJSON %d %v %q", resp, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}
