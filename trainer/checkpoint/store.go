package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/sigdata/sig/internal/randid"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Format is the manifest format version.
const Format = 1

// Object names inside a checkpoint's directory: the manifest, and the
// others inside the directory of the Save that wrote them.
const (
	ModelObject    = "model.bin"
	LedgerObject   = "ledger.bin"
	GoodputObject  = "goodput.json"
	ManifestObject = "MANIFEST.json"
	// JournalObject is not part of any checkpoint: it sits next to the
	// sequence directories (see Store.PutJournal).
	JournalObject = "goodput-journal.json"
)

// ObjectRef names one object of a checkpoint.
type ObjectRef struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// Manifest describes a committed checkpoint.
type Manifest struct {
	Format   int    `json:"format"`
	Pipeline string `json:"pipeline"`
	Job      string `json:"job"`
	Seq      int    `json:"seq"`
	// Progress: epochs, committed units, phase, steps.
	Epochs int `json:"epochs"`
	// Units are the committed units, each a block version written as the
	// warehouse names it (blockref.Ref's text: the block id, with
	// ".v<N>" from version 2 on), so the manifest states which version of
	// which block the model trained on; manifests written before Ref
	// existed hold the same strings.
	Units []blockref.Ref `json:"units"`
	Phase string         `json:"phase"`
	Steps uint64         `json:"steps"`
	// Snapshot is the catalog snapshot the last epoch read its blocks at,
	// and Retrained how many Units trained a changed block again (issue
	// 21); absent in checkpoints written before versions.
	Snapshot  int64 `json:"snapshot,omitempty"`
	Retrained int   `json:"retrained,omitempty"`
	// Fingerprint of the model architecture (model.Model.Fingerprint).
	Fingerprint string    `json:"fingerprint"`
	Model       ObjectRef `json:"model"`
	Ledger      ObjectRef `json:"ledger"`
	// Goodput names the job's goodput history up to the checkpoint
	// (trainer/accounting/goodput.History as JSON); nil in checkpoints written before
	// it existed, which restore as before.
	Goodput *ObjectRef `json:"goodput,omitempty"`
	// ParameterServers, in a checkpoint of the caught-up phase whose
	// tables were on parameter servers, is the servers' committed step: a
	// restore rolls them back to it (trainer/embedding/ps Client.Restore).
	// The model object holds the tables too, read back from the servers.
	ParameterServers *ParameterServers `json:"parameter_servers,omitempty"`
	// EventIDs is the number of event ids in the ledger.
	EventIDs int64     `json:"event_ids"`
	Created  time.Time `json:"created"`
}

// ParameterServers is the parameter servers' part of a checkpoint: how many
// held the tables, stacked or not, and the step every one of them
// checkpointed before the manifest was written.
type ParameterServers struct {
	Servers  int   `json:"servers"`
	Stacking bool  `json:"stacking"`
	Step     int64 `json:"step"`
}

// Progress returns the manifest's progress for the controller.
func (m *Manifest) Progress() (control.Progress, error) {
	ph, err := control.ParsePhase(m.Phase)
	if err != nil {
		return control.Progress{}, err
	}
	return control.Progress{Epochs: m.Epochs, Units: append([]blockref.Ref(nil), m.Units...), Phase: ph, Steps: m.Steps,
		Snapshot: m.Snapshot, Retrained: m.Retrained}, nil
}

// Bucket is what checkpoints need of object storage: whole objects written
// and read with their checksum, listed by prefix and deleted in batches.
// *objstore.Store is one; objstore/memstore another, for the tests of which
// checkpoint is the latest and what is kept.
type Bucket interface {
	Put(ctx context.Context, key string, data []byte, metadata map[string]string) (objstore.Info, error)
	Get(ctx context.Context, key string) ([]byte, objstore.Info, error)
	List(ctx context.Context, prefix string) iter.Seq2[objstore.Info, error]
	DeleteMany(ctx context.Context, keys []string) (int, error)
}

// Store reads and writes one pipeline's checkpoints.
type Store struct {
	st       Bucket
	pipeline string
	// Keep is how many committed checkpoints to keep; older ones are
	// deleted by Prune, which the controller calls after a commit. Default 2.
	Keep int
}

// NewStore returns the checkpoint store of pipeline.
func NewStore(st Bucket, pipeline string) (*Store, error) {
	if err := block.ValidateName("pipeline", pipeline); err != nil {
		return nil, err
	}
	return &Store{st: st, pipeline: pipeline, Keep: 2}, nil
}

func seqName(seq int) string { return fmt.Sprintf("%010d", seq) }

func (s *Store) key(seq int, name string) string {
	return block.CheckpointKey(s.pipeline, seqName(seq)+"/"+name)
}

// Checkpoint is what Save writes.
type Checkpoint struct {
	Job         string
	Progress    control.Progress
	Fingerprint string
	Model       []byte
	Ledger      *Ledger
	// Goodput is the job's goodput history to persist with the checkpoint
	// (opaque here); nil writes none.
	Goodput []byte
	// ParameterServers, when the tables are on parameter servers, is what
	// they committed (the caller checkpointed them first).
	ParameterServers *ParameterServers
	Created          time.Time
}

// newSaveID names the objects of one Save.
func newSaveID() string { return randid.Hex(8) }

// Save writes the checkpoint's objects, then its manifest. The checkpoint is
// committed when Save returns nil, and only then — but it may be committed
// although Save failed (the manifest landed, the answer did not), and the
// caller then retrains the epoch and saves the same sequence number again.
// So the objects are named for this Save alone: a retry never overwrites
// what a committed manifest names, and until its own manifest replaces that
// one, the committed checkpoint still loads.
func (s *Store) Save(ctx context.Context, c Checkpoint) (Manifest, error) {
	seq := c.Progress.Epochs
	save := newSaveID()
	led, err := c.Ledger.MarshalBinary()
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{Format: Format, Pipeline: s.pipeline, Job: c.Job, Seq: seq, Epochs: c.Progress.Epochs,
		Units: c.Progress.Units, Phase: c.Progress.Phase.String(), Steps: c.Progress.Steps,
		Snapshot: c.Progress.Snapshot, Retrained: c.Progress.Retrained,
		Fingerprint: c.Fingerprint, EventIDs: c.Ledger.Rows(), Created: c.Created.UTC(), ParameterServers: c.ParameterServers}
	put := func(name string, data []byte) (ObjectRef, error) {
		key := s.key(seq, save+"/"+name)
		if name == ManifestObject {
			key = s.key(seq, name)
		}
		info, err := s.st.Put(ctx, key, data, nil)
		if err != nil {
			return ObjectRef{}, err
		}
		return ObjectRef{Key: info.Key, Size: int64(len(data)), CRC32C: info.Checksum}, nil
	}
	if m.Model, err = put(ModelObject, c.Model); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %d: %w", seq, err)
	}
	if m.Ledger, err = put(LedgerObject, led); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %d: %w", seq, err)
	}
	if c.Goodput != nil {
		ref, err := put(GoodputObject, c.Goodput)
		if err != nil {
			return Manifest{}, fmt.Errorf("checkpoint %d: goodput: %w", seq, err)
		}
		m.Goodput = &ref
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	if _, err := put(ManifestObject, body); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %d: manifest: %w", seq, err)
	}
	return m, nil
}

// Prune deletes the checkpoints older than the Keep newest up to newest (best
// effort: a leftover is harmless, Latest ignores it). It is separate from
// Save so that the time a checkpoint committed, which a preemption
// deadline is measured against, does not include it.
func (s *Store) Prune(ctx context.Context, newest int) {
	if s.Keep <= 0 {
		return
	}
	seqs, err := s.sequences(ctx)
	if err != nil {
		return
	}
	var keys []string
	for _, q := range seqs {
		if q > newest-s.Keep {
			continue
		}
		// The manifest goes first: a half-deleted checkpoint is never read.
		// Then every object of the directory: the checkpoint's, and those
		// of Saves that did not commit.
		man := s.key(q, ManifestObject)
		keys = append(keys, man)
		for info, err := range s.st.List(ctx, s.key(q, "")) {
			if err != nil {
				return
			}
			if info.Key != man {
				keys = append(keys, info.Key)
			}
		}
	}
	if len(keys) > 0 {
		_, _ = s.st.DeleteMany(ctx, keys)
	}
}

// sequences lists the sequence numbers that have a manifest, ascending.
func (s *Store) sequences(ctx context.Context) ([]int, error) {
	prefix := block.CheckpointKey(s.pipeline, "")
	var out []int
	for info, err := range s.st.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		rest := strings.TrimPrefix(info.Key, prefix)
		dir, name, ok := strings.Cut(rest, "/")
		if !ok || name != ManifestObject {
			continue
		}
		if q, err := strconv.Atoi(dir); err == nil && seqName(q) == dir {
			out = append(out, q)
		}
	}
	return out, nil
}

// ErrCorrupt reports a checkpoint whose objects do not match its manifest.
var ErrCorrupt = errors.New("checkpoint: corrupt")

// Latest returns the newest committed checkpoint whose manifest reads back,
// or nil when there is none. Manifests that fail their checksum or do not
// parse are skipped (older checkpoints are consistent too).
func (s *Store) Latest(ctx context.Context) (*Manifest, error) {
	seqs, err := s.sequences(ctx)
	if err != nil {
		return nil, err
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		m, err := s.manifest(ctx, seqs[i])
		if err != nil {
			if errors.Is(err, objstore.ErrCorrupt) || errors.Is(err, ErrCorrupt) || errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, err
		}
		return m, nil
	}
	return nil, nil
}

func (s *Store) manifest(ctx context.Context, seq int) (*Manifest, error) {
	data, _, err := s.st.Get(ctx, s.key(seq, ManifestObject))
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest %d: %v", ErrCorrupt, seq, err)
	}
	if m.Format != Format || m.Seq != seq || m.Pipeline != s.pipeline {
		return nil, fmt.Errorf("%w: manifest %d: format %d, seq %d, pipeline %q", ErrCorrupt, seq, m.Format, m.Seq, m.Pipeline)
	}
	if _, err := m.Progress(); err != nil {
		return nil, fmt.Errorf("%w: manifest %d: %v", ErrCorrupt, seq, err)
	}
	return &m, nil
}

// get reads the object ref names, checking its size and checksum.
func (s *Store) get(ctx context.Context, ref ObjectRef) ([]byte, error) {
	data, info, err := s.st.Get(ctx, ref.Key)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != ref.Size || info.Checksum != ref.CRC32C {
		return nil, fmt.Errorf("%w: %s does not match the manifest", ErrCorrupt, ref.Key)
	}
	return data, nil
}

// LoadGoodput reads the goodput history a manifest names, checking its size
// and checksum; nil when the checkpoint has none.
func (s *Store) LoadGoodput(ctx context.Context, m *Manifest) ([]byte, error) {
	if m.Goodput == nil {
		return nil, nil
	}
	return s.get(ctx, *m.Goodput)
}

// PutJournal replaces the pipeline's goodput journal: what the running
// controller recorded since its last checkpoint, written now and then so
// that a controller restarted after a crash knows what the crash cost. It
// belongs to no checkpoint and commits nothing; the caller says in data
// which checkpoint it follows.
func (s *Store) PutJournal(ctx context.Context, data []byte) error {
	_, err := s.st.Put(ctx, block.CheckpointKey(s.pipeline, JournalObject), data, nil)
	return err
}

// Journal reads the goodput journal; nil when there is none.
func (s *Store) Journal(ctx context.Context) ([]byte, error) {
	data, _, err := s.st.Get(ctx, block.CheckpointKey(s.pipeline, JournalObject))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil
	}
	return data, err
}

// Load reads the model bytes and the ledger a manifest names, checking
// sizes and checksums.
func (s *Store) Load(ctx context.Context, m *Manifest) (modelBytes []byte, ledger *Ledger, err error) {
	if modelBytes, err = s.get(ctx, m.Model); err != nil {
		return nil, nil, err
	}
	lb, err := s.get(ctx, m.Ledger)
	if err != nil {
		return nil, nil, err
	}
	ledger = &Ledger{}
	if err := ledger.UnmarshalBinary(lb); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return modelBytes, ledger, nil
}
