package graphql

import (
	"reflect"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// paramSeeds are request bodies of every shape decodeParams meets: the
// ones its fast path takes and the ones it leaves to encoding/json.
var paramSeeds = []string{
	`{"query":"{ topics { name } }"}`,
	` { "query" : "mutation { publish(topic: \"bench\", record: {payload: \"x\"}) { offset } }" } `,
	`{"query":"q","operationName":"Op","variables":{"a":1,"b":[1.5e3,"x",null,true],"c":{"d":{}}},"extensions":{"persistedQuery":{"version":1}}}`,
	`{"query":"q","operationName":null,"variables":null,"extensions":null}`,
	`{}`,
	`{"query":"\u00e9\u4e16\/\b\f\n\r\t\\\"é世🙂"}`,
	`{"query":"x"} trailing garbage`,
	`{"query":"x"}{"query":"y"}`,
	`{"variables":{"a":"\"}"}}`,
	// Left to encoding/json: unknown, cased and repeated keys, escapes in
	// keys, surrogates, invalid UTF-8, control characters, wrong types.
	`{"query":"x","other":1}`,
	`{"Query":"x"}`,
	`{"query":"x","query":"y"}`,
	`{"variables":{"a":1},"variables":{"b":2}}`,
	`{"qu\u0065ry":"x"}`,
	`{"query":"\ud83d\ude42 \ud800"}`,
	"{\"query\":\"\xff\xfe\"}",
	"{\"query\":\"a\tb\"}",
	`{"query":1}`,
	`{"variables":[1]}`,
	`{"variables":"x"}`,
	`{"variables":{"a":1]}`,
	`{"variables":{"a":}}`,
	`{"query":"x",}`,
	`{"query":"x" "variables":{}}`,
	`{"query":nul}`,
	`{"query":"\x"}`,
	`{"query":"\u12"}`,
	`[1]`,
	``,
	`{`,
	`{"variables":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}`,
}

// TestDecodeParams checks each seed decodes as encoding/json decodes it,
// by the path meant for it.
func TestDecodeParams(t *testing.T) {
	const fastSeeds = 9 // the seeds before the comment
	for i, body := range paramSeeds {
		if took := checkDecodeParams(t, []byte(body)); took != (i < fastSeeds) {
			t.Errorf("%q: fast path taken %v", body, took)
		}
	}
}

// FuzzDecodeParams checks that decodeParams, fast path or not, decodes
// any body to what gqlgen's encoding/json decoding gives, and fails where
// it fails.
func FuzzDecodeParams(f *testing.F) {
	for _, s := range paramSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeParams(t, body) })
}

// checkDecodeParams compares decodeParams with encoding/json on body and
// reports whether the fast path took it.
func checkDecodeParams(t *testing.T, body []byte) bool {
	t.Helper()
	var want, got, fast graphql.RawParams
	wantErr := decodeParamsJSON(body, &want)
	gotErr := decodeParams(body, &got)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("%q: error %v, encoding/json's %v", body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded %+v, encoding/json %+v", body, got, want)
	}
	took := decodeParamsFast(body, &fast)
	if took && (wantErr != nil || !reflect.DeepEqual(fast, want)) {
		t.Fatalf("%q: fast path decoded %+v, encoding/json %+v (%v)", body, fast, want, wantErr)
	}
	return took
}
