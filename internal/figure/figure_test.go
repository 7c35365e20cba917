package figure

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	ok := Figure{Value: 0.6, Kind: Modelled, How: "closed form",
		Constants: map[string]Constant{"notice_mean": {Value: 720, Unit: "s", Source: Guess}},
		Sweep:     []Point{{Constant: "notice_mean", At: 60, Value: 0.1}}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	if err := (Figure{Value: 3, Kind: Measured, How: "counted"}).Check(); err != nil {
		t.Fatalf("a measured figure needs no constants: %v", err)
	}
	for _, c := range []struct {
		f    Figure
		want string
	}{
		{Figure{Kind: "estimated", How: "x"}, `kind "estimated"`},
		{Figure{Kind: Measured}, "no how"},
		{Figure{Kind: Modelled, How: "x"}, "modelled without constants"},
		{Figure{Kind: Modelled, How: "x", Constants: map[string]Constant{"k": {Value: 1}}}, "constant k has no source"},
		{Figure{Kind: Modelled, How: "x", Constants: map[string]Constant{"k": {Source: Guess}},
			Sweep: []Point{{Constant: "j"}}}, "sweep over j"},
	} {
		err := c.f.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
	err := Set{"good": ok, "bad": {Kind: Measured}}.Check()
	if err == nil || !strings.Contains(err.Error(), "figure bad: no how") || strings.Contains(err.Error(), "good") {
		t.Errorf("set: %v", err)
	}
}

func TestLabelAndJSON(t *testing.T) {
	f := Figure{Value: 0.58, Unit: "fraction", Kind: Modelled, How: "fleet simulation",
		Paper: &Paper{Value: 0.61, Where: "Ads paper VII.G"},
		Constants: map[string]Constant{
			"save":        {Value: 120, Unit: "s", Source: Guess},
			"notice_mean": {Value: 720, Unit: "s", Source: MeasuredPrefix + "median of 18 runs"},
		},
		Sweep: []Point{{Constant: "save", At: 60, Value: 0.6}, {Constant: "notice_mean", At: 60, Value: 0.1}, {Constant: "save", At: 240, Value: 0.5}}}
	if got, want := f.Label(), "modelled; notice_mean 720 s (measured: median of 18 runs), save 120 s (guess)"; got != want {
		t.Errorf("label %q, want %q", got, want)
	}
	if got := f.SweepOf("save"); len(got) != 2 || got[1].At != 240 {
		t.Errorf("sweep of save: %+v", got)
	}
	b, err := json.Marshal(Set{"committed": f})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"kind":"modelled"`, `"constants":{`, `"source":"guess"`, `"sweep":[{"constant":"save","at":60,"value":0.6}`, `"paper":{"value":0.61`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON lacks %s: %s", s, b)
		}
	}
	var back Set
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back["committed"], f) {
		t.Errorf("round trip: %v %+v", err, back)
	}
}
