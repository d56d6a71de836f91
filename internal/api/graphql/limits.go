package graphql

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Query bounds: a query deeper or costlier than these is refused before
// any resolver runs (INVALID_ARGUMENT, with extensions.reason).
const (
	// MaxDepth is how deeply fields may nest, introspection included. The
	// schema's deepest data query is 4 levels; GraphiQL's introspection
	// query (graphql-js 16) is 13, and 15 admits clients that ask for two
	// more levels of ofType.
	MaxDepth = 15
	// MaxComplexity is what one operation may cost: one per selected field,
	// and a records page its selection once per recordsPerCost records.
	MaxComplexity  = 1000
	recordsPerCost = 100
	// maxQueryTokens bounds the parser's work on one query.
	maxQueryTokens = 15000
)

// complexity weights the list fields whose length the client chooses.
func complexity() ComplexityRoot {
	var c ComplexityRoot
	c.Query.Records = func(child int, _ string, _ int32, _ int64, limit int32, _ int32) int {
		return 1 + child*int(max(1, (int64(limit)+recordsPerCost-1)/recordsPerCost))
	}
	return c
}

// oneStream refuses a subscription of other than one root field (with
// aliases the validator lets two through), before gqlgen's executor would
// report it as an error of no known kind.
type oneStream struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = oneStream{}

func (oneStream) ExtensionName() string                          { return "OneStream" }
func (oneStream) Validate(schema graphql.ExecutableSchema) error { return nil }

func (oneStream) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation.Operation != ast.Subscription {
		return nil
	}
	if n := len(graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})); n != 1 {
		err := gqlerror.Errorf("a subscription selects exactly one stream, got %d", n)
		errcode.Set(err, errcode.ValidationFailed)
		return err
	}
	return nil
}

// depthLimit refuses operations whose fields nest deeper than max.
type depthLimit struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

func (depthLimit) ExtensionName() string                          { return "DepthLimit" }
func (depthLimit) Validate(schema graphql.ExecutableSchema) error { return nil }

func (d depthLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	m := &depthMeter{frags: oc.Doc.Fragments, memo: make(map[string]int), limit: d.max}
	if depth := m.depth(oc.Operation.SelectionSet); depth > d.max {
		err := gqlerror.Errorf("operation is nested %d fields deep, more than the limit of %d", depth, d.max)
		errcode.Set(err, "DEPTH_LIMIT_EXCEEDED")
		return err
	}
	return nil
}

// depthMeter measures selection depth, each named fragment once (the
// validator has refused fragment cycles already; visiting marks guard
// against them anyway).
type depthMeter struct {
	frags ast.FragmentDefinitionList
	memo  map[string]int // fragment name → depth; -1 while being measured
	limit int
}

func (m *depthMeter) depth(set ast.SelectionSet) int {
	deepest := 0
	for _, sel := range set {
		d := 0
		switch s := sel.(type) {
		case *ast.Field:
			d = 1 + m.depth(s.SelectionSet)
		case *ast.InlineFragment:
			d = m.depth(s.SelectionSet)
		case *ast.FragmentSpread:
			d = m.fragment(s.Name)
		}
		deepest = max(deepest, d)
		if deepest > m.limit {
			return deepest // deep enough to refuse; stop measuring
		}
	}
	return deepest
}

func (m *depthMeter) fragment(name string) int {
	if d, ok := m.memo[name]; ok {
		return max(d, 0)
	}
	f := m.frags.ForName(name)
	if f == nil {
		return 0
	}
	m.memo[name] = -1
	d := m.depth(f.SelectionSet)
	m.memo[name] = d
	return d
}
