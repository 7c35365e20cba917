package goodput

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// MarshalJSON writes the breakdown as an object keyed by category name, in
// category order, so the JSON report's field names are stable.
func (b Breakdown) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for c := range b {
		if c > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, "%q:", Category(c).String())
		v, err := json.Marshal(b[c])
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes; unknown categories are errors
// so that a renamed category is noticed by whoever reads old reports.
func (b *Breakdown) UnmarshalJSON(data []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*b = Breakdown{}
	for k, v := range m {
		c, ok := ParseCategory(k)
		if !ok {
			return fmt.Errorf("goodput: unknown category %q", k)
		}
		b[c] = v
	}
	return nil
}

// WriteJSON writes r as indented JSON with snake_case field names.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// allScope labels the aggregate row in the text report's job and phase columns.
const allScope = "*"

// row is one scope of the report in display order.
type row struct {
	job, phase string
	s          Summary
	counts     *JobReport // set on a job's total row
}

func (r Report) rows() []row {
	rows := []row{{job: allScope, phase: allScope, s: r.Fleet}}
	for _, p := range r.Phases {
		rows = append(rows, row{job: allScope, phase: p.Phase, s: p})
	}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		rows = append(rows, row{job: j.Job, phase: allScope, s: j.Total, counts: j})
		for _, p := range j.Phases {
			rows = append(rows, row{job: j.Job, phase: p.Phase, s: p})
		}
	}
	return rows
}

// WriteText writes r as two aligned tables: the goodput ratios, then the
// chip-seconds behind them. "*" in the job or phase column is the aggregate
// (the fleet, or all phases).
func WriteText(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ratio := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	if _, err := io.WriteString(w, "goodput\n"); err != nil {
		return err
	}
	fmt.Fprintln(tw, "job\tphase\tsg\trg\tpg\tmpg\tcheckpoints\tfailures\tpreemptions")
	for _, x := range r.rows() {
		c, f, p := "-", "-", "-"
		if x.counts != nil {
			c, f, p = strconv.Itoa(x.counts.Checkpoints), strconv.Itoa(x.counts.Failures), strconv.Itoa(x.counts.Preemptions)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.job, x.phase,
			ratio(x.s.SG), ratio(x.s.RG), ratio(x.s.PG), ratio(x.s.MPG), c, f, p)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	secs := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	if _, err := io.WriteString(w, "\nchip-seconds\n"); err != nil {
		return err
	}
	fmt.Fprint(tw, "job\tphase\tcapacity\tdemand\theld\tall_allocated\tideal")
	for c := range NumCategories {
		fmt.Fprintf(tw, "\t%s", Category(c))
	}
	fmt.Fprintln(tw)
	for _, x := range r.rows() {
		capacity := "-" // only the fleet has a capacity
		if x.job == allScope && x.phase == allScope {
			capacity = secs(x.s.CapacityChipSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", x.job, x.phase, capacity,
			secs(x.s.DemandChipSeconds), secs(x.s.HeldChipSeconds), secs(x.s.AllAllocatedChipSeconds), secs(x.s.IdealChipSeconds))
		for _, v := range x.s.ChipSeconds {
			fmt.Fprintf(tw, "\t%s", secs(v))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
