package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-mq/hermes/internal/server"
)

// startTracing sets up OpenTelemetry tracing as the standard OTEL_*
// environment variables say (docs/OPERATIONS.md, "Tracing"). It is off —
// nil tracer, no provider, nothing exported — unless OTEL_TRACES_EXPORTER
// is "otlp" (and OTEL_SDK_DISABLED is not "true"). The exporter protocol
// is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default, port 4318) or "grpc" (port 4317); the
// exporters read their endpoint, headers, TLS, compression and timeout
// from the OTEL_EXPORTER_OTLP_* variables, the provider its sampler from
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default
// parentbased_always_on), the batch processor OTEL_BSP_*, the resource
// OTEL_SERVICE_NAME (default "hermes") and OTEL_RESOURCE_ATTRIBUTES.
//
// stop flushes the spans not yet exported and shuts the exporter down.
func startTracing(cfg server.Config) (tr trace.Tracer, stop func(context.Context) error, err error) {
	stop = func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, stop, nil
	}
	switch exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "", "none":
		return nil, stop, nil
	case "otlp":
	default:
		return nil, stop, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: hermes exports traces with \"otlp\" only (or \"none\")", exp)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))

	ctx := context.Background()
	proto := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	var exporter sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		proto = "http/protobuf"
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, stop, fmt.Errorf("OTLP protocol %q: hermes exports with \"grpc\" or \"http/protobuf\"", proto)
	}
	if err != nil {
		return nil, stop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later sources win: the defaults, then OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME.
	attrs := []attribute.KeyValue{attribute.String("service.name", "hermes"), attribute.String("service.version", cfg.Version)}
	if id := cfg.Broker.Cluster.NodeID; id != 0 {
		attrs = append(attrs, attribute.Int64("hermes.node", int64(id)))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		log.Warn("tracing: resource", "err", err) // partial: keep what was detected
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	log.Info("tracing on", "exporter", "otlp", "protocol", proto,
		"sampler", envOr("OTEL_TRACES_SAMPLER", "parentbased_always_on"), "sampler_arg", os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	stop = func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		return tp.Shutdown(ctx)
	}
	return tp.Tracer("github.com/hermes-mq/hermes/internal/broker"), stop, nil
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}
