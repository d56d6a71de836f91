package graphql

import (
	"context"

	"github.com/hermes-mq/hermes/internal/broker"
)

// publish publishes records and answers one ack per record, in order.
func (r *Resolver) publish(ctx context.Context, topic string, in []*RecordInput, mode *DeliveryMode, partition *int32) ([]*RecordAck, error) {
	recs, err := recordsIn(in)
	if err != nil {
		return nil, err
	}
	req := &broker.PublishRequest{Topic: topic, Partition: broker.AnyPartition, Mode: modeIn(mode), Records: recs}
	if partition != nil {
		if *partition < 0 {
			return nil, invalid("partition must not be negative, got %d", *partition)
		}
		req.Partition = *partition
	}
	res, err := r.b.Publish(ctx, req)
	if err != nil {
		return nil, err
	}
	// The broker gave ids to the records that had none, in req.Records.
	return acksOut(res, req.Records), nil
}
