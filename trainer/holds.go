package trainer

import (
	"errors"
	"fmt"
	"time"

	"github.com/sigdata/sig/trainer/control"
)

// Training holds (paper VI.A) as the run records them, and their release
// by a person.

// HoldRecord is one training hold of the run.
type HoldRecord struct {
	ID       uint64    `json:"id"`
	Kind     string    `json:"kind"`
	Reason   string    `json:"reason"`
	Placed   time.Time `json:"placed"`
	Lifted   time.Time `json:"lifted,omitzero"`
	LiftedBy string    `json:"lifted_by,omitempty"`
}

// ReleaseHold lifts the job's permanent hold (a person acted).
func (c *Controller) ReleaseHold(id uint64) (control.Hold, error) {
	h := c.snapshot().hold
	if h == nil {
		return control.Hold{}, errNoHold
	}
	if id != 0 && h.ID != id {
		return control.Hold{}, fmt.Errorf("%w: the job's hold is #%d", errNoHold, h.ID)
	}
	c.post(msg{ev: control.Event{Kind: control.EvHoldReleased, HoldID: h.ID}})
	return *h, nil
}

var errNoHold = errors.New("no such training hold")

// recordHold logs a hold placed or lifted in the run's hold records.
func (c *Controller) recordHold(now time.Time, a control.Action) {
	switch a.Kind {
	case control.ActPlaceHold:
		c.log.Warn("training hold placed", "id", a.Hold.ID, "kind", a.Hold.Kind, "reason", a.Hold.Reason)
		c.holdLog = append(c.holdLog, HoldRecord{ID: a.Hold.ID, Kind: a.Hold.Kind.String(), Reason: a.Hold.Reason, Placed: now})
	case control.ActLiftHold:
		c.log.Info("training hold lifted", "id", a.Hold.ID, "kind", a.Hold.Kind, "by", a.Reason)
		for i := range c.holdLog {
			if c.holdLog[i].ID == a.Hold.ID && c.holdLog[i].Lifted.IsZero() {
				c.holdLog[i].Lifted, c.holdLog[i].LiftedBy = now, a.Reason
			}
		}
	}
}
