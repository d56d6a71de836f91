package graphql

import (
	"bytes"
	"context"
	"io"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// The lean path. Nearly every GraphQL request to a broker is one publish
// mutation selecting a few scalars of its ack, such as
//
//	mutation { publish(topic: "t", record: {payload: "x"}) { offset } }
//
// gqlgen executes it with its generic object machinery (a field context,
// resolver middleware, a deferred group and a field set for each object and
// scalar field), which costs more than the broker's publish does. leanSchema
// runs exactly that shape with less. The request has been parsed, validated
// and limited as any other (CreateOperationContext is untouched), and the
// operation and response middleware run as for any other. The publish field
// is resolved by gqlgen's own graphql.ResolveField, with the generated
// argument coercion (done once for arguments without variables) and
// resolver call. Only the two objects around it, the Mutation root and the
// RecordAck, are walked and written here, without the per-field machinery
// their plain fields do not need. Any other operation goes to the
// generated Exec.
//
// What the lean path leaves out, and why it is not missed:
//   - resolver middleware (AroundFields) around the ack's scalar fields:
//     the handler registers none; a FieldInterceptor added to it must come
//     with leanSchema removed.
//   - the input unmarshaler index in the context
//     (graphql.UnmarshalNamedInputFromContext): nothing in this package
//     reads it.
//   - deferred groups: an eligible operation has no fragments, so nothing
//     in it can be deferred.
//
// The ack's marshalers (Int, Int64, String, DeliveryMode) never return
// null, so no error can arise below the publish field. TestLeanPath holds
// the lean path's answers to the generated Exec's, byte for byte.
type leanSchema struct {
	*executableSchema

	mu    sync.RWMutex
	plans map[*ast.OperationDefinition]*leanPlan // guarded by mu; a nil plan: not eligible
}

// maxLeanPlans bounds leanSchema.plans (emptied when full), as
// maxKnownOperations does limits.known.
const maxLeanPlans = queryCacheSize

// leanAckFields are the RecordAck fields the lean path writes.
var leanAckFields = map[string]bool{"__typename": true, "partition": true, "offset": true, "messageId": true, "mode": true}

func newLeanSchema(cfg Config) *leanSchema {
	return &leanSchema{
		executableSchema: NewExecutableSchema(cfg).(*executableSchema),
		plans:            make(map[*ast.OperationDefinition]*leanPlan),
	}
}

// Exec runs an eligible operation by its plan, any other by the generated
// Exec.
func (s *leanSchema) Exec(ctx context.Context) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	p := s.plan(oc)
	if p == nil {
		return s.executableSchema.Exec(ctx)
	}
	ec := newExecutionContext(oc, s.executableSchema, nil) // no deferred results: nothing defers
	first := true
	return func(ctx context.Context) *graphql.Response { // as the generated Exec's mutation case
		if !first {
			return nil
		}
		first = false
		var buf bytes.Buffer
		p.run(ctx, ec).MarshalGQL(&buf)
		return &graphql.Response{Data: buf.Bytes()}
	}
}

// plan returns the operation's plan, nil if it is not eligible, making it
// the first time.
func (s *leanSchema) plan(oc *graphql.OperationContext) *leanPlan {
	s.mu.RLock()
	p, ok := s.plans[oc.Operation]
	s.mu.RUnlock()
	if ok {
		return p
	}
	p = newLeanPlan(oc)
	s.mu.Lock()
	if len(s.plans) >= maxLeanPlans {
		clear(s.plans)
	}
	s.plans[oc.Operation] = p
	s.mu.Unlock()
	return p
}

// leanPlan is an eligible operation, its fields collected once.
type leanPlan struct {
	publish graphql.CollectedField   // the one root field
	ack     []graphql.CollectedField // the ack's fields, merged by alias
	// rootKey and ackKeys are the quoted aliases as the field sets write them.
	rootKey []byte
	ackKeys [][]byte

	// fixedArgs: no argument of publish holds a variable, so coercing them
	// gives the same values each time, and args keeps those of the first
	// success. Each request gets its own copy of the map; the values
	// (strings, a RecordInput, pointers to a mode and a partition) are
	// shared, and the resolver only reads them.
	fixedArgs bool
	args      atomic.Pointer[map[string]any]
}

// newLeanPlan returns the plan of oc's operation, or nil if it is not a
// mutation of one publish field, selecting only scalars of its ack, with no
// directive and no fragment anywhere. Fields are collected by gqlgen's
// CollectFields: with no directive and no fragment, what it collects does
// not depend on the variables, so once is enough.
func newLeanPlan(oc *graphql.OperationContext) *leanPlan {
	op := oc.Operation
	if op.Operation != ast.Mutation || len(op.Directives) != 0 || len(op.SelectionSet) != 1 {
		return nil
	}
	f, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || f.Name != "publish" || len(f.Directives) != 0 || len(f.SelectionSet) == 0 {
		return nil
	}
	for _, sel := range f.SelectionSet {
		g, ok := sel.(*ast.Field)
		if !ok || !leanAckFields[g.Name] || len(g.Directives) != 0 || len(g.Arguments) != 0 || len(g.SelectionSet) != 0 {
			return nil
		}
	}
	root := graphql.CollectFields(oc, op.SelectionSet, mutationImplementors)
	if len(root) != 1 || root[0].IsDeferred() {
		return nil
	}
	p := &leanPlan{publish: root[0], ack: graphql.CollectFields(oc, f.SelectionSet, recordAckImplementors)}
	p.fixedArgs = true
	for _, arg := range f.Arguments {
		if hasVariable(arg.Value) {
			p.fixedArgs = false
		}
	}
	p.rootKey = quoted(p.publish.Alias)
	for _, a := range p.ack {
		if a.IsDeferred() {
			return nil
		}
		p.ackKeys = append(p.ackKeys, quoted(a.Alias))
	}
	return p
}

// quoted is s as gqlgen writes a field set's key.
func quoted(s string) []byte {
	var b bytes.Buffer
	graphql.MarshalString(s).MarshalGQL(&b)
	return b.Bytes()
}

// run resolves the operation as the generated _Mutation does for its one
// field: the root's field context, the root field context, the root
// resolver middleware, and null data if the field is null.
func (p *leanPlan) run(ctx context.Context, ec *executionContext) graphql.Marshaler {
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: "Mutation"})
	innerCtx := graphql.WithRootFieldContext(ctx, &graphql.RootFieldContext{Object: p.publish.Name, Field: p.publish})
	v := ec.OperationContext.RootResolverMiddleware(innerCtx, func(ctx context.Context) graphql.Marshaler {
		return p.resolvePublish(ctx, ec)
	})
	if v == graphql.Null {
		return graphql.Null
	}
	return object{keys: [][]byte{p.rootKey}, values: []graphql.Marshaler{v}}
}

// resolvePublish is the generated _Mutation_publish with the ack marshaled
// by the plan.
func (p *leanPlan) resolvePublish(ctx context.Context, ec *executionContext) graphql.Marshaler {
	return graphql.ResolveField(
		ctx,
		ec.OperationContext,
		p.publish,
		func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return p.fieldContext(ctx, ec, field)
		},
		func(ctx context.Context) (any, error) {
			fc := graphql.GetFieldContext(ctx)
			return ec.Resolvers.Mutation().Publish(ctx, fc.Args["topic"].(string), fc.Args["record"].(RecordInput), fc.Args["mode"].(*DeliveryMode), fc.Args["partition"].(*int32))
		},
		nil,
		func(ctx context.Context, sel ast.SelectionSet, v *RecordAck) graphql.Marshaler {
			if v == nil {
				return ec.marshalNRecordAck2ᚖgithubᚗcomᚋhermesᚑmqᚋhermesᚋinternalᚋapiᚋgraphqlᚐRecordAck(ctx, sel, v)
			}
			return p.marshalAck(ctx, ec, v)
		},
		true,
		true,
	)
}

// fieldContext is the generated fieldContext_Mutation_publish, which
// coerces the arguments, or for fixed arguments coerced before the same
// field context with a copy of them.
func (p *leanPlan) fieldContext(ctx context.Context, ec *executionContext, field graphql.CollectedField) (*graphql.FieldContext, error) {
	if args := p.args.Load(); args != nil {
		return publishFieldContext(ec, field, maps.Clone(*args)), nil
	}
	fc, err := ec.fieldContext_Mutation_publish(ctx, field)
	if err == nil && p.fixedArgs {
		args := maps.Clone(fc.Args)
		p.args.Store(&args)
	}
	return fc, err
}

// publishFieldContext is the field context fieldContext_Mutation_publish
// makes, with args given (TestLeanFieldContext compares them).
func publishFieldContext(ec *executionContext, field graphql.CollectedField, args map[string]any) *graphql.FieldContext {
	return &graphql.FieldContext{
		Object:     "Mutation",
		Field:      field,
		IsMethod:   true,
		IsResolver: true,
		Child: func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return ec.childFields_RecordAck(ctx, field)
		},
		Args: args,
	}
}

// marshalAck writes the ack's selected fields with the generated
// marshalers, as the generated _RecordAck does without a field context for
// each (see leanSchema: none of them can be null).
func (p *leanPlan) marshalAck(ctx context.Context, ec *executionContext, v *RecordAck) graphql.Marshaler {
	values := make([]graphql.Marshaler, len(p.ack))
	for i, f := range p.ack {
		switch f.Name {
		case "__typename":
			values[i] = graphql.MarshalString("RecordAck")
		case "partition":
			values[i] = ec.marshalNInt2int32(ctx, f.Selections, v.Partition)
		case "offset":
			values[i] = ec.marshalNInt642int64(ctx, f.Selections, v.Offset)
		case "messageId":
			values[i] = ec.marshalNString2string(ctx, f.Selections, v.MessageID)
		case "mode":
			values[i] = ec.marshalNDeliveryMode2githubᚗcomᚋhermesᚑmqᚋhermesᚋinternalᚋapiᚋgraphqlᚐDeliveryMode(ctx, f.Selections, v.Mode)
		default:
			panic("lean path: unplanned RecordAck field " + f.Name) // newLeanPlan admits only leanAckFields
		}
	}
	return object{keys: p.ackKeys, values: values}
}

// object writes a JSON object as graphql.FieldSet does, its keys already
// quoted. Invariant: len(keys) == len(values), keys distinct (collected
// fields are merged by alias).
type object struct {
	keys   [][]byte
	values []graphql.Marshaler
}

func (o object) MarshalGQL(w io.Writer) {
	w.Write([]byte{'{'})
	for i, v := range o.values {
		if i > 0 {
			w.Write([]byte{','})
		}
		w.Write(o.keys[i])
		w.Write([]byte{':'})
		v.MarshalGQL(w)
	}
	w.Write([]byte{'}'})
}
