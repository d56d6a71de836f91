/**
 * The Hermes TypeScript client: admin calls, a batching {@link Producer}
 * and a {@link Consumer} over gRPC, with the packed record-batch format
 * encoded and decoded natively.
 *
 * @packageDocumentation
 */

export {
  Client,
  type ClientOptions,
  type TlsOptions,
  type CallOptions,
  type TopicConfig,
  type CreateTopicOptions,
  type TopicChanges,
  type TopicInfo,
  type PartitionInfo,
  type GroupSummary,
  type GroupInfo,
  type GroupMember,
  type GroupPartition,
  type PartitionOffset,
  type PartitionTimeOffset,
  type Health,
  type PublishOptions,
  type FetchOptions,
  type FetchResult,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_MAX_RECEIVE_BYTES,
} from "./client.js";
export { Producer, type ProducerOptions, type SendOptions, PRODUCER_DEFAULTS } from "./producer.js";
export {
  Consumer,
  type SubscribeOptions,
  type StartPosition,
  type AckMode,
  CONSUMER_DEFAULTS,
} from "./consumer.js";
export * from "./errors.js";
export {
  type DeliveryMode,
  type Bytes,
  type Header,
  type HeaderInput,
  type Message,
  type ProducerRecord,
  type RecordMetadata,
  nanosToDate,
} from "./types.js";
export { type RetryOptions } from "./retry.js";
export {
  encodeBatch,
  decodeBatch,
  decodeBatches,
  parseBatchHeader,
  type BatchRecord,
  type DecodedRecord,
  type DecodedBatch,
  type BatchHeader,
  type RecordHeader,
  type EncodeOptions,
  BATCH_HEADER_SIZE,
  BATCH_MAGIC,
  MAX_BATCH_BYTES,
  MAX_RECORD_HEADERS,
} from "./record/batch.js";
export { crc32c, crc32cUpdate } from "./record/crc32c.js";
export { murmur2, keyPartition } from "./record/murmur2.js";
export { uuidV7, formatMessageId } from "./record/uuid.js";
