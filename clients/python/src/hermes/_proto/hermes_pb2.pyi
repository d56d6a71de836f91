from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_TYPE_ANY: _ClassVar[ResourceType]
    RESOURCE_TYPE_TOPIC: _ClassVar[ResourceType]
    RESOURCE_TYPE_GROUP: _ClassVar[ResourceType]
    RESOURCE_TYPE_CLUSTER: _ClassVar[ResourceType]
    RESOURCE_TYPE_TRANSACTIONAL_ID: _ClassVar[ResourceType]

class Operation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_ANY: _ClassVar[Operation]
    OPERATION_READ: _ClassVar[Operation]
    OPERATION_WRITE: _ClassVar[Operation]
    OPERATION_CREATE: _ClassVar[Operation]
    OPERATION_DELETE: _ClassVar[Operation]
    OPERATION_ALTER: _ClassVar[Operation]
    OPERATION_DESCRIBE: _ClassVar[Operation]
    OPERATION_ALL: _ClassVar[Operation]

class PatternType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PATTERN_TYPE_ANY: _ClassVar[PatternType]
    PATTERN_TYPE_LITERAL: _ClassVar[PatternType]
    PATTERN_TYPE_PREFIX: _ClassVar[PatternType]

class Permission(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERMISSION_ANY: _ClassVar[Permission]
    PERMISSION_ALLOW: _ClassVar[Permission]
    PERMISSION_DENY: _ClassVar[Permission]

class DeliveryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_MODE_UNSPECIFIED: _ClassVar[DeliveryMode]
    DELIVERY_MODE_CONSISTENT: _ClassVar[DeliveryMode]
    DELIVERY_MODE_EVENTUAL: _ClassVar[DeliveryMode]
    DELIVERY_MODE_PERFORMANCE: _ClassVar[DeliveryMode]

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    ERROR_CODE_INVALID_ARGUMENT: _ClassVar[ErrorCode]
    ERROR_CODE_TOPIC_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_TOPIC_EXISTS: _ClassVar[ErrorCode]
    ERROR_CODE_INVALID_TOPIC_NAME: _ClassVar[ErrorCode]
    ERROR_CODE_PARTITION_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_MESSAGE_TOO_LARGE: _ClassVar[ErrorCode]
    ERROR_CODE_OFFSET_OUT_OF_RANGE: _ClassVar[ErrorCode]
    ERROR_CODE_RESOURCE_EXHAUSTED: _ClassVar[ErrorCode]
    ERROR_CODE_GROUP_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_NOT_ASSIGNED: _ClassVar[ErrorCode]
    ERROR_CODE_UNKNOWN_MEMBER: _ClassVar[ErrorCode]
    ERROR_CODE_CORRUPT_BATCH: _ClassVar[ErrorCode]
    ERROR_CODE_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_INTERNAL: _ClassVar[ErrorCode]
    ERROR_CODE_GROUP_NOT_EMPTY: _ClassVar[ErrorCode]
    ERROR_CODE_PERMISSION_DENIED: _ClassVar[ErrorCode]
    ERROR_CODE_UNAUTHENTICATED: _ClassVar[ErrorCode]
    ERROR_CODE_ALREADY_EXISTS: _ClassVar[ErrorCode]
    ERROR_CODE_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_CORRUPT_DATA: _ClassVar[ErrorCode]

class AckMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK_MODE_UNSPECIFIED: _ClassVar[AckMode]
    ACK_MODE_AUTO: _ClassVar[AckMode]
    ACK_MODE_PER_MESSAGE: _ClassVar[AckMode]
RESOURCE_TYPE_ANY: ResourceType
RESOURCE_TYPE_TOPIC: ResourceType
RESOURCE_TYPE_GROUP: ResourceType
RESOURCE_TYPE_CLUSTER: ResourceType
RESOURCE_TYPE_TRANSACTIONAL_ID: ResourceType
OPERATION_ANY: Operation
OPERATION_READ: Operation
OPERATION_WRITE: Operation
OPERATION_CREATE: Operation
OPERATION_DELETE: Operation
OPERATION_ALTER: Operation
OPERATION_DESCRIBE: Operation
OPERATION_ALL: Operation
PATTERN_TYPE_ANY: PatternType
PATTERN_TYPE_LITERAL: PatternType
PATTERN_TYPE_PREFIX: PatternType
PERMISSION_ANY: Permission
PERMISSION_ALLOW: Permission
PERMISSION_DENY: Permission
DELIVERY_MODE_UNSPECIFIED: DeliveryMode
DELIVERY_MODE_CONSISTENT: DeliveryMode
DELIVERY_MODE_EVENTUAL: DeliveryMode
DELIVERY_MODE_PERFORMANCE: DeliveryMode
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_INVALID_ARGUMENT: ErrorCode
ERROR_CODE_TOPIC_NOT_FOUND: ErrorCode
ERROR_CODE_TOPIC_EXISTS: ErrorCode
ERROR_CODE_INVALID_TOPIC_NAME: ErrorCode
ERROR_CODE_PARTITION_NOT_FOUND: ErrorCode
ERROR_CODE_MESSAGE_TOO_LARGE: ErrorCode
ERROR_CODE_OFFSET_OUT_OF_RANGE: ErrorCode
ERROR_CODE_RESOURCE_EXHAUSTED: ErrorCode
ERROR_CODE_GROUP_NOT_FOUND: ErrorCode
ERROR_CODE_NOT_ASSIGNED: ErrorCode
ERROR_CODE_UNKNOWN_MEMBER: ErrorCode
ERROR_CODE_CORRUPT_BATCH: ErrorCode
ERROR_CODE_UNAVAILABLE: ErrorCode
ERROR_CODE_INTERNAL: ErrorCode
ERROR_CODE_GROUP_NOT_EMPTY: ErrorCode
ERROR_CODE_PERMISSION_DENIED: ErrorCode
ERROR_CODE_UNAUTHENTICATED: ErrorCode
ERROR_CODE_ALREADY_EXISTS: ErrorCode
ERROR_CODE_NOT_FOUND: ErrorCode
ERROR_CODE_CORRUPT_DATA: ErrorCode
ACK_MODE_UNSPECIFIED: AckMode
ACK_MODE_AUTO: AckMode
ACK_MODE_PER_MESSAGE: AckMode

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "via", "auth_required")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    AUTH_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    principal: str
    via: str
    auth_required: bool
    def __init__(self, principal: _Optional[str] = ..., via: _Optional[str] = ..., auth_required: _Optional[bool] = ...) -> None: ...

class CreateUserRequest(_message.Message):
    __slots__ = ("name", "password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    password: str
    def __init__(self, name: _Optional[str] = ..., password: _Optional[str] = ...) -> None: ...

class CreateUserResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetPasswordRequest(_message.Message):
    __slots__ = ("name", "password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    password: str
    def __init__(self, name: _Optional[str] = ..., password: _Optional[str] = ...) -> None: ...

class SetPasswordResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UserInfo(_message.Message):
    __slots__ = ("name", "mechanisms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanisms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., mechanisms: _Optional[_Iterable[str]] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[UserInfo]
    def __init__(self, users: _Optional[_Iterable[_Union[UserInfo, _Mapping]]] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("principal", "ttl_ms", "description")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    principal: str
    ttl_ms: int
    description: str
    def __init__(self, principal: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class TokenInfo(_message.Message):
    __slots__ = ("id", "principal", "created_unix_ms", "expires_unix_ms", "description")
    ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    principal: str
    created_unix_ms: int
    expires_unix_ms: int
    description: str
    def __init__(self, id: _Optional[str] = ..., principal: _Optional[str] = ..., created_unix_ms: _Optional[int] = ..., expires_unix_ms: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("info", "token")
    INFO_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    info: TokenInfo
    token: str
    def __init__(self, info: _Optional[_Union[TokenInfo, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeTokenResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[TokenInfo]
    def __init__(self, tokens: _Optional[_Iterable[_Union[TokenInfo, _Mapping]]] = ...) -> None: ...

class Acl(_message.Message):
    __slots__ = ("principal", "resource_type", "name", "pattern", "operation", "permission", "host")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    principal: str
    resource_type: ResourceType
    name: str
    pattern: PatternType
    operation: Operation
    permission: Permission
    host: str
    def __init__(self, principal: _Optional[str] = ..., resource_type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ..., pattern: _Optional[_Union[PatternType, str]] = ..., operation: _Optional[_Union[Operation, str]] = ..., permission: _Optional[_Union[Permission, str]] = ..., host: _Optional[str] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("acls",)
    ACLS_FIELD_NUMBER: _ClassVar[int]
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, filters: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: Acl
    def __init__(self, filter: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("acls",)
    ACLS_FIELD_NUMBER: _ClassVar[int]
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...

class Quota(_message.Message):
    __slots__ = ("principal", "produce_bytes_per_second", "fetch_bytes_per_second", "requests_per_second")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    PRODUCE_BYTES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    FETCH_BYTES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    principal: str
    produce_bytes_per_second: int
    fetch_bytes_per_second: int
    requests_per_second: int
    def __init__(self, principal: _Optional[str] = ..., produce_bytes_per_second: _Optional[int] = ..., fetch_bytes_per_second: _Optional[int] = ..., requests_per_second: _Optional[int] = ...) -> None: ...

class SetQuotaRequest(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: Quota
    def __init__(self, quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class SetQuotaResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQuotasRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQuotasResponse(_message.Message):
    __slots__ = ("quotas",)
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    quotas: _containers.RepeatedCompositeFieldContainer[Quota]
    def __init__(self, quotas: _Optional[_Iterable[_Union[Quota, _Mapping]]] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("drain", "cancel")
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    drain: _containers.RepeatedScalarFieldContainer[int]
    cancel: bool
    def __init__(self, drain: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ...) -> None: ...

class PartitionMove(_message.Message):
    __slots__ = ("topic", "partition", "to")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    to: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., to: _Optional[_Iterable[int]] = ..., **kwargs) -> None: ...

class RebalanceResponse(_message.Message):
    __slots__ = ("moves",)
    MOVES_FIELD_NUMBER: _ClassVar[int]
    moves: _containers.RepeatedCompositeFieldContainer[PartitionMove]
    def __init__(self, moves: _Optional[_Iterable[_Union[PartitionMove, _Mapping]]] = ...) -> None: ...

class AddNodeRequest(_message.Message):
    __slots__ = ("node_id", "raft_address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    raft_address: str
    def __init__(self, node_id: _Optional[int] = ..., raft_address: _Optional[str] = ...) -> None: ...

class AddNodeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ErrorInfo(_message.Message):
    __slots__ = ("code", "message", "retriable", "retry_after_ms", "leader_address")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRIABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    message: str
    retriable: bool
    retry_after_ms: int
    leader_address: str
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ..., retriable: _Optional[bool] = ..., retry_after_ms: _Optional[int] = ..., leader_address: _Optional[str] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("offset", "message_id", "key", "headers", "payload", "timestamp_unix_nano", "partition", "mode", "delivery_count")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    offset: int
    message_id: bytes
    key: bytes
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    payload: bytes
    timestamp_unix_nano: int
    partition: int
    mode: DeliveryMode
    delivery_count: int
    def __init__(self, offset: _Optional[int] = ..., message_id: _Optional[bytes] = ..., key: _Optional[bytes] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., payload: _Optional[bytes] = ..., timestamp_unix_nano: _Optional[int] = ..., partition: _Optional[int] = ..., mode: _Optional[_Union[DeliveryMode, str]] = ..., delivery_count: _Optional[int] = ...) -> None: ...

class RecordBatch(_message.Message):
    __slots__ = ("partition", "data")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    partition: int
    data: bytes
    def __init__(self, partition: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("partitions", "retention_ms", "retention_bytes", "max_message_bytes", "default_mode", "segment_bytes", "replication_factor")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    partitions: int
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    default_mode: DeliveryMode
    segment_bytes: int
    replication_factor: int
    def __init__(self, partitions: _Optional[int] = ..., retention_ms: _Optional[int] = ..., retention_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., default_mode: _Optional[_Union[DeliveryMode, str]] = ..., segment_bytes: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("partition", "start_offset", "end_offset", "size_bytes", "ring_end_offset", "ring_evicted")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RING_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RING_EVICTED_FIELD_NUMBER: _ClassVar[int]
    partition: int
    start_offset: int
    end_offset: int
    size_bytes: int
    ring_end_offset: int
    ring_evicted: int
    def __init__(self, partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., size_bytes: _Optional[int] = ..., ring_end_offset: _Optional[int] = ..., ring_evicted: _Optional[int] = ...) -> None: ...

class TopicInfo(_message.Message):
    __slots__ = ("name", "config", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: TopicConfig
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Union[TopicConfig, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "config", "if_not_exists")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: TopicConfig
    if_not_exists: bool
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Union[TopicConfig, _Mapping]] = ..., if_not_exists: _Optional[bool] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicInfo
    def __init__(self, topic: _Optional[_Union[TopicInfo, _Mapping]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicInfo]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicInfo, _Mapping]]] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicInfo
    def __init__(self, topic: _Optional[_Union[TopicInfo, _Mapping]] = ...) -> None: ...

class AlterTopicRequest(_message.Message):
    __slots__ = ("name", "partitions", "retention_ms", "retention_bytes", "max_message_bytes", "default_mode")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    default_mode: DeliveryMode
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., retention_ms: _Optional[int] = ..., retention_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., default_mode: _Optional[_Union[DeliveryMode, str]] = ...) -> None: ...

class AlterTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicInfo
    def __init__(self, topic: _Optional[_Union[TopicInfo, _Mapping]] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("request_id", "topic", "partition", "mode", "records", "batch")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topic: str
    partition: int
    mode: DeliveryMode
    records: _containers.RepeatedCompositeFieldContainer[Record]
    batch: bytes
    def __init__(self, request_id: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., mode: _Optional[_Union[DeliveryMode, str]] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., batch: _Optional[bytes] = ...) -> None: ...

class RecordAck(_message.Message):
    __slots__ = ("partition", "offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    offset: int
    def __init__(self, partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class PublishResponse(_message.Message):
    __slots__ = ("request_id", "acks", "partition", "base_offset", "count", "mode", "error", "leader_address")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    acks: _containers.RepeatedCompositeFieldContainer[RecordAck]
    partition: int
    base_offset: int
    count: int
    mode: DeliveryMode
    error: ErrorInfo
    leader_address: str
    def __init__(self, request_id: _Optional[int] = ..., acks: _Optional[_Iterable[_Union[RecordAck, _Mapping]]] = ..., partition: _Optional[int] = ..., base_offset: _Optional[int] = ..., count: _Optional[int] = ..., mode: _Optional[_Union[DeliveryMode, str]] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., leader_address: _Optional[str] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("topic", "partition", "offset", "max_records", "max_bytes", "max_wait_ms", "packed")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    max_records: int
    max_bytes: int
    max_wait_ms: int
    packed: bool
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., max_records: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., packed: _Optional[bool] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("records", "batches", "start_offset", "high_watermark", "next_offset")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[Record]
    batches: _containers.RepeatedCompositeFieldContainer[RecordBatch]
    start_offset: int
    high_watermark: int
    next_offset: int
    def __init__(self, records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., batches: _Optional[_Iterable[_Union[RecordBatch, _Mapping]]] = ..., start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., next_offset: _Optional[int] = ...) -> None: ...

class StartPosition(_message.Message):
    __slots__ = ("latest", "earliest", "offset", "timestamp_unix_nano")
    LATEST_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    latest: bool
    earliest: bool
    offset: int
    timestamp_unix_nano: int
    def __init__(self, latest: _Optional[bool] = ..., earliest: _Optional[bool] = ..., offset: _Optional[int] = ..., timestamp_unix_nano: _Optional[int] = ...) -> None: ...

class SubscribeOptions(_message.Message):
    __slots__ = ("topic", "group", "partitions", "start", "ack_mode", "ack_wait_ms", "max_deliveries", "max_ack_pending", "dead_letter_topic", "session_timeout_ms", "credit_records", "credit_bytes", "packed", "include_performance", "client_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    ACK_MODE_FIELD_NUMBER: _ClassVar[int]
    ACK_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    MAX_ACK_PENDING_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_TOPIC_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CREDIT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    CREDIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PERFORMANCE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    group: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    start: StartPosition
    ack_mode: AckMode
    ack_wait_ms: int
    max_deliveries: int
    max_ack_pending: int
    dead_letter_topic: str
    session_timeout_ms: int
    credit_records: int
    credit_bytes: int
    packed: bool
    include_performance: bool
    client_id: str
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., start: _Optional[_Union[StartPosition, _Mapping]] = ..., ack_mode: _Optional[_Union[AckMode, str]] = ..., ack_wait_ms: _Optional[int] = ..., max_deliveries: _Optional[int] = ..., max_ack_pending: _Optional[int] = ..., dead_letter_topic: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., credit_records: _Optional[int] = ..., credit_bytes: _Optional[int] = ..., packed: _Optional[bool] = ..., include_performance: _Optional[bool] = ..., client_id: _Optional[str] = ...) -> None: ...

class Credit(_message.Message):
    __slots__ = ("records", "bytes")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    records: int
    bytes: int
    def __init__(self, records: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class PartitionOffset(_message.Message):
    __slots__ = ("topic", "partition", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, records: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class NackRequest(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, records: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("open", "credit", "ack", "nack", "commit", "heartbeat")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    open: SubscribeOptions
    credit: Credit
    ack: AckRequest
    nack: NackRequest
    commit: CommitRequest
    heartbeat: Heartbeat
    def __init__(self, open: _Optional[_Union[SubscribeOptions, _Mapping]] = ..., credit: _Optional[_Union[Credit, _Mapping]] = ..., ack: _Optional[_Union[AckRequest, _Mapping]] = ..., nack: _Optional[_Union[NackRequest, _Mapping]] = ..., commit: _Optional[_Union[CommitRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class Subscribed(_message.Message):
    __slots__ = ("member_id", "session_timeout_ms", "coordinator_address")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    session_timeout_ms: int
    coordinator_address: str
    def __init__(self, member_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., coordinator_address: _Optional[str] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("topic", "partitions", "generation")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    generation: int
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., generation: _Optional[int] = ...) -> None: ...

class Deliveries(_message.Message):
    __slots__ = ("records", "batches", "missed")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[Record]
    batches: _containers.RepeatedCompositeFieldContainer[RecordBatch]
    missed: int
    def __init__(self, records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., batches: _Optional[_Iterable[_Union[RecordBatch, _Mapping]]] = ..., missed: _Optional[int] = ...) -> None: ...

class CommitResult(_message.Message):
    __slots__ = ("offsets", "error")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    error: ErrorInfo
    def __init__(self, offsets: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("subscribed", "assignment", "deliveries", "commit", "error")
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    subscribed: Subscribed
    assignment: Assignment
    deliveries: Deliveries
    commit: CommitResult
    error: ErrorInfo
    def __init__(self, subscribed: _Optional[_Union[Subscribed, _Mapping]] = ..., assignment: _Optional[_Union[Assignment, _Mapping]] = ..., deliveries: _Optional[_Union[Deliveries, _Mapping]] = ..., commit: _Optional[_Union[CommitResult, _Mapping]] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("group", "member_id", "offsets")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group: str
    member_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, group: _Optional[str] = ..., member_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupSummary(_message.Message):
    __slots__ = ("group", "members", "topics")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group: str
    members: int
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group: _Optional[str] = ..., members: _Optional[int] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupSummary]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupSummary, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OffsetsForTimeRequest(_message.Message):
    __slots__ = ("topic", "partitions", "timestamp_unix_nano")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    timestamp_unix_nano: int
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., timestamp_unix_nano: _Optional[int] = ...) -> None: ...

class PartitionTimeOffset(_message.Message):
    __slots__ = ("partition", "offset", "start_offset", "high_watermark")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    partition: int
    offset: int
    start_offset: int
    high_watermark: int
    def __init__(self, partition: _Optional[int] = ..., offset: _Optional[int] = ..., start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class OffsetsForTimeResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionTimeOffset]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionTimeOffset, _Mapping]]] = ...) -> None: ...

class GroupMember(_message.Message):
    __slots__ = ("member_id", "client_id", "topic", "partitions")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    client_id: str
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, member_id: _Optional[str] = ..., client_id: _Optional[str] = ..., topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class GroupPartition(_message.Message):
    __slots__ = ("topic", "partition", "committed_offset", "high_watermark", "lag", "owner", "pending_acks")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PENDING_ACKS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    committed_offset: int
    high_watermark: int
    lag: int
    owner: str
    pending_acks: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., lag: _Optional[int] = ..., owner: _Optional[str] = ..., pending_acks: _Optional[int] = ...) -> None: ...

class DescribeGroupResponse(_message.Message):
    __slots__ = ("group", "generation", "members", "partitions")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group: str
    generation: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMember]
    partitions: _containers.RepeatedCompositeFieldContainer[GroupPartition]
    def __init__(self, group: _Optional[str] = ..., generation: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMember, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[GroupPartition, _Mapping]]] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("status", "node_id", "version")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    status: str
    node_id: str
    version: str
    def __init__(self, status: _Optional[str] = ..., node_id: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterNode(_message.Message):
    __slots__ = ("id", "grpc_address", "http_address")
    ID_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: int
    grpc_address: str
    http_address: str
    def __init__(self, id: _Optional[int] = ..., grpc_address: _Optional[str] = ..., http_address: _Optional[str] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("node", "lag_entries")
    NODE_FIELD_NUMBER: _ClassVar[int]
    LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    node: int
    lag_entries: int
    def __init__(self, node: _Optional[int] = ..., lag_entries: _Optional[int] = ...) -> None: ...

class ClusterPartition(_message.Message):
    __slots__ = ("topic", "partition", "leader", "replicas", "progress", "high_watermark", "target")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    progress: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    high_watermark: int
    target: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., progress: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ..., high_watermark: _Optional[int] = ..., target: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("node_id", "metadata_leader", "nodes", "partitions")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_LEADER_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    metadata_leader: int
    nodes: _containers.RepeatedCompositeFieldContainer[ClusterNode]
    partitions: _containers.RepeatedCompositeFieldContainer[ClusterPartition]
    def __init__(self, node_id: _Optional[int] = ..., metadata_leader: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[ClusterNode, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[ClusterPartition, _Mapping]]] = ...) -> None: ...
