package figure

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Kind says where a figure's value comes from.
type Kind string

const (
	// Measured: counted on this system's running code.
	Measured Kind = "measured"
	// Modelled: decided by a model and its constants.
	Modelled Kind = "modelled"
)

// Sources of a constant's value other than a citation.
const (
	Guess = "guess"
	// MeasuredPrefix starts the source of a constant that a measurement of
	// this system replaced ("measured: median notice-to-exit of 18 runs").
	MeasuredPrefix = "measured: "
)

// Constant is one input of a figure: its value and where the value comes
// from.
type Constant struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Source is a public source, MeasuredPrefix + how, or Guess (possibly
	// followed by a reason: "guess: ...").
	Source string `json:"source"`
}

// Point is the figure's value with one constant changed.
type Point struct {
	Constant string  `json:"constant"`
	At       float64 `json:"at"`
	Value    float64 `json:"value"`
}

// Paper is the paper's figure that a figure is the analog of.
type Paper struct {
	Value float64 `json:"value"`
	Where string  `json:"where"`
}

// Figure is one number of a report.
type Figure struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	Kind  Kind    `json:"kind"`
	// How says what was measured and how, or names the model.
	How       string              `json:"how"`
	Paper     *Paper              `json:"paper,omitempty"`
	Constants map[string]Constant `json:"constants,omitempty"`
	Sweep     []Point             `json:"sweep,omitempty"`
}

// Set is a report's figures by name.
type Set map[string]Figure

// Check says what is wrong with f, if anything: an unknown kind, no how, a
// modelled figure without constants, a constant without a source, a sweep
// over a constant f does not list.
func (f Figure) Check() error {
	var errs []error
	if f.Kind != Measured && f.Kind != Modelled {
		errs = append(errs, fmt.Errorf("kind %q (want %q or %q)", f.Kind, Measured, Modelled))
	}
	if strings.TrimSpace(f.How) == "" {
		errs = append(errs, errors.New("no how"))
	}
	if f.Kind == Modelled && len(f.Constants) == 0 {
		errs = append(errs, errors.New("modelled without constants"))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Constants)) {
		if strings.TrimSpace(f.Constants[name].Source) == "" {
			errs = append(errs, fmt.Errorf("constant %s has no source", name))
		}
	}
	for _, p := range f.Sweep {
		if _, ok := f.Constants[p.Constant]; !ok {
			errs = append(errs, fmt.Errorf("sweep over %s, which is not among the constants", p.Constant))
		}
	}
	return errors.Join(errs...)
}

// Check checks every figure of s, naming the figure of each error.
func (s Set) Check() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if err := s[name].Check(); err != nil {
			errs = append(errs, fmt.Errorf("figure %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Label is the figure's kind and constants for a line of text:
// "modelled; notice_mean 720 s (guess), save 120 s (guess)". Constants
// come in name order.
func (f Figure) Label() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	for i, name := range slices.Sorted(maps.Keys(f.Constants)) {
		c := f.Constants[name]
		if i == 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(name + " " + strconv.FormatFloat(c.Value, 'g', 4, 64))
		if c.Unit != "" {
			b.WriteString(" " + c.Unit)
		}
		b.WriteString(" (" + c.Source + ")")
	}
	return b.String()
}

// SweepOf returns the points of f's sweep over constant, in sweep order.
func (f Figure) SweepOf(constant string) []Point {
	var out []Point
	for _, p := range f.Sweep {
		if p.Constant == constant {
			out = append(out, p)
		}
	}
	return out
}
