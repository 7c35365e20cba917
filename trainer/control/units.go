package control

import (
	"strconv"
	"strings"
)

// UnitRef names the work unit of block id at version v (issue 21: a raw
// block can change after it was sealed, and each change is a new version).
// Version 1 (or 0, unknown) is the block id itself, so that units and
// checkpoints of blocks that never changed read as they always did; version
// N >= 2 is "<id>.v<N>", the name of that version's object in the
// warehouse (raw/<source>/<id>.v<N>.arrow; block.VersionedID, which this
// copies so that the decision logic links no storage code, and
// TestUnitRefIsTheWarehouseName in package trainer holds the two alike).
// Block ids never contain '.' (warehouse/block.ID), so the suffix is
// unambiguous.
func UnitRef(id string, version int64) string {
	if version <= 1 {
		return id
	}
	return id + ".v" + strconv.FormatInt(version, 10)
}

// ParseUnitRef splits a unit ref into its block id and version (1 when the
// ref has no version suffix).
func ParseUnitRef(ref string) (id string, version int64) {
	i := strings.LastIndex(ref, ".v")
	if i <= 0 {
		return ref, 1
	}
	digits := ref[i+2:]
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 2 || len(digits) > 18 || strconv.FormatInt(v, 10) != digits {
		return ref, 1
	}
	return ref[:i], v
}

// RetrainPolicy says what the controller does with a block that changed
// after it was trained (paper III.C: the controller retrains "previous
// events with new labels").
type RetrainPolicy int

const (
	// RetrainChanged offers a changed block again, at its new version, in
	// a later epoch: after the blocks never trained (the head of the stream
	// first, so freshness does not wait for corrections), oldest change
	// first by event order, in any epoch with room. A block is offered
	// once per version the job has not trained; two versions of one block
	// never share an epoch, since an epoch is planned from one catalog
	// snapshot, where a block has one version.
	RetrainChanged RetrainPolicy = iota
	// RetrainNever trains every block once, at the version the epoch that
	// first took it pinned; later versions are ignored.
	RetrainNever
)

func (p RetrainPolicy) String() string {
	if p == RetrainNever {
		return "never"
	}
	return "changed"
}

// ParseRetrainPolicy reads "changed" (or "") or "never".
func ParseRetrainPolicy(s string) (RetrainPolicy, bool) {
	switch s {
	case "changed", "":
		return RetrainChanged, true
	case "never":
		return RetrainNever, true
	}
	return 0, false
}
