"""Hermes: the Python SDK of the Hermes message broker.

An asyncio client over the broker's gRPC API::

    import hermes

    async with hermes.Client("127.0.0.1:50051") as client:
        await client.create_topic("orders", partitions=3, if_not_exists=True)
        async with await client.producer("orders") as producer:
            await producer.send_and_wait(b"hello", key=b"customer-17")
        consumer = await client.subscribe("orders", group="billing", start=hermes.Start.earliest())
        async for msg in consumer:
            ...

See :class:`Client`, :class:`Producer` and :class:`Consumer`; the packed
record-batch codec is :mod:`hermes.record`.
"""

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    AlreadyExistsError,
    ClosedError,
    CorruptBatchError,
    CorruptDataError,
    DeadlineExceededError,
    ErrorCode,
    GroupNotEmptyError,
    GroupNotFoundError,
    HermesError,
    InternalError,
    InvalidArgumentError,
    InvalidTopicNameError,
    MessageTooLargeError,
    NoGroupError,
    NotAssignedError,
    NotDurableError,
    NotFoundError,
    OffsetOutOfRangeError,
    PartitionNotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TopicExistsError,
    TopicNotFoundError,
    UnauthenticatedError,
    UnavailableError,
    UnknownMemberError,
    WrongAckModeError,
)
from .record import Record, key_partition, murmur2, new_message_id  # noqa: E402
from .types import (  # noqa: E402
    AckMode,
    GroupInfo,
    GroupMember,
    GroupPartition,
    GroupSummary,
    HealthStatus,
    Message,
    Mode,
    PartitionInfo,
    PartitionOffset,
    PartitionTimeOffset,
    RecordMetadata,
    RetryPolicy,
    Start,
    TopicConfig,
    TopicInfo,
)
from .client import DEFAULT_ADDRESS, Client, FetchResult, WhoAmI, connect  # noqa: E402
from .producer import Producer  # noqa: E402
from .consumer import Consumer  # noqa: E402

__all__ = [
    "__version__",
    "DEFAULT_ADDRESS",
    "Client",
    "connect",
    "Producer",
    "Consumer",
    "FetchResult",
    "WhoAmI",
    "Record",
    "Message",
    "RecordMetadata",
    "Mode",
    "AckMode",
    "Start",
    "RetryPolicy",
    "TopicConfig",
    "TopicInfo",
    "PartitionInfo",
    "GroupSummary",
    "GroupMember",
    "GroupPartition",
    "GroupInfo",
    "PartitionOffset",
    "PartitionTimeOffset",
    "HealthStatus",
    "murmur2",
    "key_partition",
    "new_message_id",
    "ErrorCode",
    "HermesError",
    "InvalidArgumentError",
    "TopicNotFoundError",
    "TopicExistsError",
    "InvalidTopicNameError",
    "PartitionNotFoundError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "ResourceExhaustedError",
    "GroupNotFoundError",
    "NotAssignedError",
    "UnknownMemberError",
    "CorruptBatchError",
    "UnavailableError",
    "InternalError",
    "GroupNotEmptyError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "AlreadyExistsError",
    "NotFoundError",
    "CorruptDataError",
    "DeadlineExceededError",
    "ClosedError",
    "NoGroupError",
    "WrongAckModeError",
    "NotDurableError",
]
