"""Generated protobuf and gRPC code of the Hermes API (hermes.v1).

Do not edit: regenerate with ``scripts/gen_proto.sh``.
"""
