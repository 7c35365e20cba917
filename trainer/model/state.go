package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/sigdata/sig/trainer/embedding/partition"
)

// ErrIncompatible reports parameters saved by a model of another
// architecture (inputs, sizes).
var ErrIncompatible = errors.New("model: incompatible parameters")

const stateMagic = "SIGMODEL1\n"

// Fingerprint identifies the architecture: inputs (names and types), vocab,
// dim and hidden width. Parameters restore only onto the same fingerprint.
func (m *Model) Fingerprint() string {
	var b bytes.Buffer
	for _, in := range m.cfg.Features.Inputs {
		fmt.Fprintf(&b, "%s:%v;", in.Name, in.Type)
	}
	fmt.Fprintf(&b, "vocab=%d;dim=%d;hidden=%d", m.cfg.Vocab, m.cfg.Dim, m.cfg.Hidden)
	if len(m.cfg.Shapes) > 0 {
		for _, sh := range m.shapes {
			fmt.Fprintf(&b, ";%dx%d", sh.Vocab, sh.Dim)
		}
	}
	return fmt.Sprintf("%08x", crc32.ChecksumIEEE(b.Bytes()))
}

// MarshalBinary writes every parameter in plan-independent order: magic,
// fingerprint, steps, b2, b1, w2, w1, then each table row-major, all
// little-endian, then a CRC-32 of everything before it. It first applies a
// pending stale embedding update (Flush): the pipeline drains before a
// checkpoint.
func (m *Model) MarshalBinary() ([]byte, error) {
	m.Flush()
	var b bytes.Buffer
	b.WriteString(stateMagic)
	b.WriteString(m.Fingerprint())
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	w(m.steps)
	w(m.b2)
	w(m.b1)
	w(m.w2)
	w(m.w1)
	for t := range m.tables {
		row := make([]float32, m.shapes[t].Dim)
		for r := int64(0); r < m.shapes[t].Vocab; r++ {
			m.gather(t, r, row)
			w(row)
		}
	}
	w(crc32.ChecksumIEEE(b.Bytes()))
	return b.Bytes(), nil
}

// UnmarshalBinary restores parameters written by MarshalBinary of a model of
// the same architecture, under m's own plan.
func (m *Model) UnmarshalBinary(data []byte) error {
	fp := m.Fingerprint()
	head := len(stateMagic) + len(fp)
	if len(data) < head+4 || string(data[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("%w: not a model state", ErrIncompatible)
	}
	if got := string(data[len(stateMagic):head]); got != fp {
		return fmt.Errorf("%w: architecture %s, this model is %s", ErrIncompatible, got, fp)
	}
	body := data[:len(data)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrIncompatible)
	}
	want := head + 8 + 8 + 8*(len(m.b1)+len(m.w2)+len(m.w1))
	for _, sh := range m.shapes {
		want += 4 * int(sh.Vocab) * sh.Dim
	}
	if len(body) != want {
		return fmt.Errorf("%w: %d bytes, want %d", ErrIncompatible, len(body), want)
	}
	r := bytes.NewReader(body[head:])
	rd := func(v any) { _ = binary.Read(r, binary.LittleEndian, v) }
	var steps uint64
	var b2 float64
	b1 := make([]float64, len(m.b1))
	w2 := make([]float64, len(m.w2))
	w1 := make([]float64, len(m.w1))
	rd(&steps)
	rd(&b2)
	rd(b1)
	rd(w2)
	rd(w1)
	for t := range m.tables {
		row := make([]float32, m.shapes[t].Dim)
		for rr := int64(0); rr < m.shapes[t].Vocab; rr++ {
			rd(row)
			m.setRow(t, rr, row)
		}
	}
	m.steps, m.b2, m.b1, m.w2, m.w1 = steps, b2, b1, w2, w1
	m.pending = nil
	return nil
}

// Replan moves the tables onto plan (e.g. after the slice changed size at a
// phase change), keeping every parameter.
func (m *Model) Replan(plan *partition.Plan) error {
	state, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	old := *m
	if err := m.place(plan); err != nil {
		*m = old
		return err
	}
	if err := m.UnmarshalBinary(state); err != nil {
		*m = old
		return err
	}
	return nil
}

// Finite reports whether every dense parameter is finite (a cheap check
// before a checkpoint).
func (m *Model) Finite() bool {
	ok := func(xs []float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	return ok(m.w1) && ok(m.b1) && ok(m.w2) && ok([]float64{m.b2})
}
