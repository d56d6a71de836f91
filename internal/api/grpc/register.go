package grpcapi

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/hermes-mq/hermes/internal/broker"
	pb "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// A request that is not a valid protobuf message is the client's fault:
// it gets INVALID_ARGUMENT. gRPC itself answers INTERNAL, the code of a
// fault of the server, as soon as its codec fails, before any handler or
// interceptor runs. So the server's codec (ServerCodec) resets such a
// message and remembers its error instead of failing, and the handlers
// registered by Register answer it.

// badMessages maps a request message that did not decode to its error,
// from the codec to the handler of the same call.
var badMessages sync.Map

// ServerCodec is the server option that installs the codec: base (nil:
// gRPC's protobuf codec), with decoding errors left to Register's
// handlers.
func ServerCodec(base encoding.CodecV2) grpc.ServerOption {
	if base == nil {
		base = encoding.GetCodecV2("proto")
	}
	return grpc.ForceServerCodecV2(lenientCodec{base})
}

type lenientCodec struct{ encoding.CodecV2 }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if m, ok := v.(proto.Message); ok && err != nil {
		proto.Reset(m)
		badMessages.Store(v, err)
		return nil
	}
	return err
}

// decoded returns the decoding error the codec left for v, if any.
func decoded(v any) error {
	if err, ok := badMessages.LoadAndDelete(v); ok {
		return toStatus(broker.Errorf(broker.ErrInvalidArgument, "the request is not a valid protobuf message of its method: %v", err))
	}
	return nil
}

// Register registers svc on srv, as pb.RegisterHermesServer does, with
// handlers that answer a request the codec could not decode (see
// ServerCodec) with INVALID_ARGUMENT.
func Register(srv *grpc.Server, svc *Service) {
	desc := pb.Hermes_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		h := desc.Methods[i].Handler
		desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error {
				if err := dec(v); err != nil {
					return err
				}
				return decoded(v)
			}, ic)
		}
	}
	desc.Streams = slices.Clone(desc.Streams)
	for i := range desc.Streams {
		h := desc.Streams[i].Handler
		desc.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			return h(srv, decodingStream{ss})
		}
	}
	srv.RegisterService(&desc, svc)
}

// decodingStream answers a stream's undecodable messages as Register
// does.
type decodingStream struct{ grpc.ServerStream }

func (d decodingStream) RecvMsg(m any) error {
	if err := d.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return decoded(m)
}
