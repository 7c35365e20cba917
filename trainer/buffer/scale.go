package buffer

// Scaling bounds and thresholds of Decide. Zero fields take defaults
// (EnsureDefaults).
type Scaling struct {
	// Min and Max bound the in-flight work units. Defaults 1 and 8.
	Min, Max int
	// Low and High are buffer fullness thresholds in [0, 1]. Defaults 0.25
	// and 0.9.
	Low, High float64
}

// EnsureDefaults fills zero fields.
func (s *Scaling) EnsureDefaults() {
	if s.Min <= 0 {
		s.Min = 1
	}
	if s.Max <= 0 {
		s.Max = 8
	}
	if s.Max < s.Min {
		s.Max = s.Min
	}
	if s.Low <= 0 {
		s.Low = 0.25
	}
	if s.High <= 0 {
		s.High = 0.9
	}
}

// Observation is what the host saw over one interval.
type Observation struct {
	// Buffered and Capacity: the buffer's fullness now.
	Buffered, Capacity int
	// Added and Consumed: examples put in and taken out over the interval.
	Added, Consumed int
	// InFlight is the current number of in-flight units.
	InFlight int
}

// Decide returns the number of work units to keep in flight next (see the
// package doc).
func Decide(s Scaling, o Observation) int {
	s.EnsureDefaults()
	n := o.InFlight
	full := 0.0
	if o.Capacity > 0 {
		full = float64(o.Buffered) / float64(o.Capacity)
	}
	switch {
	case full >= s.High:
		n--
	case full < s.Low, o.Consumed > o.Added && full < 0.5:
		n++
	}
	return min(max(n, s.Min), s.Max)
}
