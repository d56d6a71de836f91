package graphql

import (
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// The schema's scalars wrap gqlgen's so that a value that does not fit
// (an Int beyond 32 bits, a malformed Time) is an INVALID_ARGUMENT like
// any other bad input, not an error of no known kind.

// MarshalInt64 and UnmarshalInt64 implement the Int64 scalar.
func MarshalInt64(v int64) graphql.Marshaler { return graphql.MarshalInt64(v) }

func UnmarshalInt64(v any) (int64, error) {
	n, err := graphql.UnmarshalInt64(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return n, nil
}

// MarshalInt32 and UnmarshalInt32 implement Int (32 bits, as the GraphQL
// specification says).
func MarshalInt32(v int32) graphql.Marshaler { return graphql.MarshalInt32(v) }

func UnmarshalInt32(v any) (int32, error) {
	n, err := graphql.UnmarshalInt32(v)
	if err != nil {
		return 0, invalid("%v", err)
	}
	return n, nil
}

// MarshalTime and UnmarshalTime implement Time (RFC 3339, nanoseconds).
func MarshalTime(t time.Time) graphql.Marshaler { return graphql.MarshalTime(t) }

func UnmarshalTime(v any) (time.Time, error) {
	t, err := graphql.UnmarshalTime(v)
	if err != nil {
		return time.Time{}, invalid("%v", err)
	}
	return t, nil
}

// MarshalString and UnmarshalString implement String. gqlgen's own would
// take a number for a string (variables are decoded with json.Number);
// the GraphQL specification, and this API, refuse it.
func MarshalString(s string) graphql.Marshaler { return graphql.MarshalString(s) }

func UnmarshalString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", invalid("want a string, got %T", v)
	}
	return s, nil
}
