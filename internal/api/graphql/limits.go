package graphql

import (
	"context"
	"sync"

	gqlcomplexity "github.com/99designs/gqlgen/complexity"
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

// limits refuses an operation nested deeper than MaxDepth
// (DEPTH_LIMIT_EXCEEDED) or costlier than MaxComplexity
// (COMPLEXITY_LIMIT_EXCEEDED, as gqlgen's extension.ComplexityLimit
// reports it), in that order.
//
// Both measures are walks of the operation, and the same few operations
// come again and again (the parsed-query cache hands back the same
// *ast.OperationDefinition for the same query text), so each operation's
// are kept: its depth always (the validator has fixed its shape), its
// complexity when no variable can change it (see complexityFixed).
type limits struct {
	es graphql.ExecutableSchema // set by Validate

	mu    sync.RWMutex
	known map[*ast.OperationDefinition]opCost // guarded by mu; at most maxKnownOperations
}

// maxKnownOperations bounds limits.known: when full it is emptied. It is
// the parsed-query cache's size, so that a steady set of queries that fits
// the one fits the other.
const maxKnownOperations = queryCacheSize

// opCost is what limits keeps of one operation.
type opCost struct {
	depth int
	// complexity is the operation's cost if fixed; otherwise it is
	// measured for each request, with its variables.
	complexity int
	fixed      bool
}

func newLimits() *limits {
	return &limits{known: make(map[*ast.OperationDefinition]opCost)}
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &limits{}

func (*limits) ExtensionName() string { return "Limits" }

func (l *limits) Validate(schema graphql.ExecutableSchema) error {
	l.es = schema
	return nil
}

func (l *limits) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Operation
	l.mu.RLock()
	cost, ok := l.known[op]
	l.mu.RUnlock()
	if !ok {
		var err *gqlerror.Error
		if cost, err = l.measure(ctx, oc); err != nil {
			return err
		}
		l.mu.Lock()
		if len(l.known) >= maxKnownOperations {
			clear(l.known)
		}
		l.known[op] = cost
		l.mu.Unlock()
	}
	if cost.depth > MaxDepth {
		err := gqlerror.Errorf("operation is nested %d fields deep, more than the limit of %d", cost.depth, MaxDepth)
		errcode.Set(err, "DEPTH_LIMIT_EXCEEDED")
		return err
	}
	n := cost.complexity
	if !cost.fixed {
		var err *gqlerror.Error
		if n, err = l.calculate(ctx, op, oc.Variables); err != nil {
			return err
		}
	}
	if n > MaxComplexity {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", n, MaxComplexity)
		errcode.Set(err, "COMPLEXITY_LIMIT_EXCEEDED")
		return err
	}
	return nil
}

// measure measures oc's operation: its depth, and its complexity if no
// variable can change it (and it is not too deep to be refused anyway).
func (l *limits) measure(ctx context.Context, oc *graphql.OperationContext) (opCost, *gqlerror.Error) {
	op := oc.Operation
	m := &depthMeter{frags: oc.Doc.Fragments, limit: MaxDepth}
	cost := opCost{depth: m.depth(op.SelectionSet)}
	if cost.depth <= MaxDepth && complexityFixed(op) {
		n, err := l.calculate(ctx, op, oc.Variables)
		if err != nil {
			return cost, err
		}
		cost.complexity, cost.fixed = n, true
	}
	return cost, nil
}

// calculate is gqlcomplexity.Calculate, whose walk reads the arguments
// and panics on a literal that validation let through but that does not
// parse (an Int64 beyond 64 bits): the client's error, INVALID_ARGUMENT.
func (l *limits) calculate(ctx context.Context, op *ast.OperationDefinition, vars map[string]any) (n int, gerr *gqlerror.Error) {
	defer func() {
		if r := recover(); r != nil {
			gerr = gqlerror.Errorf("an argument of the operation cannot be read: %v", r)
		}
	}()
	return gqlcomplexity.Calculate(ctx, l.es, op, vars), nil
}

// weighted names the fields complexity() gives a cost function, which
// reads their arguments; gqlgen's complexity walk reads no other argument
// and no directive (it counts @skip and @include fields too). By name
// alone, whatever the type, to err on the side of measuring.
// TestWeightedFields holds it to complexity().
var weighted = map[string]bool{"records": true}

// complexityFixed reports whether op's complexity is the same whatever its
// variables: it has none, or no weighted field takes one in an argument.
func complexityFixed(op *ast.OperationDefinition) bool {
	if len(op.VariableDefinitions) == 0 {
		return true
	}
	w := fixedWalk{seen: make(map[string]bool)}
	return w.fixed(op.SelectionSet)
}

// fixedWalk walks a selection set for weighted fields given variables,
// each named fragment once.
type fixedWalk struct {
	seen map[string]bool // fragments walked already
}

func (w *fixedWalk) fixed(set ast.SelectionSet) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if weighted[s.Name] {
				for _, arg := range s.Arguments {
					if hasVariable(arg.Value) {
						return false
					}
				}
			}
			if !w.fixed(s.SelectionSet) {
				return false
			}
		case *ast.InlineFragment:
			if !w.fixed(s.SelectionSet) {
				return false
			}
		case *ast.FragmentSpread:
			if w.seen[s.Name] {
				continue
			}
			w.seen[s.Name] = true
			if s.Definition == nil {
				return false // not resolved by the validator: measure each time
			}
			if !w.fixed(s.Definition.SelectionSet) {
				return false
			}
		}
	}
	return true
}

// hasVariable reports whether v is or holds a variable.
func hasVariable(v *ast.Value) bool {
	if v == nil {
		return false
	}
	if v.Kind == ast.Variable {
		return true
	}
	for _, c := range v.Children {
		if hasVariable(c.Value) {
			return true
		}
	}
	return false
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
	if m.memo == nil {
		m.memo = make(map[string]int)
	}
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
