// Package gen is the synthetic Ads event generator that feeds demos, tests
// and benchmarks (brief, "Warehouse"). Events follow transform.AdsSchema: one
// row per ad impression.
//
// What makes the data worth training on:
//
//   - Queries and ad titles are drawn from one Zipf-distributed vocabulary of
//     pseudo-words, so token frequencies look like real text (a few very
//     common tokens, a long tail).
//   - Categories, advertisers and countries have Zipf popularity.
//   - Half the ads are "relevant": their title reuses query words, so
//     query-title overlap varies from none to full.
//   - Clicks are Bernoulli draws from a logistic model of the features:
//     query-title overlap (strongest), a per-category effect, the device and
//     the log of the bid price. Conversions follow clicks with their own
//     dependence on overlap and category. A model that sees
//     intersect(unigrams(query), unigrams(ad_title)) and the category can
//     learn the labels; one that sees neither cannot beat the base rate.
//   - Event times advance at Config.EventsPerSecond of event time from
//     Config.Start; a fraction Config.LateFraction of events is late (its
//     event time is one to three hours in the past), which exercises late
//     events in ingestion.
//   - UpdateRecord and DeleteRecord make the change records of a stored
//     event (a label arriving later, a deletion; warehouse/record's kinds),
//     keyed as Produce keys the event.
//
// Everything is a deterministic function of Config: the same seed gives the
// same events, byte for byte. Event ids are consecutive from
// Config.FirstEventID.
package gen
