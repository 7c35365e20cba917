# An exploratory model: punctuation-stripped tokens and a geo feature
# shared with ctr_wide.
let q = unigrams(lower(strip_punct(col("query"))))
input clean_query_ids = hash(dedupe(q), buckets=1000003)
input geo_device      = cross(col("country"), col("device"), buckets=10007)
input query_len       = length(q)
