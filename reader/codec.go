package reader

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// serverCodec is the gRPC codec of reader servers: gRPC's proto codec
// (same name, same bytes), except that it marshals into readerBufferPool,
// and that a batchMessage, marshaled already into such a buffer, is handed
// to gRPC as it is.
// gRPC's own codec marshals into the default pool whatever the server's
// BufferPool option says, and that pool zeroes every buffer it hands out,
// a reader's few hundred KiB per batch, each byte of which the marshaling
// then overwrites.
type serverCodec struct{}

// Name implements encoding.CodecV2: the content subtype stays "proto".
func (serverCodec) Name() string { return "proto" }

var marshalCached = proto.MarshalOptions{UseCachedSize: true}

// Marshal implements encoding.CodecV2.
func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*batchMessage); ok { // marshaled already, into a pooled buffer
		return b.take()
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: cannot marshal %T, want proto.Message", v)
	}
	size := proto.Size(m) // UseCachedSize below relies on it
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := marshalCached.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := readerBufferPool.Get(size)
	b, err := marshalCached.MarshalAppend((*buf)[:0], m)
	if err != nil {
		readerBufferPool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, readerBufferPool)}, nil
}

// Unmarshal implements encoding.CodecV2.
func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto: cannot unmarshal into %T, want proto.Message", v)
	}
	buf := data.MaterializeToBuffer(readerBufferPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
