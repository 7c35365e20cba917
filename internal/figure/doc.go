// Package figure is the one shape in which SIG's reports state a number,
// so that a reader (and `sigctl report`, which plots them) can tell a
// figure this system measured from one a model's constants decided.
//
// A report's JSON carries its figures under "figures", by name:
//
//	"figures": {
//	  "preempted_epochs_committed": {
//	    "value": 0.58, "unit": "fraction", "kind": "modelled",
//	    "how": "virtual-time fleet: a preempted epoch commits when drain + save fit in the notice",
//	    "paper": {"value": 0.61, "where": "Ads paper VII.G"},
//	    "constants": {
//	      "notice_mean": {"value": 720, "unit": "s", "source": "guess"},
//	      "save":        {"value": 120, "unit": "s", "source": "guess"}
//	    },
//	    "sweep": [
//	      {"constant": "notice_mean", "at": 60, "value": 0.12},
//	      {"constant": "notice_mean", "at": 720, "value": 0.58}
//	    ]
//	  }
//	}
//
// kind is "measured" (how says what ran and what was counted; constants,
// if any, are the conditions it ran under, such as a chosen notice length)
// or "modelled" (how names the model; constants are every input that
// decides the value). A constant's source is where its value comes from:
// a public source (a paper's section, a vendor's documentation), "measured:
// …" when a measurement of this system replaced it, or "guess". sweep is
// the figure recomputed with one constant changed at a time, the others at
// their listed values: how much of the figure is the constant. Check holds
// a figure to these rules; every report's test calls it.
//
// What the package does not own: computing figures (each report does), and
// formatting them for people beyond one label (Figure.Label).
package figure
