package sigd

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd/trainers"
	"github.com/sigdata/sig/transform/graphpb"
	"github.com/sigdata/sig/workers"
)

func stateToProto(s matching.MemoState) sigv1.BlockState {
	switch s {
	case matching.MemoPending:
		return sigv1.BlockState_BLOCK_STATE_PENDING
	case matching.MemoReady:
		return sigv1.BlockState_BLOCK_STATE_READY
	case matching.MemoFailed:
		return sigv1.BlockState_BLOCK_STATE_FAILED
	}
	return sigv1.BlockState_BLOCK_STATE_UNSPECIFIED
}

func rawBlockToProto(b matching.Block) *sigv1.BlockRead {
	out := &sigv1.BlockRead{BlockId: b.Ref.ID(), RawObject: b.RawObject, State: sigv1.BlockState_BLOCK_STATE_READY,
		Rows: b.Rows, Events: &sigv1.EventRange{StartMicros: b.MinEvent, EndMicros: b.MaxEvent + 1}, Version: b.Ref.Version()}
	for _, p := range b.Parts {
		out.Parts = append(out.Parts, &sigv1.BlockRead{BlockId: p.ID, Version: p.Ref().Version(), Rows: p.Rows})
	}
	return out
}

// blockToProto is an input's block; its raw object and event range are in
// the solution's raw_blocks (sig.proto, BlockRead).
func blockToProto(b *matching.BlockSolution) *sigv1.BlockRead {
	return &sigv1.BlockRead{
		BlockId: b.Memo.ID(), MemoObject: b.Object, MemoColumn: b.Column, State: stateToProto(b.State),
		Reason: b.Error, Rows: b.Rows, Bytes: b.Bytes, Version: b.Memo.InputVersion(),
	}
}

// SolutionToProto converts a read solution.
func SolutionToProto(s *matching.Solution) *sigv1.ReadSolution {
	out := &sigv1.ReadSolution{
		Client: s.Client, Pipeline: s.Pipeline, RawSource: s.Source,
		Range:       &sigv1.EventRange{StartMicros: s.From, EndMicros: s.To},
		BlocksReady: uint32(s.Ready), BlocksPending: uint32(s.Pending), BlocksFailed: uint32(s.Failed),
		Complete: s.Complete(), Snapshot: s.Snapshot,
	}
	for _, b := range s.Raw {
		out.RawBlocks = append(out.RawBlocks, rawBlockToProto(b))
	}
	for i := range s.Inputs {
		in := &s.Inputs[i]
		pi := &sigv1.InputSolution{Input: in.Name, ComponentKey: in.Component.String(), Type: in.Type,
			Columns: in.Columns, CanonicalDsl: in.DSL, Computed: in.Computed, ResidualDsl: in.Residual, Reason: in.Reason}
		for j := range in.Blocks {
			pi.Blocks = append(pi.Blocks, blockToProto(&in.Blocks[j]))
		}
		for _, mn := range in.MemoNodes {
			pn := &sigv1.MemoNode{Key: mn.Key.String(), Type: mn.Type, CanonicalDsl: mn.DSL}
			for j := range mn.Blocks {
				pn.Blocks = append(pn.Blocks, blockToProto(&mn.Blocks[j]))
			}
			pi.MemoNodes = append(pi.MemoNodes, pn)
		}
		out.Inputs = append(out.Inputs, pi)
	}
	return out
}

// keysToProto writes component keys as the API carries them, in hex
// (canon.ParseKey reads them back where a request enters).
func keysToProto(ks []canon.Key) []string {
	if len(ks) == 0 {
		return nil
	}
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return out
}

// grpcError maps errors of the layers below to gRPC statuses: bad input is
// InvalidArgument naming the field, a missing pipeline NotFound.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ie *matching.InputError
	if errors.As(err, &ie) {
		return status.Errorf(codes.InvalidArgument, "%s: %v", ie.Field, ie.Err)
	}
	var fe *graphpb.FieldError
	if errors.As(err, &fe) {
		return status.Errorf(codes.InvalidArgument, "%s", fe.Error())
	}
	if errors.Is(err, matching.ErrNotFound) {
		return status.Error(codes.NotFound, err.Error())
	}
	if errors.Is(err, trainers.ErrTooMany) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	if errors.Is(err, workers.ErrQuota) {
		return status.Errorf(codes.ResourceExhausted, "%v (sigd --max-queued-per-client); nothing was registered: submit a shorter range, or again when the queue has drained", err)
	}
	return status.Error(codes.Internal, err.Error())
}
