package control

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
