package ps

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/warehouse/objstore"
)

// Checkpoints. A server writes its shard — configuration, every local row
// and its optimizer state, and the step — as one object
//
//	shard-<i>-of-<n>/step-<step>.bin
//
// then rewrites shard-<i>-of-<n>/MANIFEST.json, last, listing the retained
// checkpoints with their sizes and CRC-32C. A checkpoint exists once the
// manifest names it; a crash between the two writes leaves the old manifest,
// which never names a half-written object. Data objects the manifest no
// longer names are deleted afterwards. A server started on a store holding a
// manifest restores the newest checkpoint it names, and any retained one on
// Restore. The object layout of the data file is in encodeLocked.

type ckEntry struct {
	Step   int64  `json:"step"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

type manifest struct {
	Format      int       `json:"format"`
	Shard       int       `json:"shard"`
	Shards      int       `json:"shards"`
	Checkpoints []ckEntry `json:"checkpoints"` // oldest first
}

const (
	manifestFormat = 1
	ckMagic        = "SIGPSv01"
)

func shardDir(shard, shards int) string { return fmt.Sprintf("shard-%d-of-%d", shard, shards) }

func manifestKey(shard, shards int) string { return shardDir(shard, shards) + "/MANIFEST.json" }

func readManifest(ctx context.Context, st Store, shard, shards int) (*manifest, error) {
	b, err := st.Get(ctx, manifestKey(shard, shards))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("ps: manifest %s: %w", manifestKey(shard, shards), err)
	}
	if m.Format != manifestFormat || m.Shard != shard || m.Shards != shards {
		return nil, fmt.Errorf("ps: manifest %s is format %d of shard %d of %d", manifestKey(shard, shards), m.Format, m.Shard, m.Shards)
	}
	return &m, nil
}

// writeCheckpoint stores data as the checkpoint of step, then the manifest.
// The caller holds ckMu.
func (s *Server) writeCheckpoint(ctx context.Context, step int64, data []byte) (string, error) {
	st := s.cfg.Store
	e := ckEntry{Step: step, Key: fmt.Sprintf("%s/step-%012d.bin", shardDir(s.cfg.Shard, s.cfg.Shards), step),
		Size: int64(len(data)), CRC32C: objstore.Checksum(data)}
	if err := st.Put(ctx, e.Key, data); err != nil {
		return "", err
	}
	var kept []ckEntry
	for _, c := range s.checkpoints {
		if c.Step != step {
			kept = append(kept, c)
		}
	}
	kept = append(kept, e)
	var drop []ckEntry
	if len(kept) > s.cfg.Keep {
		drop = kept[:len(kept)-s.cfg.Keep]
		kept = kept[len(kept)-s.cfg.Keep:]
	}
	m := manifest{Format: manifestFormat, Shard: s.cfg.Shard, Shards: s.cfg.Shards, Checkpoints: kept}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", err
	}
	mk := manifestKey(s.cfg.Shard, s.cfg.Shards)
	if err := st.Put(ctx, mk, mb); err != nil {
		return "", err
	}
	s.checkpoints = kept
	for _, c := range drop {
		if err := st.Delete(ctx, c.Key); err != nil {
			s.cfg.Logger.Warn("ps: deleting an old checkpoint", "key", c.Key, "err", err)
		}
	}
	return mk, nil
}

// restoreLocked loads checkpoint e. The caller holds ckMu (or owns s).
func (s *Server) restoreLocked(ctx context.Context, e ckEntry) error {
	data, err := s.cfg.Store.Get(ctx, e.Key)
	if err != nil {
		return fmt.Errorf("ps: checkpoint of step %d: %w", e.Step, err)
	}
	if int64(len(data)) != e.Size || objstore.Checksum(data) != e.CRC32C {
		return fmt.Errorf("ps: checkpoint %s is corrupt (size %d, want %d; or checksum mismatch)", e.Key, len(data), e.Size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.decodeLocked(data); err != nil {
		return fmt.Errorf("ps: checkpoint %s: %w", e.Key, err)
	}
	if p := s.pending; p != nil {
		p.err = status.Errorf(codes.Aborted, "step %d abandoned: the server was restored to step %d", p.step, s.step)
		close(p.done)
		s.pending = nil
	}
	s.cfg.Logger.Info("ps restored", "shard", s.cfg.Shard, "step", s.step, "key", e.Key)
	return nil
}

// encodeLocked serializes the shard, little-endian:
//
//	"SIGPSv01" | step int64 | shard uint32 | shards uint32 | stacking uint8 |
//	config length uint32 | config (JSON list of tables) |
//	per variable: values (local rows × dim float32), then for Adagrad the
//	accumulators (same shape)
//
// The caller holds mu (read).
func (s *Server) encodeLocked() []byte {
	cfg, err := json.Marshal(s.layout.Tables)
	if err != nil {
		panic(err) // plain structs
	}
	n := len(ckMagic) + 8 + 4 + 4 + 1 + 4 + len(cfg)
	for _, sv := range s.vars {
		n += 4 * (len(sv.w) + len(sv.acc))
	}
	b := make([]byte, 0, n)
	b = append(b, ckMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.step))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.cfg.Shard))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.cfg.Shards))
	if s.layout.Stacking {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cfg)))
	b = append(b, cfg...)
	for _, sv := range s.vars {
		for _, x := range sv.w {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		for _, x := range sv.acc {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}

var errShort = errors.New("truncated")

// decodeLocked installs an encoded shard. The caller holds mu.
func (s *Server) decodeLocked(b []byte) error {
	if len(b) < len(ckMagic)+21 || string(b[:len(ckMagic)]) != ckMagic {
		return errors.New("not a parameter-server checkpoint")
	}
	b = b[len(ckMagic):]
	step := int64(binary.LittleEndian.Uint64(b))
	shard, shards := int(binary.LittleEndian.Uint32(b[8:])), int(binary.LittleEndian.Uint32(b[12:]))
	stacking := b[16] == 1
	cl := int(binary.LittleEndian.Uint32(b[17:]))
	b = b[21:]
	if shard != s.cfg.Shard || shards != s.cfg.Shards {
		return fmt.Errorf("checkpoint of shard %d of %d, this server is %d of %d", shard, shards, s.cfg.Shard, s.cfg.Shards)
	}
	if len(b) < cl {
		return errShort
	}
	var tables []Table
	if err := json.Unmarshal(b[:cl], &tables); err != nil {
		return err
	}
	b = b[cl:]
	l, err := NewLayout(tables, stacking, shards)
	if err != nil {
		return err
	}
	s.install(l)
	for _, sv := range s.vars {
		for _, dst := range [][]float32{sv.w, sv.acc} {
			if len(b) < 4*len(dst) {
				return errShort
			}
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			b = b[4*len(dst):]
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(b))
	}
	s.step = step
	return nil
}
