#!/bin/sh
# Regenerates the committed protobuf and gRPC code of the Hermes API
# (src/hermes/_proto) from proto/hermes/v1/hermes.proto, with the
# grpcio-tools pinned in requirements.lock:
#
#   cd clients/python && .venv/bin/pip install --require-hashes -r requirements.lock
#   scripts/gen_proto.sh
#
# Run it after changing the .proto, and commit the result. Installing or
# testing the SDK never needs it.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
out=$here/src/hermes/_proto
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" -m grpc_tools.protoc -I "$root/proto" \
	--python_out="$tmp" --pyi_out="$tmp" --grpc_python_out="$tmp" \
	hermes/v1/hermes.proto

# The generated modules import each other as the top-level package
# "hermes.v1", which would clash with this SDK's own "hermes" package:
# make the import relative.
sed -i 's/^from hermes\.v1 import hermes_pb2 as/from . import hermes_pb2 as/' "$tmp/hermes/v1/hermes_pb2_grpc.py"
grep -q '^from \. import hermes_pb2 as' "$tmp/hermes/v1/hermes_pb2_grpc.py"

for f in hermes_pb2.py hermes_pb2.pyi hermes_pb2_grpc.py; do
	cp "$tmp/hermes/v1/$f" "$out/$f"
done
echo "regenerated $out"
